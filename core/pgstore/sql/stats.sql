SELECT json_build_object(
    'queues', (SELECT count(*) FROM queen.queues),
    'partitions', (SELECT count(*) FROM queen.partitions),
    'depth', (SELECT coalesce(json_object_agg(x.name, queen.queue_depth(x.id)), '{}'::json) FROM queen.queues x),
    'dlq', (SELECT coalesce(json_object_agg(d.queue_name, d.n), '{}'::json)
            FROM (SELECT queue_name, count(*) AS n FROM queen.dlq GROUP BY queue_name) d),
    'lag', (SELECT coalesce(json_object_agg(l.k, l.lag), '{}'::json) FROM (
              SELECT s.group_name || chr(31) || s.queue_name AS k,
                     coalesce(sum(p.last_offset - queen.group_position(p.id, c.committed, s.from_ts)), 0)::bigint AS lag
              FROM queen.subscriptions s
              JOIN queen.queues x ON x.name = s.queue_name
              JOIN queen.partitions p ON p.queue_id = x.id
              LEFT JOIN queen.consumers c ON c.partition_id = p.id AND c.group_name = s.group_name
              GROUP BY 1) l))
