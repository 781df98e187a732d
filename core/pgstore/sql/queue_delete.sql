-- $1 queue name. Dead letters are kept: they survive the log.
WITH d AS (
    DELETE FROM queen.queues WHERE name = $1 RETURNING 1
), s AS (
    DELETE FROM queen.subscriptions WHERE queue_name = $1 RETURNING 1
)
SELECT (SELECT count(*) FROM d) + (SELECT count(*) FROM s)
