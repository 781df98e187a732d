-- $1 partition id, $2 transaction id, $3 consumer group (null = all)
WITH d AS (
    DELETE FROM queen.dlq
    WHERE partition_id = $1::uuid AND transaction_id = $2
      AND ($3::text IS NULL OR consumer_group = $3)
    RETURNING 1
)
SELECT count(*) FROM d
