SELECT queen.reap_step($1::timestamptz, $2::text, $3::int, $4::int, $5::int)
