-- Every queue's summary (queen.summary: the folded sums plus what changed
-- since), and the dead letters per queue (queen.dlq_counts).
WITH q AS (
    SELECT x.name, s.group_name, s.partitions, s.lag
    FROM queen.queues x CROSS JOIN LATERAL queen.summary(x.id) s
)
SELECT json_build_object(
    'queues', (SELECT count(*) FROM queen.queues),
    'partitions', (SELECT coalesce(sum(q.partitions), 0) FROM q WHERE q.group_name = ''),
    'depth', (SELECT coalesce(json_object_agg(q.name, q.lag), '{}'::json) FROM q WHERE q.group_name = ''),
    'dlq', (SELECT coalesce(json_object_agg(d.queue_name, d.n), '{}'::json)
            FROM (SELECT queue_name, sum(n) AS n FROM queen.dlq_counts
                  GROUP BY queue_name HAVING sum(n) <> 0) d),
    'lag', (SELECT coalesce(json_object_agg(q.group_name || chr(31) || q.name, q.lag), '{}'::json)
            FROM q WHERE q.group_name <> ''))
