-- $1 group, $2 queue (null = every queue)
WITH s AS (
    DELETE FROM queen.subscriptions
    WHERE group_name = $1 AND ($2::text IS NULL OR queue_name = $2)
    RETURNING queue_name
), t AS (
    DELETE FROM queen.subscription_targets
    WHERE group_name = $1 AND ($2::text IS NULL OR queue_name = $2)
    RETURNING 1
), c AS (
    DELETE FROM queen.consumers c
    USING queen.queues x
    WHERE c.queue_id = x.id AND c.group_name = $1 AND ($2::text IS NULL OR x.name = $2)
    RETURNING 1
), r AS (
    DELETE FROM queen.ready r
    USING queen.queues x
    WHERE r.queue_id = x.id AND r.group_name = $1 AND ($2::text IS NULL OR x.name = $2)
    RETURNING 1
), rc AS (
    DELETE FROM queen.ready_cursor r
    USING queen.queues x
    WHERE r.queue_id = x.id AND r.group_name = $1 AND ($2::text IS NULL OR x.name = $2)
    RETURNING 1
)
SELECT (SELECT count(*) FROM s) + (SELECT count(*) FROM t) + (SELECT count(*) FROM c)
