-- ---------------------------------------------------------------------------
-- summaries: depth, lag and counts in time proportional to what changed
-- (migration 0025, docs/internals.md "Summaries")

-- summary_lock_key serialises the writers of queen.summary_parts and
-- queen.summaries (the fold, a new subscription, a group's deletion), so
-- that each sum stays the sum of its parts.
CREATE OR REPLACE FUNCTION queen.summary_lock_key()
RETURNS bigint LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
    SELECT ('x' || substr(md5('queen.summaries'), 1, 16))::bit(64)::bigint
$$;

-- _summary_now is what the given partitions add to their queues' summaries
-- now: per partition a row for itself (group '': counted 1, messages ever
-- pushed, depth: the messages after the slowest subscribed group's
-- position, or all stored ones when no group subscribes) and one per
-- subscribed group (counted 1 when the group has a cursor row there, its
-- lag: the messages after its position, queen.group_position). row_xmin
-- is the version of the partition row the rows were computed from.
CREATE OR REPLACE FUNCTION queen._summary_now(p_nums bigint[])
RETURNS TABLE (num bigint, queue_id bigint, pid uuid, group_name text, counted int, messages bigint,
               lag bigint, row_xmin xid)
LANGUAGE sql STABLE SET enable_seqscan = off AS $fn$
    WITH p AS (
        SELECT p.num, p.id, p.queue_id, x.name AS queue, p.last_offset AS last, p.xmin AS row_xmin,
               coalesce((SELECT min(s.base_offset) - 1 FROM queen.segments s WHERE s.partition_num = p.num),
                        p.last_offset) AS low
        FROM queen.partitions p JOIN queen.queues x ON x.id = p.queue_id
        WHERE p.num = ANY (p_nums)
    ), g AS (
        SELECT p.num, p.queue_id, p.id AS pid, s.group_name, (c.partition_id IS NOT NULL)::int AS counted,
               0::bigint AS messages, p.last,
               greatest(coalesce(c.committed, queen._start_offset(p.id, s.from_ts)), p.low) AS pos,
               p.row_xmin
        FROM p
        JOIN queen.subscriptions s ON s.queue_name = p.queue
        LEFT JOIN queen.consumers c ON c.partition_id = p.id AND c.group_name = s.group_name
    )
    SELECT g.num, g.queue_id, g.pid, g.group_name, g.counted, g.messages, g.last - g.pos, g.row_xmin FROM g
    UNION ALL
    SELECT p.num, p.queue_id, p.id, '', 1, p.last + 1, p.last - coalesce(m.pos, p.low), p.row_xmin
    FROM p LEFT JOIN (SELECT g.num, min(g.pos) AS pos FROM g GROUP BY g.num) m ON m.num = p.num
$fn$;

-- _summary_unfolded is the partitions of a queue whose summary rows may
-- differ from what they add now: dirty partitions, partitions with a
-- marked cursor, and those after the queue's init_num.
-- Planned to go through the indexes whatever the statistics say: an
-- ANALYZE that ran while most partitions were dirty must not turn every
-- later read into a scan of them.
CREATE OR REPLACE FUNCTION queen._summary_unfolded(p_queue_id bigint)
RETURNS bigint[] LANGUAGE sql STABLE SET enable_seqscan = off AS $fn$
    SELECT coalesce(array_agg(DISTINCT n.num), '{}') FROM (
        SELECT p.num FROM queen.partitions p WHERE p.queue_id = p_queue_id AND p.dirty
        UNION ALL
        -- (a lookup per mark: never a scan of the partitions, whatever the
        -- planner thinks of the marks' number)
        SELECT (SELECT p.num FROM queen.partitions p WHERE p.id = m.partition_id) FROM queen.summary_marks m
        WHERE m.queue_id = p_queue_id
        UNION ALL
        SELECT p.num FROM queen.partitions p
        -- (a one-time filter: no look at the partitions when all are folded)
        WHERE (SELECT s.init_num FROM queen.summaries s WHERE s.queue_id = p_queue_id AND s.group_name = '') IS NOT NULL
          AND p.queue_id = p_queue_id
          AND p.num > (SELECT s.init_num FROM queen.summaries s WHERE s.queue_id = p_queue_id AND s.group_name = '')
    ) n
$fn$;

-- summary is a queue's summary, exact: per group ('' for the queue
-- itself) its partitions (cursor rows, for a group), messages ever pushed
-- ('') and lag (depth, for ''). The folded sums plus what the unfolded
-- partitions change: its cost grows with what changed since the last fold
-- and with the queue's groups, not with what is stored.
CREATE OR REPLACE FUNCTION queen.summary(p_queue_id bigint)
RETURNS TABLE (group_name text, partitions bigint, messages bigint, lag bigint)
LANGUAGE sql STABLE AS $fn$
    WITH u AS (SELECT queen._summary_unfolded(p_queue_id) AS nums),
    d AS (
        SELECT k.group_name, sum(k.counted) AS counted, sum(k.messages) AS messages, sum(k.lag) AS lag
        FROM (
            SELECT n.group_name, n.counted, n.messages, n.lag FROM queen._summary_now((SELECT nums FROM u)) n
            UNION ALL
            SELECT sp.group_name, -sp.counted, -sp.messages, -sp.lag FROM queen.summary_parts sp
            WHERE sp.partition_num = ANY ((SELECT nums FROM u)::bigint[])
        ) k
        GROUP BY k.group_name
    )
    SELECT k.group_name,
           (coalesce(s.partitions, 0) + coalesce(d.counted, 0))::bigint,
           (coalesce(s.messages, 0) + coalesce(d.messages, 0))::bigint,
           (coalesce(s.lag, 0) + coalesce(d.lag, 0))::bigint
    FROM (SELECT ''::text COLLATE "C" AS group_name
          UNION ALL
          SELECT sb.group_name FROM queen.subscriptions sb JOIN queen.queues x ON x.name = sb.queue_name
          WHERE x.id = p_queue_id) k
    LEFT JOIN queen.summaries s ON s.queue_id = p_queue_id AND s.group_name = k.group_name
    LEFT JOIN d ON d.group_name = k.group_name
$fn$;

-- Unconsumed messages of a queue (what maxSize caps): per partition, the
-- stored messages after the slowest subscribed group's position; all
-- stored messages when no group subscribes. Messages removed by retention
-- do not count.
CREATE OR REPLACE FUNCTION queen.queue_depth(p_queue_id bigint)
RETURNS bigint LANGUAGE sql STABLE AS $fn$
    SELECT s.lag FROM queen.summary(p_queue_id) s WHERE s.group_name = ''
$fn$;

-- _summarize writes what the given partitions add now as their summary
-- rows and adds the differences to queen.summaries. Returns the rows it
-- computed, with the versions they were computed from (for the caller to
-- clear dirty flags). The caller holds summary_lock_key.
CREATE OR REPLACE FUNCTION queen._summarize(p_nums bigint[])
RETURNS TABLE (num bigint, pid uuid, group_name text, row_xmin xid)
LANGUAGE sql AS $fn$
    WITH cur AS MATERIALIZED (
        SELECT * FROM queen._summary_now(p_nums)
    ), old AS (
        SELECT sp.partition_num AS num, p.queue_id, sp.group_name, sp.counted, sp.messages, sp.lag
        FROM queen.summary_parts sp JOIN queen.partitions p ON p.num = sp.partition_num
        WHERE sp.partition_num = ANY (p_nums)
    ), sums AS (
        INSERT INTO queen.summaries AS s (queue_id, group_name, partitions, messages, lag)
        SELECT k.queue_id, k.group_name, sum(k.counted), sum(k.messages), sum(k.lag)
        FROM (
            SELECT c.queue_id, c.group_name, c.counted, c.messages, c.lag FROM cur c
            UNION ALL
            SELECT o.queue_id, o.group_name, -o.counted, -o.messages, -o.lag FROM old o
        ) k
        GROUP BY k.queue_id, k.group_name
        HAVING sum(k.counted) <> 0 OR sum(k.messages) <> 0 OR sum(k.lag) <> 0
        ON CONFLICT (queue_id, group_name) DO UPDATE
        SET partitions = s.partitions + excluded.partitions, messages = s.messages + excluded.messages,
            lag = s.lag + excluded.lag
        RETURNING 1
    ), gone AS (  -- the rows of groups no longer subscribed
        DELETE FROM queen.summary_parts sp
        WHERE sp.partition_num = ANY (p_nums)
          AND NOT EXISTS (SELECT 1 FROM cur c WHERE c.num = sp.partition_num AND c.group_name = sp.group_name)
        RETURNING 1
    ), parts AS (
        INSERT INTO queen.summary_parts AS sp (partition_num, group_name, counted, messages, lag)
        SELECT c.num, c.group_name, c.counted, c.messages, c.lag FROM cur c
        ON CONFLICT (partition_num, group_name) DO UPDATE
        SET counted = excluded.counted, messages = excluded.messages, lag = excluded.lag
        WHERE (sp.counted, sp.messages, sp.lag) IS DISTINCT FROM (excluded.counted, excluded.messages, excluded.lag)
        RETURNING 1
    )
    -- (statements in WITH run to completion whether read or not)
    SELECT c.num, c.pid, c.group_name, c.row_xmin FROM cur c
$fn$;

-- _summarize_step folds up to p_limit partitions into the summaries:
-- dirty ones and those with a marked cursor first, then those a change of
-- a queue's groups left unfolded (init_num). A partition's flag is
-- cleared only where its row is still the version the fold read, and a
-- mark deleted only where it counts no change since the fold read it: a
-- push or a commit meanwhile leaves them. Nothing is locked while the rows
-- are computed; the flags' updates come last and skip a row a push holds,
-- so the fold neither holds pushes up nor waits for them, and it never
-- locks a cursor. Returns {n, rows}.
CREATE OR REPLACE FUNCTION queen._summarize_step(p_limit int)
RETURNS json LANGUAGE plpgsql SET jit = off SET enable_seqscan = off AS $fn$
DECLARE
    v_nums   bigint[];
    v_pids   uuid[];    -- the marks read, and their counts
    v_groups text[];
    v_ns     bigint[];
    v_init   record;
    v_more   bigint[];
    v_done   bigint[];
    v_xmins  xid[];
    n        int := 0;
BEGIN
    PERFORM pg_advisory_xact_lock(queen.summary_lock_key());
    v_nums := ARRAY(
        SELECT u.num FROM (
            (SELECT p.num FROM queen.partitions p WHERE p.dirty LIMIT p_limit)
            UNION
            (SELECT (SELECT p.num FROM queen.partitions p WHERE p.id = m.partition_id) FROM queen.summary_marks m
             LIMIT p_limit)) u
        WHERE u.num IS NOT NULL
        LIMIT p_limit);
    IF cardinality(v_nums) > 0 THEN
        SELECT array_agg(m.partition_id), array_agg(m.group_name), array_agg(m.n)
        INTO v_pids, v_groups, v_ns
        FROM queen.summary_marks m
        WHERE m.partition_id IN (SELECT p.id FROM queen.partitions p WHERE p.num = ANY (v_nums));
        SELECT array_agg(d.num), array_agg(d.row_xmin) INTO v_done, v_xmins
        FROM queen._summarize(v_nums) d WHERE d.group_name = '';
        -- (the rows locked first, by address, in a statement of their
        -- own: a semi-join on a lock was planned as a loop over both)
        DELETE FROM queen.summary_marks m
        WHERE m.ctid = ANY (ARRAY(
            SELECT m2.ctid
            FROM unnest(v_pids, v_groups, v_ns) AS r(pid, group_name, n)
            JOIN queen.summary_marks m2 ON m2.partition_id = r.pid AND m2.group_name = r.group_name
            WHERE m2.n = r.n
            FOR UPDATE OF m2 SKIP LOCKED));
        -- (a partition a push holds keeps its flag: the next fold)
        UPDATE queen.partitions p SET dirty = false
        WHERE p.ctid = ANY (ARRAY(
            SELECT p2.ctid
            FROM unnest(v_done, v_xmins) AS d(num, row_xmin)
            JOIN queen.partitions p2 ON p2.num = d.num
            WHERE p2.dirty AND p2.xmin = d.row_xmin
            FOR NO KEY UPDATE OF p2 SKIP LOCKED));
        n := cardinality(v_nums);
    END IF;
    IF n < p_limit THEN
        SELECT s.queue_id, s.init_num INTO v_init FROM queen.summaries s
        WHERE s.group_name = '' AND s.init_num IS NOT NULL
        ORDER BY s.queue_id LIMIT 1;
        IF FOUND THEN
            v_more := ARRAY(SELECT p.num FROM queen.partitions p
                            WHERE p.queue_id = v_init.queue_id AND p.num > v_init.init_num
                            ORDER BY p.num LIMIT p_limit - n);
            PERFORM FROM queen._summarize(v_more);
            UPDATE queen.summaries SET init_num = CASE WHEN cardinality(v_more) = p_limit - n THEN v_more[cardinality(v_more)] END
            WHERE queue_id = v_init.queue_id AND group_name = '';
            -- the queue's flag row counts as a row of work, so a batch
            -- that only moved init_num on is not taken for caught up
            n := n + greatest(cardinality(v_more), 1);
        END IF;
    END IF;
    RETURN json_build_object('n', n, 'rows', n);
END
$fn$;

-- _summary_groups_changed marks a queue's partitions unfolded after a
-- group subscribed to it or left it (every partition's depth, and the
-- group's lag, change at once); the fold goes over them again in batches
-- (queen._summarize_step). The caller holds summary_lock_key.
CREATE OR REPLACE FUNCTION queen._summary_groups_changed(p_queue text)
RETURNS void LANGUAGE sql AS $fn$
    INSERT INTO queen.summaries AS s (queue_id, group_name, init_num)
    SELECT x.id, '', 0 FROM queen.queues x WHERE x.name = p_queue
    ON CONFLICT (queue_id, group_name) DO UPDATE SET init_num = 0;
$fn$;
