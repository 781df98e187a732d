-- $1 queue, $2 group, $3 messages settled, $4 why the delivery failed as a
-- whole ('' when the target answered), $5 now (null: the database clock)
WITH u AS (
    UPDATE queen.subscription_targets
    SET delivered = delivered + $3::int,
        last_delivery_at = CASE WHEN $4::text = '' THEN coalesce($5::timestamptz, now()) ELSE last_delivery_at END,
        last_error = CASE WHEN $4::text = '' THEN last_error ELSE $4::text END,
        last_error_at = CASE WHEN $4::text = '' THEN last_error_at ELSE coalesce($5::timestamptz, now()) END
    WHERE queue_name = $1 AND group_name = $2
    RETURNING 1
)
SELECT count(*) FROM u
