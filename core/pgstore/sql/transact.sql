SELECT queen.transact($1::json, $2::json, $3::uuid[], $4::timestamptz)
