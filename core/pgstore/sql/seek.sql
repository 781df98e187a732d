SELECT queen.seek_v2($1::text, $2::text, $3::json, $4::timestamptz)
