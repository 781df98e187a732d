-- $1 queue name, $2 now (null = the database clock), $3 the partitions
-- named after this one, $4 at most this many of them
-- Depth, and each group's lag and cursor count, from the queue's summary
-- (queen.summary); active leases from the live leases (queen.leases).
WITH sm AS (
    SELECT s.* FROM queen.queues x CROSS JOIN LATERAL queen.summary(x.id) s WHERE x.name = $1
)
SELECT json_build_object(
    'queue', row_to_json(x),
    'depth', (SELECT sm.lag FROM sm WHERE sm.group_name = ''),
    'partitions', coalesce((
        SELECT json_agg(json_build_object('id', p.id, 'name', p.name, 'lastOffset', p.last_offset,
                                          'lastPushedAt', p.last_pushed_at, 'createdAt', p.created_at)
                        ORDER BY p.name)
        FROM (SELECT * FROM queen.partitions p WHERE p.queue_id = x.id AND p.name > $3::text
              ORDER BY p.name LIMIT $4::int) p), '[]'::json),
    'groups', coalesce((
        SELECT json_agg(json_build_object(
                   'group', s.group_name, 'queue', x.name, 'subscriptionMode', s.mode,
                   'subscriptionFrom', s.from_ts,
                   'partitions', coalesce(sm.partitions, 0),
                   'lag', coalesce(sm.lag, 0),
                   'activeLeases', (SELECT count(*) FROM queen.leases l
                                    JOIN queen.consumers c ON c.partition_id = l.partition_id
                                     AND c.group_name = l.group_name AND c.lease_id = l.lease_id
                                    WHERE l.group_name = s.group_name AND c.queue_id = x.id
                                      AND c.lease_expires_at > coalesce($2::timestamptz, now())))
               ORDER BY s.group_name)
        FROM queen.subscriptions s
        LEFT JOIN sm ON sm.group_name = s.group_name
        WHERE s.queue_name = x.name), '[]'::json))
FROM queen.queues x
WHERE x.name = $1
