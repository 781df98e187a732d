-- $1 queue, $2 group, $3 partition, $4 from, $5 to, $6 limit, $7 offset, $8 the most total counts,
-- $9 and $10 the cursor: the page starts after (failed_at, id) in the listing's order
WITH f AS NOT MATERIALIZED (  -- (inlined in each use: the page goes by dlq_failed or dlq_queue)
    SELECT * FROM queen.dlq
    WHERE ($1::text IS NULL OR queue_name = $1)
      AND ($2::text IS NULL OR consumer_group = $2)
      AND ($3::text IS NULL OR partition_name = $3)
      AND ($4::timestamptz IS NULL OR failed_at >= $4)
      AND ($5::timestamptz IS NULL OR failed_at <= $5)
)
SELECT json_build_object(
    -- by queue only (or not at all): the exact count kept per queue
    -- (queen.dlq_counts); by more: counted, up to $8
    'exact', $2::text IS NULL AND $3::text IS NULL AND $4::timestamptz IS NULL AND $5::timestamptz IS NULL,
    'total', CASE WHEN $2::text IS NULL AND $3::text IS NULL AND $4::timestamptz IS NULL AND $5::timestamptz IS NULL
                  THEN (SELECT coalesce(sum(k.n), 0) FROM queen.dlq_counts k WHERE $1::text IS NULL OR k.queue_name = $1)
                  ELSE (SELECT count(*) FROM (SELECT 1 FROM f LIMIT $8) c) END,
    'messages', coalesce((
        SELECT json_agg(json_build_object(
                   'id', d.id, 'queue', d.queue_name, 'partition', d.partition_name,
                   'partitionId', d.partition_id, 'offset', d.msg_offset, 'messageId', d.message_id,
                   'transactionId', d.transaction_id, 'data', queen.payload_json(d.payload, d.key_id), 'keyId', d.key_id, 'traceId', d.trace_id,
                   'consumerGroup', d.consumer_group, 'errorMessage', d.error,
                   'retryCount', d.attempts, 'createdAt', d.created_at, 'failedAt', d.failed_at)
               ORDER BY d.failed_at DESC, d.id DESC)
        FROM (SELECT * FROM f
              WHERE $9::timestamptz IS NULL OR (f.failed_at, f.id) < ($9::timestamptz, $10::bigint)
              ORDER BY failed_at DESC, id DESC LIMIT $6 OFFSET $7) d), '[]'::json))
