SELECT queen.reap($1::timestamptz, $2::int)
