SELECT queen.dlq_retry($1::uuid, $2::text, $3::text, $4::text, $5::timestamptz)
