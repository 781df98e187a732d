SELECT queen.extend_lease($1::uuid, $2::int, $3::timestamptz)
