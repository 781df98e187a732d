-- $1 partition id, $2 transaction id
SELECT coalesce(json_agg(json_build_object(
           'id', d.id, 'queue', d.queue_name, 'partition', d.partition_name,
           'partitionId', d.partition_id, 'offset', d.msg_offset, 'messageId', d.message_id,
           'transactionId', d.transaction_id, 'data', queen.payload_json(d.payload, d.key_id), 'keyId', d.key_id, 'traceId', d.trace_id,
           'consumerGroup', d.consumer_group, 'errorMessage', d.error,
           'retryCount', d.attempts, 'createdAt', d.created_at, 'failedAt', d.failed_at)
       ORDER BY d.id), '[]'::json)
FROM queen.dlq d
WHERE d.partition_id = $1::uuid AND d.transaction_id = $2
