SELECT queen.reap_backlog($1::timestamptz, $2::int, $3::int, $4::int)
