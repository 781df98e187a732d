-- $1 queue name
SELECT CASE WHEN queen.delete_queue($1) THEN 1 ELSE 0 END::bigint
