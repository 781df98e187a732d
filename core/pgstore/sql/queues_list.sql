SELECT coalesce(json_agg(json_build_object(
           'name', x.name, 'namespace', x.namespace, 'task', x.task,
           'partitions', (SELECT count(*) FROM queen.partitions p WHERE p.queue_id = x.id),
           'messages', (SELECT coalesce(sum(p.last_offset + 1), 0) FROM queen.partitions p WHERE p.queue_id = x.id),
           'depth', queen.queue_depth(x.id),
           'createdAt', x.created_at)
       ORDER BY x.name), '[]'::json)
FROM queen.queues x
