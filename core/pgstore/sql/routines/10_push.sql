-- ---------------------------------------------------------------------------
-- push
--
-- Every statement below finds rows by key (scalar subqueries, = ANY), so its
-- cost does not depend on how many queues, partitions or dedup keys exist.
-- Two entry points: push_partition_v2 (below) for a push whose items all
-- go to one partition, and push_v3 / _push for the rest (several
-- partitions, transactions, dead-letter retries). Each takes one of two
-- ways by the items' shape (docs/benchmarks.md, "Push fast paths", says
-- what the first buys):
--   * every id generated, to existing partitions of uncapped queues: the
--     UPDATE that numbers the items takes the partitions' locks, in one
--     statement (_push_partition_append, _push_partition_append_one for one
--     message, _push_append across partitions);
--   * the general way: look the partitions up (creating what is missing),
--     lock them, and probe the keys and write under the locks
--     (_push_partition_write, _push_partition_write_one for one message;
--     _push_locked, _push_plan, _push_write across partitions).

-- _push_items reads a push's items [{queue, partition, payload,
-- transactionId, traceId, producerSub, keyId, snapshot}] once, into arrays
-- in input order: the stored payload text (a sealed one, keyId set, is the
-- base64 text itself), and whether the item is plain (not sealed by the Go
-- core nor a dead-letter snapshot re-pushed as it was).
CREATE OR REPLACE FUNCTION queen._push_items(p_items json, OUT qn text[], OUT pn text[], OUT payloads text[],
                                              OUT txids text[], OUT traces text[], OUT subs text[],
                                              OUT keys text[], OUT plain boolean[])
LANGUAGE plpgsql SET plan_cache_mode = force_generic_plan SET jit = off AS $fn$
BEGIN
    SELECT array_agg(x.queue ORDER BY x.o), array_agg(x.partition ORDER BY x.o),
           array_agg(CASE WHEN x.key_id IS NULL THEN coalesce(x.payload::text, 'null') ELSE x.payload #>> '{}' END
                     ORDER BY x.o),
           array_agg(nullif(x.txid, '') ORDER BY x.o), array_agg(x.trace ORDER BY x.o), array_agg(x.sub ORDER BY x.o),
           array_agg(x.key_id ORDER BY x.o), array_agg(x.key_id IS NULL AND x.snapshot IS NULL ORDER BY x.o)
    INTO qn, pn, payloads, txids, traces, subs, keys, plain
    FROM ROWS FROM (json_to_recordset(p_items) AS (queue text, partition text, payload json, "transactionId" text,
                                                   "traceId" text, "producerSub" text, "keyId" text, snapshot json))
         WITH ORDINALITY AS x(queue, partition, payload, txid, trace, sub, key_id, snapshot, o);
END
$fn$;

-- _push_pairs reads the distinct (queue, partition) pairs of a push in lock
-- order, whether any item of a pair is plain, and the distinct queues.
DROP FUNCTION IF EXISTS queen._push_pairs(json);
CREATE OR REPLACE FUNCTION queen._push_pairs(p_qn text[], p_pn text[], p_plain boolean[],
                                              OUT qn text[], OUT pn text[], OUT plain boolean[], OUT queues text[])
LANGUAGE plpgsql SET plan_cache_mode = force_generic_plan SET jit = off AS $fn$
BEGIN
    SELECT array_agg(u.qn), array_agg(u.pn), array_agg(u.plain),
           array_agg(DISTINCT u.qn COLLATE "C" ORDER BY u.qn COLLATE "C")
    INTO qn, pn, plain, queues
    FROM (SELECT i.qn, i.pn, bool_or(i.plain) AS plain
          FROM unnest(p_qn, p_pn, p_plain) AS i(qn, pn, plain) GROUP BY 1, 2
          ORDER BY i.qn COLLATE "C", i.pn COLLATE "C") u;  -- in lock order (00_common.sql: ordered input)
END
$fn$;

-- _push_partitions looks the pairs' partitions up, creating what is missing
-- (queues too), and says whether any of their queues is capped (maxSize)
-- and the first encrypted queue a plain payload would go to.
DROP FUNCTION IF EXISTS queen._push_partitions(text[], text[], boolean[], text[], timestamptz);
CREATE OR REPLACE FUNCTION queen._push_partitions(p_qn text[], p_pn text[], p_plain boolean[], p_queues text[],
                                                   p_now timestamptz,
                                                   OUT pids uuid[], OUT qids bigint[], OUT wins int[],
                                                   OUT capped boolean, OUT sealme text)
LANGUAGE plpgsql SET plan_cache_mode = force_generic_plan SET jit = off AS $fn$
DECLARE
    v_missing boolean;
BEGIN
    FOR n IN 1 .. 2 LOOP  -- look up; create what is missing, then look again
        SELECT array_agg(l.pid), array_agg(l.qid), array_agg(l.win), bool_or(l.pid IS NULL),
               coalesce(bool_or(l.max_size > 0), false), min(l.qn) FILTER (WHERE l.plain AND l.enc)
        INTO pids, qids, wins, v_missing, capped, sealme
        FROM (
            SELECT u.qn, u.plain, x.id AS qid, x.dedup_window AS win, x.max_size, x.encryption_enabled AS enc,
                   (SELECT p.id FROM queen.partitions p WHERE p.queue_id = x.id AND p.name = u.pn) AS pid
            FROM unnest(p_qn, p_pn, p_plain) WITH ORDINALITY AS u(qn, pn, plain, o)
            -- each queue looked up once, not once per pair
            LEFT JOIN (SELECT x.id, x.name, x.dedup_window, x.max_size, x.encryption_enabled
                       FROM queen.queues x WHERE x.name = ANY (p_queues) OFFSET 0) x ON x.name = u.qn
            ORDER BY u.o  -- in the pairs' order (00_common.sql: ordered input)
        ) l;
        EXIT WHEN NOT v_missing;

        INSERT INTO queen.queues (name, created_at, updated_at)
        SELECT q, coalesce(p_now, now()), coalesce(p_now, now())
        FROM unnest(p_queues) q
        WHERE (SELECT x.id FROM queen.queues x WHERE x.name = q) IS NULL
        ON CONFLICT (name) DO NOTHING;

        INSERT INTO queen.partitions (id, queue_id, name, created_at)
        SELECT gen_random_uuid(), (SELECT x.id FROM queen.queues x WHERE x.name = u.qn), u.pn, coalesce(p_now, now())
        FROM unnest(p_qn, p_pn) AS u(qn, pn)
        WHERE (SELECT p.id FROM queen.partitions p
               WHERE p.queue_id = (SELECT x.id FROM queen.queues x WHERE x.name = u.qn) AND p.name = u.pn) IS NULL
        ON CONFLICT (queue_id, name) DO NOTHING;
    END LOOP;
END
$fn$;

-- _push_plan gives each item of a push, in input order, its offset: fresh
-- items take the next offsets of their partition in input order; an item
-- whose dedup key was seen, or that repeats an earlier item of the request
-- in the same partition, is a duplicate and reports the offset it was
-- stored at. p_it holds the items (_push_items, with each item's partition,
-- queue id and dedup window); p_locked, p_nums, p_lasts and p_last_ats the
-- locked partitions' rows. txid is the id the log stores for the item:
-- NULL for an id derived from the push's seed (derived; queen.gen_id,
-- migration 0017), which the caller renders where it needs it.
DROP FUNCTION IF EXISTS queen._push_plan(json, uuid[], timestamptz);
DROP FUNCTION IF EXISTS queen._push_plan(queen.push_items, uuid[], bigint[], int[], uuid[], bigint[], timestamptz[],
                                         timestamptz);
DROP FUNCTION IF EXISTS queen._push_plan(queen.push_items, uuid[], bigint[], int[], uuid[], bigint[], bigint[],
                                         timestamptz[], timestamptz);
DROP FUNCTION IF EXISTS queen._push_plan(queen.push_items, uuid[], bigint[], int[], uuid[], bigint[], bigint[],
                                         timestamptz[], timestamptz, bigint);
CREATE OR REPLACE FUNCTION queen._push_plan(p_it queen.push_items, p_pids uuid[], p_qids bigint[], p_wins int[],
                                            p_locked uuid[], p_nums bigint[], p_lasts bigint[],
                                            p_last_ats timestamptz[], p_ts timestamptz)
RETURNS TABLE (idx int, qname text, pname text, payload text, txid text, trace_id text, producer_sub text,
               key_id text, pid uuid, pnum bigint, queue_id bigint, dedup_window int, ts timestamptz,
               fresh boolean, off bigint, final_off bigint, derived boolean)
LANGUAGE plpgsql SET plan_cache_mode = force_generic_plan SET jit = off AS $fn$
#variable_conflict use_column
BEGIN
    RETURN QUERY
    WITH j AS (
        SELECT (u.o - 1)::int AS idx, u.qname, u.pname, u.payload, u.txid, u.trace_id, u.producer_sub, u.key_id,
               u.pid, lp.num AS pnum, u.queue_id, u.dedup_window, lp.last AS last_offset,
               greatest(p_ts, coalesce(lp.last_at, p_ts)) AS ts,
               CASE WHEN u.txid IS NULL THEN u.o ELSE min(u.o) OVER (PARTITION BY u.pid, u.txid) END - 1 AS first_idx
        FROM unnest(p_it.qn, p_it.pn, p_it.payloads, p_it.txids, p_it.traces, p_it.subs, p_it.keys,
                    p_pids, p_qids, p_wins)
             WITH ORDINALITY AS u(qname, pname, payload, txid, trace_id, producer_sub, key_id, pid, queue_id,
                                  dedup_window, o)
        JOIN unnest(p_locked, p_nums, p_lasts, p_last_ats) AS lp(pid, num, last, last_at) ON lp.pid = u.pid
    ),
    k AS MATERIALIZED (  -- materialized: one dedup probe per item
        SELECT j.*, dk.seen AS seen_offset,
               (dk.seen IS NULL AND (j.dedup_window = 0 OR j.idx = j.first_idx)) AS fresh
        FROM j
        -- a subquery per key, never a join: a generic plan made while the
        -- table was small would scan it for good
        -- (each LATERAL fenced, OFFSET 0: pulled up, a subquery would run
        -- once per reference to its column)
        CROSS JOIN LATERAL (  -- read only for an item that is probed
            SELECT CASE WHEN j.dedup_window > 0 AND j.txid IS NOT NULL THEN
                coalesce((SELECT f.floor FROM queen.dedup_floor f WHERE f.queue_id = j.queue_id), '-infinity')
                END AS floor
            OFFSET 0) fl
        CROSS JOIN LATERAL (
            -- no subquery in _dedup_seen's arguments, so it is inlined
            -- (a function call per probe is far dearer than the probe)
            SELECT CASE WHEN j.dedup_window > 0 AND j.txid IS NOT NULL THEN
                (SELECT s.seen FROM queen._dedup_seen(j.pnum, j.pid, j.queue_id, j.txid,
                                                      j.ts - make_interval(secs => j.dedup_window), fl.floor) s)
                END AS seen
            OFFSET 0) dk
    ),
    r AS (
        SELECT k.*, CASE WHEN k.fresh THEN
                   k.last_offset + count(*) FILTER (WHERE k.fresh) OVER (PARTITION BY k.pid ORDER BY k.idx) END AS off
        FROM k
    )
    -- A repeat inside the request reports the offset of its first item; an
    -- item without an id gets one that names its place: derived from the
    -- push's seed (queen.gen_id; NULL here), or at random where the place
    -- is too long to name (queen.self_id).
    SELECT r.idx, r.qname, r.pname, r.payload,
           queen.stored_txid(r.txid, r.ts, r.pnum, r.off),
           r.trace_id, r.producer_sub, r.key_id, r.pid, r.pnum, r.queue_id, r.dedup_window, r.ts, r.fresh, r.off,
           coalesce(r.off, r.seen_offset, max(r.off) OVER (PARTITION BY r.pid, r.txid)),
           r.txid IS NULL AND queen.self_fits(r.pnum, r.off)
    FROM r;
END
$fn$;

-- _push_write stores a push's fresh items (one segment per partition, the
-- partitions' offsets, dedup keys, ready rows for subscribed groups) and
-- returns, per item in input order, its partition's number, the push's
-- time in that partition, whether it was stored (fresh), the offset it is
-- at (a duplicate: the offset its first copy is at) and the id the log
-- stores for it (NULL: derived from p_seed, queen.gen_id; the whole array
-- NULL when every one is). Arrays, not a
-- reply: it runs with the partitions locked (see _push_plan for the
-- arguments), so what renders a reply (ids, message ids, JSON: a quarter of
-- the time a 100-message push to random partitions held its locks) is left
-- to the caller, after the commit for the Go core. p_ts is the push's
-- time, taken under those locks; p_seed the seed of the ids it generates.
DROP FUNCTION IF EXISTS queen._push_write(queen.push_items, uuid[], bigint[], int[], uuid[], bigint[], bigint[],
                                          timestamptz[], timestamptz);
CREATE OR REPLACE FUNCTION queen._push_write(p_it queen.push_items, p_pids uuid[], p_qids bigint[], p_wins int[],
                                             p_locked uuid[], p_nums bigint[], p_lasts bigint[],
                                             p_last_ats timestamptz[], p_ts timestamptz, p_seed bigint,
                                             OUT nums bigint[], OUT ats timestamptz[], OUT fresh boolean[],
                                             OUT offsets bigint[], OUT txids text[])
LANGUAGE plpgsql SET plan_cache_mode = force_generic_plan SET jit = off AS $fn$
BEGIN
    WITH res AS (
        SELECT * FROM queen._push_plan(p_it, p_pids, p_qids, p_wins, p_locked, p_nums, p_lasts, p_last_ats, p_ts)
    ),
    fresh AS (  -- with its partition's first offset in this push (its segment's base)
        SELECT res.*, min(res.off) OVER (PARTITION BY res.pid) AS base,
               bool_and(res.derived) OVER (PARTITION BY res.pid) AS all_derived
        FROM res WHERE res.fresh
    ),
    seg AS (
        INSERT INTO queen.segments (partition_num, base_offset, created_at, txid, payload, txids, payloads, trace_ids,
                                    producer_sub, key_id, located, id_seed, id_count)
        SELECT min(pnum), min(off), min(ts),  -- one message in scalars, several in arrays
               -- no ids when every one is derived (migration 0017), else
               -- every one (a derived one made here)
               CASE WHEN count(*) = 1 AND NOT bool_and(derived) THEN min(txid) END,
               CASE WHEN count(*) = 1 THEN min(payload) END,
               CASE WHEN count(*) > 1 AND NOT bool_and(derived)
                    THEN array_agg(CASE WHEN NOT all_derived THEN queen.seg_txid(txid, ts, pnum, off, p_seed) END
                                   ORDER BY off) END,
               CASE WHEN count(*) > 1 THEN array_agg(payload ORDER BY off) END,
               CASE WHEN bool_or(trace_id IS NOT NULL) THEN array_agg(trace_id ORDER BY off) END,
               min(producer_sub),  -- one caller per request
               min(key_id),        -- one key per request
               -- the first message self-located: true, no first key (else NULL; migration 0016)
               nullif(bool_or(off = base AND queen.self_located(txid, p_it.txids[idx + 1] IS NULL, pnum, off)), false),
               CASE WHEN bool_and(derived) THEN p_seed END,
               CASE WHEN bool_and(derived) AND count(*) > 1 THEN count(*) END
        FROM fresh GROUP BY pid
    ),
    upd AS (
        UPDATE queen.partitions p SET last_offset = f.last, last_pushed_at = f.ts,
            oldest_at = coalesce(p.oldest_at, '-infinity')  -- retention looks (partitions_oldest)
        FROM (SELECT pid, max(off) AS last, min(ts) AS ts FROM fresh GROUP BY pid) f
        WHERE p.id = f.pid AND p.id = ANY (p_locked)
    ),
    dd AS (  -- each segment's first key is the segment's (segments_first_key);
             -- a self-located message needs none (migration 0015)
        INSERT INTO queen.dedup (key, msg_offset, created_at)
        SELECT queen.dedup_key(f.pid, f.txid), f.off, f.ts
        FROM fresh f
        WHERE f.dedup_window > 0 AND f.off > f.base
          AND NOT queen.self_located(f.txid, p_it.txids[f.idx + 1] IS NULL, f.pnum, f.off)
    ),
    rdy AS (
        INSERT INTO queen.ready (queue_id, group_name, partition_id, order_key)
        SELECT f.queue_id, s.group_name, f.pid, nextval('queen.ready_order')
        FROM (SELECT DISTINCT pid, queue_id, qname FROM fresh) f
        JOIN queen.subscriptions s ON s.queue_name = f.qname
        WHERE (SELECT 1 FROM queen.ready r WHERE r.partition_id = f.pid AND r.group_name = s.group_name) IS NULL
        ORDER BY f.queue_id, s.group_name, f.pid
        -- An existing row is left alone, unlocked: a push in flight never
        -- hides its partition from the pops that scan the ready set.
        ON CONFLICT DO NOTHING
    )
    SELECT array_agg(res.pnum ORDER BY res.idx), array_agg(res.ts ORDER BY res.idx),
           array_agg(res.fresh ORDER BY res.idx), array_agg(res.final_off ORDER BY res.idx),
           CASE WHEN bool_or(res.txid IS NOT NULL) THEN array_agg(res.txid ORDER BY res.idx) END  -- NULL: all derived
    INTO nums, ats, fresh, offsets, txids
    FROM res;
END
$fn$;

-- _push_append is _push_plan and _push_write in one statement for a push
-- whose ids are all generated (nothing to probe: every item is fresh and
-- takes the next offset of its partition in input order), to partitions
-- of uncapped queues: the UPDATE of the partitions' rows takes their locks
-- itself, as push_partition_v2's fast way does, instead of a statement of
-- its own that locks them and a later one that updates them. Locking 100
-- rows and then updating them cost as much again as updating them
-- (docs/benchmarks.md, "Design measurements"). The items are grouped by partition in id order
-- before the first lock, and the UPDATE visits them in that order: no
-- hash or merge join, no sequential or bitmap scan can reorder them (the
-- enable_* settings below), so its locks are taken in the one order every
-- push takes them (00_common.sql), and concurrent pushes never deadlock.
-- p_pids, p_wins, p_payloads, p_traces, p_subs and p_keys are per item in
-- input order (as _push_write takes them); p_queues the push's queues. It
-- returns per item its partition's number, the push's time there, its
-- offset and the id the log stores (NULL: derived from p_seed, the whole
-- array NULL when every one is; at random, with a dedup key, where the
-- place is too long to name, as _push_plan does), and whether any of the
-- queues has subscribed groups (the caller writes their ready rows, in a
-- statement that sees the rows removed before the locks were granted).
CREATE OR REPLACE FUNCTION queen._push_append(p_pids uuid[], p_wins int[], p_payloads text[], p_traces text[],
                                              p_subs text[], p_keys text[], p_queues text[], p_now timestamptz,
                                              p_seed bigint,
                                              OUT nums bigint[], OUT ats timestamptz[], OUT offsets bigint[],
                                              OUT txids text[], OUT subs boolean)
LANGUAGE plpgsql SET plan_cache_mode = force_generic_plan SET jit = off
    SET enable_hashjoin = off SET enable_mergejoin = off SET enable_seqscan = off SET enable_bitmapscan = off AS $fn$
DECLARE
    v_written int;  -- partitions updated, of v_parts
    v_parts   int;
BEGIN
    WITH g AS MATERIALIZED (  -- per partition, in lock order: its items (positions, payloads, traces)
        SELECT u.pid, count(*)::int AS n, array_agg(u.o ORDER BY u.o) AS os, array_agg(u.payload ORDER BY u.o) AS pls,
               CASE WHEN bool_or(u.trace IS NOT NULL) THEN array_agg(u.trace ORDER BY u.o) END AS trs,
               min(u.sub) AS sub,  -- one caller per request
               min(u.key) AS key,  -- one key per queue's items
               min(u.win) AS win
        FROM unnest(p_pids, p_wins, p_payloads, p_traces, p_subs, p_keys) WITH ORDINALITY
             AS u(pid, win, payload, trace, sub, key, o)
        GROUP BY u.pid
        ORDER BY u.pid
    ),
    l AS MATERIALIZED (
        UPDATE queen.partitions p
        SET last_offset = p.last_offset + g.n,
            -- stamped under the lock: created_at is monotone per partition
            last_pushed_at = greatest(coalesce(p_now, clock_timestamp()), coalesce(p.last_pushed_at, '-infinity')),
            oldest_at = coalesce(p.oldest_at, '-infinity')  -- retention looks (partitions_oldest)
        FROM g
        WHERE p.id = g.pid
        RETURNING p.id AS pid, p.num AS pnum, p.last_offset - g.n + 1 AS base, p.last_pushed_at AS at, g.n, g.os,
                  g.pls, g.trs, g.sub, g.key, g.win,
                  -- the last offset fits the form, so do the ones before it
                  queen.self_fits(p.num, p.last_offset) AS fit
    ),
    res AS MATERIALIZED (  -- only where some id is too long to name: every id of the segment
        SELECT l.pid, k, l.base + k AS off, queen.stored_txid(NULL, l.at, l.pnum, l.base + k) AS txid
        FROM l CROSS JOIN LATERAL generate_series(0, CASE WHEN l.fit THEN -1 ELSE l.n - 1 END) k
    ),
    seg AS (
        INSERT INTO queen.segments (partition_num, base_offset, created_at, txid, payload, txids, payloads, trace_ids,
                                    producer_sub, key_id, located, id_seed, id_count)
        SELECT l.pnum, l.base, l.at,
               CASE WHEN l.n = 1 AND NOT l.fit THEN (SELECT res.txid FROM res WHERE res.pid = l.pid) END,
               CASE WHEN l.n = 1 THEN l.pls[1] END,
               CASE WHEN l.n > 1 AND NOT l.fit
                    THEN (SELECT array_agg(queen.seg_txid(res.txid, l.at, l.pnum, res.off, p_seed) ORDER BY res.k)
                          FROM res WHERE res.pid = l.pid) END,
               CASE WHEN l.n > 1 THEN l.pls END,
               l.trs, l.sub, l.key,
               -- the first message self-located: true, no first key (else NULL; migration 0016)
               nullif(queen.self_fits(l.pnum, l.base), false),
               CASE WHEN l.fit THEN p_seed END, CASE WHEN l.fit AND l.n > 1 THEN l.n END
        FROM l
    ),
    dd AS (  -- a generated id that does not fit its form, after its segment's first
        INSERT INTO queen.dedup (key, msg_offset, created_at)
        SELECT queen.dedup_key(l.pid, res.txid), res.off, l.at
        FROM l JOIN res ON res.pid = l.pid
        WHERE l.win > 0 AND res.off > l.base AND NOT queen.self_fits(l.pnum, res.off)
    )
    SELECT array_agg(x.pnum), array_agg(x.at), array_agg(x.off),
           CASE WHEN bool_or(x.txid IS NOT NULL) THEN array_agg(x.txid) END,
           (SELECT count(*) FROM l), (SELECT count(*) FROM g),
           EXISTS (SELECT 1 FROM queen.subscriptions s WHERE s.queue_name = ANY (p_queues))
    INTO nums, ats, offsets, txids, v_written, v_parts, subs
    FROM (SELECT l.pnum, l.at, l.base + e.k - 1 AS off,
                 CASE WHEN NOT l.fit THEN (SELECT res.txid FROM res WHERE res.pid = l.pid AND res.k = e.k - 1) END
                     AS txid
          FROM l CROSS JOIN LATERAL unnest(l.os) WITH ORDINALITY AS e(o, k)
          ORDER BY e.o) x;  -- in input order, one sort (00_common.sql: ordered input)
    IF v_written IS DISTINCT FROM v_parts THEN
        -- A partition vanished under us (its queue was deleted): retry.
        RAISE EXCEPTION 'push raced a queue deletion' USING ERRCODE = '40001';
    END IF;
END
$fn$;

-- _push_arrays appends items [{queue, partition, payload, transactionId,
-- traceId}] (validated and completed by the caller; an item without a
-- transactionId gets one generated under the lock, derived from p_seed
-- where it names its place) and returns, per item in input order, its
-- queue, partition and traceId, its partition's id and number, and what
-- _push_write returns. All or nothing. Everything that needs no lock
-- (reading the items, finding the partitions) is done before the
-- partitions are locked: they stay locked until the commit is flushed.
CREATE OR REPLACE FUNCTION queen._push_arrays(p_items json, p_now timestamptz, p_seed bigint,
                                              OUT qn text[], OUT pn text[], OUT traces text[], OUT pids uuid[],
                                              OUT nums bigint[], OUT ats timestamptz[], OUT fresh boolean[],
                                              OUT offsets bigint[], OUT txids text[])
LANGUAGE plpgsql SET plan_cache_mode = force_generic_plan SET jit = off AS $fn$
DECLARE
    it queen.push_items;
BEGIN
    SELECT * INTO it FROM queen._push_items(p_items);
    SELECT * INTO qn, pn, traces, pids, nums, ats, fresh, offsets, txids
    FROM queen._push_arrays(it, p_now, p_seed);
END
$fn$;

-- The same with the items as _push_items reads them (push_v3's arrays).
CREATE OR REPLACE FUNCTION queen._push_arrays(it queen.push_items, p_now timestamptz, p_seed bigint,
                                              OUT qn text[], OUT pn text[], OUT traces text[], OUT pids uuid[],
                                              OUT nums bigint[], OUT ats timestamptz[], OUT fresh boolean[],
                                              OUT offsets bigint[], OUT txids text[])
LANGUAGE plpgsql SET plan_cache_mode = force_generic_plan SET jit = off AS $fn$
DECLARE
    pr     record;  -- _push_pairs
    pl     record;  -- _push_partitions
    v_pids uuid[];  -- per item: its partition, queue and dedup window
    v_qids bigint[];
    v_wins int[];
    v_subs boolean;  -- whether the queues have subscribed groups (_push_append)
BEGIN
    IF EXISTS (SELECT 1 FROM queen.maintenance WHERE mode = 'push' AND enabled) THEN
        RAISE EXCEPTION 'pushes are paused for maintenance' USING ERRCODE = 'QN503';
    END IF;
    SELECT * INTO pr FROM queen._push_pairs(it.qn, it.pn, it.plain);

    -- Shared against subscription creation and queue deletion (exclusive)
    -- on each queue name; taken before anything is looked up.
    PERFORM pg_advisory_xact_lock_shared(queen.queue_lock_key(o.q))
    FROM (SELECT q FROM unnest(pr.queues) WITH ORDINALITY AS u(q, ord) ORDER BY ord) o;

    SELECT * INTO pl FROM queen._push_partitions(pr.qn, pr.pn, pr.plain, pr.queues, p_now);

    -- An encrypted queue never stores a plain payload: the caller seals and
    -- sends again (the queue name is the error's detail).
    IF pl.sealme IS NOT NULL THEN
        RAISE EXCEPTION 'queue % is encrypted: its payloads must be sealed', pl.sealme
            USING ERRCODE = 'QNENC', DETAIL = pl.sealme;
    END IF;

    SELECT array_agg(m.pid), array_agg(m.qid), array_agg(m.win)
    INTO v_pids, v_qids, v_wins
    FROM (SELECT m.pid, m.qid, m.win
          FROM unnest(it.qn, it.pn) WITH ORDINALITY AS i(qn, pn, o)
          JOIN unnest(pr.qn, pr.pn, pl.pids, pl.qids, pl.wins) AS m(qn, pn, pid, qid, win) ON m.qn = i.qn AND m.pn = i.pn
          ORDER BY i.o) m;  -- in input order (00_common.sql: ordered input)

    IF NOT pl.capped AND array_remove(it.txids, NULL) = '{}' THEN
        -- Every id generated: one statement locks, numbers and writes.
        SELECT a.nums, a.ats, a.offsets, a.txids, a.subs INTO nums, ats, offsets, txids, v_subs
        FROM queen._push_append(v_pids, v_wins, it.payloads, it.traces, it.subs, it.keys, pr.queues, p_now, p_seed) a;
        fresh := array_fill(true, ARRAY[cardinality(v_pids)]);
        IF v_subs THEN
            PERFORM queen._push_ready(pl.pids, pl.qids, pr.qn);
        END IF;
    ELSE
        SELECT w.nums, w.ats, w.fresh, w.offsets, w.txids INTO nums, ats, fresh, offsets, txids
        FROM queen._push_locked(it, v_pids, v_qids, v_wins, pl.pids, pr.queues, pl.capped, p_now, p_seed) w;
    END IF;
    qn := it.qn;
    pn := it.pn;
    traces := it.traces;
    pids := v_pids;
END
$fn$;

-- _push_locked locks the partitions of a push (p_parts; the capped queues'
-- rows first when p_capped) and writes its items (_push_write), then
-- checks the capped queues' sizes. See _push_plan for the arguments.
CREATE OR REPLACE FUNCTION queen._push_locked(it queen.push_items, p_pids uuid[], p_qids bigint[], p_wins int[],
                                              p_parts uuid[], p_queues text[], p_capped boolean,
                                              p_now timestamptz, p_seed bigint,
                                              OUT nums bigint[], OUT ats timestamptz[], OUT fresh boolean[],
                                              OUT offsets bigint[], OUT txids text[])
LANGUAGE plpgsql SET plan_cache_mode = force_generic_plan SET jit = off AS $fn$
DECLARE
    v_locked uuid[];  -- the locked partitions, their numbers, offsets and push times
    v_nums   bigint[];
    v_lasts  bigint[];
    v_at     timestamptz[];
    v_full   text;
BEGIN
    -- Capped queues: hold the queue row so the size check below is exact.
    IF p_capped THEN
        PERFORM 1 FROM queen.queues x
        WHERE x.name = ANY (p_queues) AND x.max_size > 0
        ORDER BY x.name COLLATE "C"
        FOR NO KEY UPDATE;
    END IF;

    -- Lock the partitions in one fixed order (by id; pushes are the only
    -- writers of partition rows), so concurrent pushes never deadlock.
    SELECT array_agg(l.id), array_agg(l.num), array_agg(l.last_offset), array_agg(l.last_pushed_at)
    INTO v_locked, v_nums, v_lasts, v_at
    FROM (SELECT p.id, p.num, p.last_offset, p.last_pushed_at FROM queen.partitions p
          WHERE p.id = ANY (p_parts) ORDER BY p.id FOR NO KEY UPDATE) l;
    IF cardinality(v_locked) IS DISTINCT FROM cardinality(p_parts) THEN
        -- A partition vanished under us (its queue was deleted): retry.
        RAISE EXCEPTION 'push raced a queue deletion' USING ERRCODE = '40001';
    END IF;

    -- Stamped while the partition locks are held: created_at is monotone
    -- per partition in commit order.
    SELECT w.nums, w.ats, w.fresh, w.offsets, w.txids INTO nums, ats, fresh, offsets, txids
    FROM queen._push_write(it, p_pids, p_qids, p_wins, v_locked, v_nums, v_lasts, v_at,
                           coalesce(p_now, clock_timestamp()), p_seed) w;

    IF p_capped THEN
        SELECT x.name INTO v_full
        FROM queen.queues x
        WHERE x.name = ANY (p_queues) AND x.max_size > 0
          AND queen.queue_depth(x.id) > x.max_size
        LIMIT 1;
        IF v_full IS NOT NULL THEN
            RAISE EXCEPTION 'queue % is full', v_full USING ERRCODE = 'QN429';
        END IF;
    END IF;
END
$fn$;

-- _push is _push_arrays with its reply in JSON, one object per item in
-- input order (for queen.push, queen.transact and a dead letter's retry),
-- the ids made with a seed of its own.
CREATE OR REPLACE FUNCTION queen._push(p_items json, p_now timestamptz)
RETURNS json LANGUAGE plpgsql SET plan_cache_mode = force_generic_plan SET jit = off AS $fn$
DECLARE
    v_seed bigint := queen.new_seed();  -- of the ids it generates (migration 0017)
    r      record;
BEGIN
    SELECT * INTO r FROM queen._push_arrays(p_items, p_now, v_seed);
    RETURN (SELECT json_agg(json_build_object(
                       'index', u.o - 1,
                       'transactionId', queen.seg_txid(u.txid, u.at, u.num, u.off, v_seed),
                       'status', CASE WHEN u.fresh THEN 'queued' ELSE 'duplicate' END,
                       'offset', u.off,
                       'messageId', queen.message_id(u.pid, u.off),
                       'partitionId', u.pid,
                       'queue', u.qn,
                       'partition', u.pn,
                       'traceId', u.trace,
                       'createdAt', u.at)
                     ORDER BY u.o)
            FROM unnest(r.qn, r.pn, r.traces, r.pids, r.nums, r.ats, r.fresh, r.offsets, r.txids)
                 WITH ORDINALITY AS u(qn, pn, trace, pid, num, at, fresh, off, txid, o));
END
$fn$;

