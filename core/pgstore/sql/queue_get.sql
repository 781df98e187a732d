-- $1 queue name, $2 now (null = the database clock)
SELECT json_build_object(
    'queue', row_to_json(x),
    'depth', queen.queue_depth(x.id),
    'partitions', coalesce((
        SELECT json_agg(json_build_object('id', p.id, 'name', p.name, 'lastOffset', p.last_offset,
                                          'lastPushedAt', p.last_pushed_at, 'createdAt', p.created_at)
                        ORDER BY p.name)
        FROM queen.partitions p WHERE p.queue_id = x.id), '[]'::json),
    'groups', coalesce((
        SELECT json_agg(json_build_object(
                   'group', s.group_name, 'queue', x.name, 'subscriptionMode', s.mode,
                   'subscriptionFrom', s.from_ts,
                   'partitions', (SELECT count(*) FROM queen.consumers c
                                  WHERE c.queue_id = x.id AND c.group_name = s.group_name),
                   'lag', (SELECT coalesce(sum(p.last_offset - queen.group_position(p.id, c.committed, s.from_ts)), 0)
                           FROM queen.partitions p
                           LEFT JOIN queen.consumers c ON c.partition_id = p.id AND c.group_name = s.group_name
                           WHERE p.queue_id = x.id),
                   'activeLeases', (SELECT count(*) FROM queen.consumers c
                                    WHERE c.queue_id = x.id AND c.group_name = s.group_name
                                      AND c.lease_id IS NOT NULL
                                    AND c.lease_expires_at > coalesce($2::timestamptz, now())))
               ORDER BY s.group_name)
        FROM queen.subscriptions s WHERE s.queue_name = x.name), '[]'::json))
FROM queen.queues x
WHERE x.name = $1
