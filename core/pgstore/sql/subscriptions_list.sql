-- $1 queue, $2 group (both null: every subscription)
SELECT coalesce(json_agg(row_to_json(t) ORDER BY t.queue_name, t.group_name), '[]')
FROM queen.subscription_targets t
WHERE $1::text IS NULL OR (t.queue_name = $1 AND t.group_name = $2::text)
