-- $1 group name (null = every group), $2 include cursors, $3 now (null = the database clock)
SELECT coalesce(json_agg(g ORDER BY g.group), '[]'::json)
FROM (
    SELECT s.group_name AS "group",
           sum(l.lag)::bigint AS lag,
           json_agg(json_build_object(
               'group', s.group_name, 'queue', s.queue_name, 'subscriptionMode', s.mode,
               'subscriptionFrom', s.from_ts, 'partitions', l.partitions, 'lag', l.lag,
               'activeLeases', l.leases, 'cursors', CASE WHEN $2::boolean THEN l.cursors END)
               ORDER BY s.queue_name) AS queues
    FROM queen.subscriptions s
    LEFT JOIN queen.queues x ON x.name = s.queue_name
    CROSS JOIN LATERAL (
        SELECT count(c.partition_id) AS partitions,
               coalesce(sum(p.last_offset - queen.group_position(p.id, c.committed, s.from_ts)), 0)::bigint AS lag,
               count(c.lease_id) FILTER (WHERE c.lease_expires_at > coalesce($3::timestamptz, now())) AS leases,
               coalesce(json_agg(json_build_object(
                   'queue', s.queue_name, 'partition', p.name, 'partitionId', p.id,
                   'committed', queen.group_position(p.id, c.committed, s.from_ts),
                   'lastOffset', p.last_offset,
                   'lag', p.last_offset - queen.group_position(p.id, c.committed, s.from_ts),
                   'attempts', coalesce(c.attempts, 0), 'leaseId', c.lease_id,
                   'leaseExpiresAt', c.lease_expires_at, 'batchEnd', c.batch_end,
                   'worker', c.worker_id) ORDER BY p.name) FILTER (WHERE p.id IS NOT NULL AND $2::boolean),
                   '[]'::json) AS cursors
        FROM queen.partitions p
        LEFT JOIN queen.consumers c ON c.partition_id = p.id AND c.group_name = s.group_name
        WHERE p.queue_id = x.id
    ) l
    WHERE $1::text IS NULL OR s.group_name = $1
    GROUP BY s.group_name
) g
