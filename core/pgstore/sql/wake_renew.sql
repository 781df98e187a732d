-- $1 queue, $2 group, $3 now (null: the database clock): a live run
-- renews its wake, so that it does not count as lost. Returns the rows
-- changed (0: the wake was cleared, or the subscription deleted).
WITH u AS (
    UPDATE queen.subscription_targets SET wake_at = coalesce($3::timestamptz, now())
    WHERE queue_name = $1 AND group_name = $2 AND wake_at IS NOT NULL
    RETURNING 1
)
SELECT count(*) FROM u
