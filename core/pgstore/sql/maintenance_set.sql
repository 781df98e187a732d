SELECT queen.set_maintenance($1::text, $2::boolean, $3::timestamptz)
