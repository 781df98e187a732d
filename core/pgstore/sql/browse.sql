-- $1 queue, $2 partition (null = every partition), $3 from offset, $4 limit,
-- $5 now (null = the database clock). Each message carries its status
-- derived from the cursors: dead_letter when a group dead-lettered it;
-- completed when every subscribed group's position is at or past it;
-- processing when a live lease covers it; pending otherwise (also when no
-- group subscribes).
SELECT coalesce(json_agg(json_build_object(
           'id', queen.message_id(m.pid, m.off), 'transactionId', m.txid, 'partitionId', m.pid,
           'partition', m.pname, 'queue', m.qname, 'offset', m.off, 'data', queen.payload_json(m.payload, m.key_id), 'keyId', m.key_id,
           'traceId', m.trace_id, 'producerSub', m.producer_sub, 'createdAt', m.created_at, 'retryCount', 0,
           'status', m.status, 'queueStatus', m.status,
           'busStatus', json_build_object('consumedBy', m.consumed_by, 'totalGroups', m.total))
         ORDER BY m.pname, m.off), '[]'::json)
FROM (
    SELECT b.*,
           CASE WHEN EXISTS (SELECT 1 FROM queen.dlq d
                             WHERE d.partition_id = b.pid AND d.transaction_id = b.txid AND d.msg_offset = b.off)
                  THEN 'dead_letter'
                WHEN b.total > 0 AND b.consumed_by = b.total THEN 'completed'
                WHEN EXISTS (SELECT 1 FROM queen.consumers c
                             WHERE c.partition_id = b.pid AND c.lease_id IS NOT NULL
                               AND c.lease_expires_at > coalesce($5::timestamptz, now())
                               AND c.committed < b.off AND b.off <= c.batch_end)
                  THEN 'processing'
                ELSE 'pending' END AS status
    FROM (
        SELECT p.id AS pid, p.name AS pname, x.name AS qname, sg.base_offset + u.ord - 1 AS off,
               queen.seg_txid(u.txid, sg.created_at, p.num, sg.base_offset + u.ord - 1, sg.id_seed) AS txid,
               u.payload, sg.trace_ids[u.ord] AS trace_id, sg.created_at, sg.producer_sub,
               sg.key_id,
               g.total, (SELECT count(*) FROM unnest(g.positions) pos WHERE pos >= sg.base_offset + u.ord - 1) AS consumed_by
        FROM queen.queues x
        JOIN queen.partitions p ON p.queue_id = x.id
        CROSS JOIN LATERAL (
            SELECT count(*) AS total,
                   array_agg(queen.group_position(p.id, c.committed, sb.from_ts)) AS positions
            FROM queen.subscriptions sb
            LEFT JOIN queen.consumers c ON c.partition_id = p.id AND c.group_name = sb.group_name
            WHERE sb.queue_name = x.name) g
        CROSS JOIN LATERAL (
            SELECT s.* FROM queen.segments s
            WHERE s.partition_num = p.num
              AND s.base_offset >= coalesce((SELECT max(base_offset) FROM queen.segments
                                             WHERE partition_num = p.num AND base_offset <= $3), 0)
            ORDER BY s.base_offset
            LIMIT $4) sg
        CROSS JOIN LATERAL unnest(queen.seg_all(sg.txid, sg.txids), queen.seg_all(sg.payload, sg.payloads))
                           WITH ORDINALITY AS u(txid, payload, ord)
        WHERE x.name = $1 AND ($2::text IS NULL OR p.name = $2)
          AND sg.base_offset + u.ord - 1 >= $3
        ORDER BY p.name, off
        LIMIT $4
    ) b
) m
