-- $1 group, $2 queue (null = every queue)
SELECT queen.delete_group($1, $2)
