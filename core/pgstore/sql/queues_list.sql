-- Each queue with its summary (queen.summary).
SELECT coalesce(json_agg(json_build_object(
           'name', x.name, 'namespace', x.namespace, 'task', x.task,
           'partitions', s.partitions, 'messages', s.messages, 'depth', s.lag,
           'createdAt', x.created_at)
       ORDER BY x.name), '[]'::json)
FROM queen.queues x
CROSS JOIN LATERAL queen.summary(x.id) s
WHERE s.group_name = ''
