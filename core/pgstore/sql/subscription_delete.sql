-- $1 queue, $2 group
WITH d AS (
    DELETE FROM queen.subscription_targets WHERE queue_name = $1 AND group_name = $2 RETURNING 1
)
SELECT count(*) FROM d
