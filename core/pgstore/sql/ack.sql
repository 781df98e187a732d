SELECT queen.ack($1::json, $2::timestamptz)
