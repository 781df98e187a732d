-- $1 now (null: the database clock), $2 batch, $3 the deployment's default dlqRetentionSeconds
SELECT queen.reap_dlq($1::timestamptz, $2::int, $3::int)::bigint
