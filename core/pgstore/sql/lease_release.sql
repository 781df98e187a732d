-- $1 lease id, $2 now (null: the database clock)
SELECT queen.release_lease($1::uuid, $2::timestamptz)::bigint
