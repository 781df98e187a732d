SELECT queen.pop($1::json, $2::timestamptz)
