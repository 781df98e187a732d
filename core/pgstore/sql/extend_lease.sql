SELECT queen.extend_lease_v2($1::uuid, $2::int, $3::timestamptz)
