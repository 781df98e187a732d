SELECT queen.push($1::json, $2::timestamptz)
