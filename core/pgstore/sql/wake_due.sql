-- $1 now (null: the database clock), $2 how old a wake may be, in
-- milliseconds, before it counts as lost. The reaper's safety net: marks
-- woken and returns the enabled subscriptions without a live wake that a
-- pop could serve now — a ready partition that is neither waiting (delay,
-- the cursor's retryDelay) nor leased, or, for a group
-- that never read the queue, any message at all. Rows another transaction
-- holds are left to it.
WITH due AS (
    SELECT t.queue_name, t.group_name
    FROM queen.subscription_targets t
    LEFT JOIN queen.queues x ON x.name = t.queue_name
    WHERE t.enabled
      AND (t.wake_at IS NULL
           OR t.wake_at <= coalesce($1::timestamptz, now()) - make_interval(secs => $2::float8 / 1000))
      AND (EXISTS (
               SELECT 1 FROM queen.ready rd
               WHERE rd.queue_id = x.id AND rd.group_name = t.group_name
                 AND (rd.not_before IS NULL OR rd.not_before <= coalesce($1::timestamptz, now()))
                 AND NOT coalesce((SELECT c.lease_id IS NOT NULL AND c.lease_expires_at > coalesce($1::timestamptz, now())
                                          OR c.retry_at > coalesce($1::timestamptz, now())
                                   FROM queen.consumers c
                                   WHERE c.partition_id = rd.partition_id AND c.group_name = t.group_name), false))
           OR NOT EXISTS (SELECT 1 FROM queen.subscriptions s
                          WHERE s.queue_name = t.queue_name AND s.group_name = t.group_name)
              AND EXISTS (SELECT 1 FROM queen.partitions p WHERE p.queue_id = x.id AND p.last_offset >= 0))
    ORDER BY t.queue_name, t.group_name
    FOR UPDATE OF t SKIP LOCKED
),
m AS (
    UPDATE queen.subscription_targets t SET wake_at = coalesce($1::timestamptz, now())
    FROM due
    WHERE t.queue_name = due.queue_name AND t.group_name = due.group_name
    RETURNING t.queue_name, t.group_name
)
SELECT coalesce(json_agg(json_build_object('queue', m.queue_name, 'group', m.group_name)
                         ORDER BY m.queue_name, m.group_name), '[]')
FROM m
