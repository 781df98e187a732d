SELECT queen.configure($1::text, $2::text, $3::text, $4::json, $5::timestamptz)
