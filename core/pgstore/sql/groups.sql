-- $1 group name (null = every group), $2 include cursors, $3 now (null = the database clock)
-- Lag and cursor counts from the queues' summaries (queen.summary), active
-- leases from the live leases (queen.leases); the cursors, when asked
-- for, one per partition.
WITH sm AS (
    SELECT x.name AS queue_name, s.group_name, s.partitions, s.lag
    FROM queen.queues x CROSS JOIN LATERAL queen.summary(x.id) s
    WHERE x.name IN (SELECT queue_name FROM queen.subscriptions WHERE $1::text IS NULL OR group_name = $1)
      AND s.group_name <> ''
)
SELECT coalesce(json_agg(g ORDER BY g.group), '[]'::json)
FROM (
    SELECT s.group_name AS "group",
           coalesce(sum(sm.lag), 0)::bigint AS lag,
           json_agg(json_build_object(
               'group', s.group_name, 'queue', s.queue_name, 'subscriptionMode', s.mode,
               'subscriptionFrom', s.from_ts, 'partitions', coalesce(sm.partitions, 0),
               'lag', coalesce(sm.lag, 0), 'activeLeases', l.leases,
               'cursors', CASE WHEN $2::boolean THEN cur.cursors END)
               ORDER BY s.queue_name) AS queues
    FROM queen.subscriptions s
    LEFT JOIN queen.queues x ON x.name = s.queue_name
    LEFT JOIN sm ON sm.queue_name = s.queue_name AND sm.group_name = s.group_name
    CROSS JOIN LATERAL (
        SELECT count(*) AS leases FROM queen.leases l
        JOIN queen.consumers c ON c.partition_id = l.partition_id
         AND c.group_name = l.group_name AND c.lease_id = l.lease_id
        WHERE l.group_name = s.group_name AND c.queue_id = x.id
          AND c.lease_expires_at > coalesce($3::timestamptz, now())
    ) l
    CROSS JOIN LATERAL (
        SELECT coalesce(json_agg(json_build_object(
                   'queue', s.queue_name, 'partition', p.name, 'partitionId', p.id,
                   'committed', queen.group_position(p.id, c.committed, s.from_ts),
                   'lastOffset', p.last_offset,
                   'lag', p.last_offset - queen.group_position(p.id, c.committed, s.from_ts),
                   'attempts', coalesce(c.attempts, 0), 'leaseId', c.lease_id,
                   'leaseExpiresAt', c.lease_expires_at, 'batchEnd', c.batch_end,
                   'worker', c.worker_id) ORDER BY p.name), '[]'::json) AS cursors
        FROM queen.partitions p
        LEFT JOIN queen.consumers c ON c.partition_id = p.id AND c.group_name = s.group_name
        WHERE $2::boolean AND p.queue_id = x.id
    ) cur
    WHERE $1::text IS NULL OR s.group_name = $1
    GROUP BY s.group_name
) g
