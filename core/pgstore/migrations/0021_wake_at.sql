-- 0021: the wake-up handshake of subscriptions delivered by dispatcher runs
-- (docs/subscriptions.md §5). wake_at is when a run was started or last
-- renewed for the subscription; null: none is running. A push starts a
-- run only for a subscription whose wake_at is null or older than
-- queen.WakeStale (its run died); a run renews it while it delivers and
-- clears it once it has caught up, before its last look at the backlog,
-- so a push committed after that look finds it clear and starts the next
-- run. It replaces wake_pending, which nothing read.
ALTER TABLE queen.subscription_targets ADD COLUMN wake_at timestamptz;
ALTER TABLE queen.subscription_targets DROP COLUMN wake_pending;
