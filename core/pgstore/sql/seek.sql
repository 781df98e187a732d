SELECT queen.seek($1::text, $2::text, $3::json, $4::timestamptz)
