-- $1 queue, $2 partition (null = every partition), $3 from offset, $4 limit
SELECT coalesce(json_agg(m ORDER BY m.partition, m.offset), '[]'::json)
FROM (
    SELECT queen.message_id(p.id, sg.base_offset + u.ord - 1) AS id,
           u.txid AS "transactionId", p.id AS "partitionId", p.name AS partition, x.name AS queue,
           sg.base_offset + u.ord - 1 AS "offset", sg.payloads[u.ord]::json AS data,
           sg.trace_ids[u.ord] AS "traceId", sg.created_at AS "createdAt", 0 AS "retryCount"
    FROM queen.queues x
    JOIN queen.partitions p ON p.queue_id = x.id
    CROSS JOIN LATERAL (
        SELECT s.* FROM queen.segments s
        WHERE s.partition_id = p.id
          AND s.base_offset >= coalesce((SELECT max(base_offset) FROM queen.segments
                                         WHERE partition_id = p.id AND base_offset <= $3), 0)
        ORDER BY s.base_offset
        LIMIT $4) sg
    CROSS JOIN LATERAL unnest(sg.txids) WITH ORDINALITY AS u(txid, ord)
    WHERE x.name = $1 AND ($2::text IS NULL OR p.name = $2)
      AND sg.base_offset + u.ord - 1 >= $3
    ORDER BY p.name, "offset"
    LIMIT $4
) m
