-- $1 queue, $2 group: the subscription's run has caught up and holds no
-- wake any more (the next push starts a run). Returns the rows changed.
WITH u AS (
    UPDATE queen.subscription_targets SET wake_at = NULL
    WHERE queue_name = $1 AND group_name = $2 AND wake_at IS NOT NULL
    RETURNING 1
)
SELECT count(*) FROM u
