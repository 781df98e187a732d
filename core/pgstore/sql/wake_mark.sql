-- $1 queues, $2 groups (in pairs; a null group: every subscription of the
-- queue), $3 now (null: the database clock), $4 how old a wake may be, in
-- milliseconds, before it counts as lost. Marks woken the enabled
-- subscriptions of the pairs that have no live wake and returns them: a
-- dispatcher run is to be started for each. Rows are locked in key order,
-- so concurrent marks of several queues never deadlock; a mark that waited
-- for another sees its wake and leaves the row alone.
WITH k AS (
    SELECT k.q, k.g FROM unnest($1::text[], $2::text[]) AS k(q, g)
),
due AS (
    SELECT t.queue_name, t.group_name
    FROM queen.subscription_targets t
    WHERE EXISTS (SELECT 1 FROM k WHERE k.q = t.queue_name AND (k.g IS NULL OR k.g = t.group_name))
      AND t.enabled
      AND (t.wake_at IS NULL
           OR t.wake_at <= coalesce($3::timestamptz, now()) - make_interval(secs => $4::float8 / 1000))
    ORDER BY t.queue_name, t.group_name
    FOR UPDATE OF t
),
m AS (
    UPDATE queen.subscription_targets t SET wake_at = coalesce($3::timestamptz, now())
    FROM due
    WHERE t.queue_name = due.queue_name AND t.group_name = due.group_name
    RETURNING t.queue_name, t.group_name
)
SELECT coalesce(json_agg(json_build_object('queue', m.queue_name, 'group', m.group_name)
                         ORDER BY m.queue_name, m.group_name), '[]')
FROM m
