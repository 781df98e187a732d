-- $1 queues, $2 groups (in pairs), $3 now: the indexes (0-based) of the
-- pairs for which a wildcard pop could serve a partition now — a ready row
-- that is not waiting and not leased. One index probe per pair when there
-- is nothing; what a pop then finds (a lock, a delay it learns) may still
-- be nothing, and the long-poll waits again.
SELECT coalesce(array_agg((w.ord - 1)::int), '{}')
FROM unnest($1::text[], $2::text[]) WITH ORDINALITY AS w(q, g, ord)
WHERE EXISTS (
    SELECT 1 FROM queen.ready rd
    WHERE rd.queue_id = (SELECT x.id FROM queen.queues x WHERE x.name = w.q)
      AND rd.group_name = w.g
      AND (rd.not_before IS NULL OR rd.not_before <= coalesce($3::timestamptz, now()))
      AND NOT coalesce((SELECT c.lease_id IS NOT NULL AND c.lease_expires_at > coalesce($3::timestamptz, now())
                        FROM queen.consumers c
                        WHERE c.partition_id = rd.partition_id AND c.group_name = w.g), false))
