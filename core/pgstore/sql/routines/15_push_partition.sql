-- ---------------------------------------------------------------------------
-- push to one partition (the general push, _push, is in 10_push.sql)
--
-- push_partition_v2: the common push, every item to one partition, with
-- its fields as arrays, so the database parses no JSON and renders no
-- reply. Same rules, locks and writes as _push (which serves pushes that
-- span partitions, transactions and dead-letter retries):
--   p_payloads   the stored text of each payload: compact JSON, or the
--                base64 text of a sealed one (then p_key_id names its key);
--   p_trace_ids  NULL, or one per item (NULL elements allowed);
--   p_seed       the seed of the ids it generates (migration 0017).
-- p_txids holds NULL for an item without a transactionId: it gets one
-- that names its place, under the lock (queen.gen_id from p_seed; at
-- random, queen.self_id, where the place is too long to name). It returns
-- the partition, its number, the push's time, and per item, in input
-- order, whether it was stored (fresh), the offset it is at (a duplicate:
-- the offset its first copy is at) and its transactionId, NULL for an id
-- derived from p_seed. A push whose ids are all generated, to an existing
-- partition (_push_partition_append, _push_partition_append_one), returns no fresh nor offsets: its
-- items are at first_offset onwards, and txids is NULL too unless some id
-- is not derived. A message's id is queen.message_id of its partition and
-- offset.

-- _push_target looks up and locks the partition of a push_partition_v2 call,
-- creating it (and its queue) when missing, and says whether the queue has
-- subscribed groups. Capped queues get their queue row held first, as in
-- _push.
DROP FUNCTION IF EXISTS queen._push_target(text, text, boolean, timestamptz);
CREATE OR REPLACE FUNCTION queen._push_target(p_queue text, p_partition text, p_plain boolean, p_now timestamptz,
                                              OUT pid uuid, OUT pnum bigint, OUT qid bigint, OUT last bigint,
                                              OUT last_at timestamptz, OUT dedup_window int, OUT max_size bigint,
                                              OUT dedup_floor timestamptz, OUT subs boolean)
LANGUAGE plpgsql SET plan_cache_mode = force_generic_plan SET jit = off AS $fn$
DECLARE
    v_encrypted boolean;
BEGIN
    FOR n IN 1 .. 2 LOOP  -- look up; create what is missing, then look again
        SELECT x.id, x.dedup_window, x.max_size, x.encryption_enabled,
               (SELECT f.floor FROM queen.dedup_floor f WHERE f.queue_id = x.id),
               EXISTS (SELECT 1 FROM queen.subscriptions s WHERE s.queue_name = p_queue)
        INTO qid, dedup_window, max_size, v_encrypted, dedup_floor, subs
        FROM queen.queues x WHERE x.name = p_queue;
        IF v_encrypted AND p_plain THEN
            RAISE EXCEPTION 'queue % is encrypted: its payloads must be sealed', p_queue
                USING ERRCODE = 'QNENC', DETAIL = p_queue;
        END IF;
        -- Create what is missing before any lock is taken, then lock the
        -- capped queue's row and the partition's: the order of a push
        -- across partitions (_push_arrays), so the two never deadlock.
        IF qid IS NULL OR NOT EXISTS (SELECT 1 FROM queen.partitions p WHERE p.queue_id = qid AND p.name = p_partition) THEN
            PERFORM queen._push_partitions(ARRAY[p_queue], ARRAY[p_partition], ARRAY[p_plain], ARRAY[p_queue], p_now);
            CONTINUE;
        END IF;
        IF max_size > 0 THEN
            PERFORM 1 FROM queen.queues x WHERE x.id = qid FOR NO KEY UPDATE;
        END IF;
        SELECT p.id, p.num, p.last_offset, p.last_pushed_at INTO pid, pnum, last, last_at
        FROM queen.partitions p WHERE p.queue_id = qid AND p.name = p_partition
        FOR NO KEY UPDATE;
        EXIT WHEN FOUND;
    END LOOP;
    IF pid IS NULL THEN
        RAISE EXCEPTION 'push raced a queue deletion' USING ERRCODE = '40001';
    END IF;
END
$fn$;

-- _push_ready gives each subscribed group of the queues a ready row for
-- each partition a push wrote to (p_pids, p_qids and p_queues in lock
-- order, one per partition) that has none. An existing row is left alone,
-- unlocked: a push in flight never hides its partition from the pops that
-- scan the ready set. A statement of its own after the partitions' locks,
-- so that it sees a row removed before they were granted (queen._unschedule).
CREATE OR REPLACE FUNCTION queen._push_ready(p_pids uuid[], p_qids bigint[], p_queues text[])
RETURNS void LANGUAGE plpgsql SET plan_cache_mode = force_generic_plan SET jit = off AS $fn$
BEGIN
    INSERT INTO queen.ready (queue_id, group_name, partition_id, order_key)
    SELECT f.qid, s.group_name, f.pid, nextval('queen.ready_order')
    FROM unnest(p_pids, p_qids, p_queues) AS f(pid, qid, qn)
    JOIN queen.subscriptions s ON s.queue_name = f.qn
    -- the common case, a row already there: one probe, no nextval and no
    -- speculative insert (a scalar subquery, so no generic plan turns it
    -- into a scan of queen.ready)
    WHERE (SELECT 1 FROM queen.ready r WHERE r.partition_id = f.pid AND r.group_name = s.group_name) IS NULL
    ORDER BY f.qid, s.group_name, f.pid
    ON CONFLICT DO NOTHING;
END
$fn$;

-- _push_partition_append is push_partition_v2 for items whose ids are all
-- generated (nothing to probe: each takes the next offset in input order),
-- to an existing partition of an uncapped queue it may write to, pushes
-- not paused; it returns no partition_id otherwise. One statement: the
-- UPDATE that numbers the items takes the partition's lock itself, instead
-- of a FOR NO KEY UPDATE and a later UPDATE of the row (one row operation
-- under the lock instead of two), and its SET is evaluated once the lock is
-- granted, so the push's time is stamped under it. The ids are derived
-- (queen.gen_id from p_seed): the segment stores none and the reply
-- carries none. When the last offset is too long to name (queen.self_fits;
-- the offsets before it are shorter), the segment stores every id and the
-- reply carries them, those too long to name random and with their keys.
CREATE OR REPLACE FUNCTION queen._push_partition_append(p_queue text, p_partition text, p_payloads text[],
                                                        p_trace_ids text[], p_producer_sub text, p_key_id text,
                                                        p_now timestamptz, p_seed bigint,
                                                        OUT partition_id uuid, OUT created_at timestamptz,
                                                        OUT part_num bigint, OUT first_offset bigint,
                                                        OUT txids text[])
LANGUAGE plpgsql SET plan_cache_mode = force_generic_plan SET jit = off AS $fn$
DECLARE
    v_qid  bigint;
    v_subs boolean;  -- whether the queue has subscribed groups, read after the queue's advisory lock
    v_n    int := cardinality(p_payloads);
BEGIN
    WITH l AS MATERIALIZED (
        UPDATE queen.partitions p
        SET last_offset = p.last_offset + v_n,
            -- stamped under the lock: created_at is monotone per partition
            last_pushed_at = greatest(coalesce(p_now, clock_timestamp()), coalesce(p.last_pushed_at, '-infinity')),
            oldest_at = coalesce(p.oldest_at, '-infinity')  -- retention looks (partitions_oldest)
        FROM queen.queues x
        WHERE x.name = p_queue AND p.queue_id = x.id AND p.name = p_partition AND x.max_size = 0
          AND (p_key_id IS NOT NULL OR NOT x.encryption_enabled)
          AND NOT EXISTS (SELECT 1 FROM queen.maintenance m WHERE m.mode = 'push' AND m.enabled)
        RETURNING p.id AS pid, p.num AS pnum, x.id AS qid, p.last_offset - v_n AS last, x.dedup_window,
                  p.last_pushed_at AS at, EXISTS (SELECT 1 FROM queen.subscriptions s WHERE s.queue_name = p_queue) AS subs,
                  -- the last offset fits the form, so do the ones before it
                  queen.self_fits(p.num, p.last_offset) AS fit
    ),
    res AS MATERIALIZED (  -- only when some id is too long to name
        SELECT g AS o, l.last + g AS off,
               queen.seg_txid(queen.stored_txid(NULL, l.at, l.pnum, l.last + g), l.at, l.pnum, l.last + g, p_seed) AS txid
        FROM l CROSS JOIN LATERAL generate_series(1, CASE WHEN l.fit THEN 0 ELSE v_n END) g
    ),
    seg AS (  -- one message in scalars, several in arrays
        INSERT INTO queen.segments (partition_num, base_offset, created_at, txid, payload, txids, payloads,
                                    trace_ids, producer_sub, key_id, located, id_seed, id_count)
        SELECT l.pnum, l.last + 1, l.at,
               CASE WHEN v_n = 1 AND NOT l.fit THEN (SELECT res.txid FROM res) END,
               CASE WHEN v_n = 1 THEN p_payloads[1] END,
               CASE WHEN v_n > 1 AND NOT l.fit THEN (SELECT array_agg(res.txid ORDER BY res.o) FROM res) END,
               CASE WHEN v_n > 1 THEN p_payloads END,
               CASE WHEN cardinality(array_remove(p_trace_ids, NULL)) > 0 THEN p_trace_ids END,
               p_producer_sub, p_key_id,
               -- the first id is self-located when it fits its form
               nullif(queen.self_fits(l.pnum, l.last + 1), false),
               CASE WHEN l.fit THEN p_seed END, CASE WHEN l.fit AND v_n > 1 THEN v_n END
        FROM l
    ),
    dd AS (  -- as _push_partition_write: a generated id that does not fit its form
        INSERT INTO queen.dedup (key, msg_offset, created_at)
        SELECT queen.dedup_key(l.pid, res.txid), res.off, l.at
        FROM l, res
        WHERE l.dedup_window > 0 AND res.off > l.last + 1 AND NOT queen.self_fits(l.pnum, res.off)
    )
    SELECT l.pid, l.at, l.qid, l.subs, l.pnum, l.last + 1,
           CASE WHEN NOT l.fit THEN (SELECT array_agg(res.txid ORDER BY res.o) FROM res) END
    INTO partition_id, created_at, v_qid, v_subs, part_num, first_offset, txids
    FROM l;
    IF v_subs THEN
        PERFORM queen._push_ready(ARRAY[partition_id], ARRAY[v_qid], ARRAY[p_queue]);
    END IF;
END
$fn$;

-- _push_partition_append_one is _push_partition_append for one message: the
-- same rows, written by a plain UPDATE and INSERT, whose plans cost less
-- to start up than the batch statement's CTEs (docs/benchmarks.md, "Push
-- fast paths").
CREATE OR REPLACE FUNCTION queen._push_partition_append_one(p_queue text, p_partition text, p_payload text,
                                                            p_trace_id text, p_producer_sub text, p_key_id text,
                                                            p_now timestamptz, p_seed bigint,
                                                            OUT partition_id uuid, OUT created_at timestamptz,
                                                            OUT part_num bigint, OUT first_offset bigint,
                                                            OUT txids text[])
LANGUAGE plpgsql SET plan_cache_mode = force_generic_plan SET jit = off AS $fn$
DECLARE
    v_qid  bigint;
    v_subs boolean;  -- whether the queue has subscribed groups, read after the queue's advisory lock
BEGIN
    UPDATE queen.partitions p
    SET last_offset = p.last_offset + 1,
        -- stamped under the lock: created_at is monotone per partition
        last_pushed_at = greatest(coalesce(p_now, clock_timestamp()), coalesce(p.last_pushed_at, '-infinity')),
        oldest_at = coalesce(p.oldest_at, '-infinity')  -- retention looks (partitions_oldest)
    FROM queen.queues x
    WHERE x.name = p_queue AND p.queue_id = x.id AND p.name = p_partition AND x.max_size = 0
      AND (p_key_id IS NOT NULL OR NOT x.encryption_enabled)
      AND NOT EXISTS (SELECT 1 FROM queen.maintenance m WHERE m.mode = 'push' AND m.enabled)
    RETURNING p.id, p.num, x.id, p.last_offset, p.last_pushed_at,
              EXISTS (SELECT 1 FROM queen.subscriptions s WHERE s.queue_name = p_queue)
    INTO partition_id, part_num, v_qid, first_offset, created_at, v_subs;
    IF NOT FOUND THEN
        RETURN;
    END IF;
    -- The id is derived (queen.gen_id): nothing stored, nothing returned.
    -- Only a place too long to name gets a random one.
    IF NOT queen.self_fits(part_num, first_offset) THEN
        txids := ARRAY[queen.stored_txid(NULL, _push_partition_append_one.created_at, part_num, first_offset)];
    END IF;
    INSERT INTO queen.segments (partition_num, base_offset, created_at, txid, payload, trace_ids, producer_sub, key_id,
                                located, id_seed)
    VALUES (part_num, first_offset, _push_partition_append_one.created_at, txids[1], p_payload,
            CASE WHEN p_trace_id IS NOT NULL THEN ARRAY[p_trace_id] END, p_producer_sub, p_key_id,
            CASE WHEN txids IS NULL THEN true END, CASE WHEN txids IS NULL THEN p_seed END);
    IF v_subs THEN
        PERFORM queen._push_ready(ARRAY[partition_id], ARRAY[v_qid], ARRAY[p_queue]);
    END IF;
END
$fn$;

-- _push_partition_write stores the items of a push_partition_v2 call in
-- their partition (p_pid, number p_pnum, queue p_qid, last offset p_last,
-- locked; p_subs: the queue has subscribed groups) at time p_at, and
-- returns per item whether it was stored, its offset and its stored id, as
-- push_partition_v2 does. Fresh items take the next offsets in input
-- order; an item whose key is live, or that repeats an earlier item,
-- reports its first copy's. One statement writes them all.
DROP FUNCTION IF EXISTS queen._push_partition_write(uuid, bigint, text, bigint, int, timestamptz, text[], text[],
                                                    text[], text, text, boolean[], bigint[]);
CREATE OR REPLACE FUNCTION queen._push_partition_write(p_queue text, p_pid uuid, p_pnum bigint, p_qid bigint,
                                                       p_last bigint, p_window int, p_floor timestamptz,
                                                       p_subs boolean, p_at timestamptz, p_txids text[],
                                                       p_payloads text[],
                                                       p_trace_ids text[], p_producer_sub text, p_key_id text,
                                                       p_seed bigint,
                                                       OUT fresh boolean[], OUT offsets bigint[], OUT txids text[])
LANGUAGE plpgsql SET plan_cache_mode = force_generic_plan SET jit = off AS $fn$
DECLARE
    v_since timestamptz := p_at - make_interval(secs => p_window);  -- the push's dedup window
    v_floor timestamptz := coalesce(p_floor, '-infinity');          -- and its queue's floor
BEGIN
    WITH k AS MATERIALIZED (  -- materialized: one dedup probe per item
        SELECT u.*,
               CASE WHEN p_window > 0 AND u.o = u.first AND u.txid IS NOT NULL THEN
                   -- a subquery per key, never a join: a generic plan made
                   -- while the table was small would scan it for good
                   (SELECT s.seen FROM queen._dedup_seen(p_pnum, p_pid, p_qid, u.txid, v_since, v_floor) s)
               END AS seen
        FROM (SELECT x.txid, x.payload, x.trace, x.o,
                     CASE WHEN x.txid IS NULL THEN x.o ELSE min(x.o) OVER (PARTITION BY x.txid) END AS first
              FROM unnest(p_txids, p_payloads, p_trace_ids) WITH ORDINALITY AS x(txid, payload, trace, o)) u
    ),
    r AS (
        SELECT k.*, CASE WHEN k.fresh THEN p_last + count(*) FILTER (WHERE k.fresh) OVER (ORDER BY k.o) END AS off
        FROM (SELECT k.*, (p_window = 0 OR (k.o = k.first AND k.seen IS NULL)) AS fresh FROM k) k
    ),
    -- an item without an id gets one that names its place, derived
    -- (NULL; queen.gen_id) unless the place is too long to name
    res AS MATERIALIZED (
        SELECT r.o, queen.stored_txid(r.txid, p_at, p_pnum, r.off) AS txid, r.txid IS NULL AS gen, r.payload, r.trace,
               r.fresh, coalesce(r.off, max(coalesce(r.off, r.seen)) OVER (PARTITION BY r.first)) AS off
        FROM r
    ),
    seg AS (
        -- one message in scalars, several in arrays; no ids when every
        -- one is derived, else every one (a derived one rendered)
        INSERT INTO queen.segments (partition_num, base_offset, created_at, txid, payload, txids, payloads, trace_ids,
                                    producer_sub, key_id, located, id_seed, id_count)
        SELECT p_pnum, p_last + 1, p_at,
               CASE WHEN count(*) = 1 THEN min(res.txid) END, CASE WHEN count(*) = 1 THEN min(res.payload) END,
               CASE WHEN count(*) > 1 AND bool_or(res.txid IS NOT NULL) THEN
                   array_agg(queen.seg_txid(res.txid, p_at, p_pnum, res.off, p_seed) ORDER BY res.o) END,
               CASE WHEN count(*) > 1 THEN array_agg(res.payload ORDER BY res.o) END,
               CASE WHEN bool_or(res.trace IS NOT NULL) THEN array_agg(res.trace ORDER BY res.o) END,
               p_producer_sub, p_key_id,
               nullif(bool_or(res.off = p_last + 1 AND queen.self_located(res.txid, res.gen, p_pnum, res.off)), false),
               CASE WHEN bool_and(res.txid IS NULL) THEN p_seed END,
               CASE WHEN bool_and(res.txid IS NULL) AND count(*) > 1 THEN count(*) END
        FROM res WHERE res.fresh
        HAVING count(*) > 0
    ),
    upd AS (
        UPDATE queen.partitions p SET last_offset = n.last, last_pushed_at = p_at,
            oldest_at = coalesce(p.oldest_at, '-infinity')  -- retention looks (partitions_oldest)
        FROM (SELECT max(res.off) AS last FROM res WHERE res.fresh) n
        WHERE p.id = p_pid AND n.last IS NOT NULL
    ),
    dd AS (  -- the first message's key is the segment's (segments_first_key);
             -- a self-located message needs none (migration 0015)
        INSERT INTO queen.dedup (key, msg_offset, created_at)
        SELECT queen.dedup_key(p_pid, res.txid), res.off, p_at
        FROM res WHERE res.fresh AND p_window > 0 AND res.off > p_last + 1
                   AND NOT queen.self_located(res.txid, res.gen, p_pnum, res.off)
    )
    SELECT array_agg(res.fresh ORDER BY res.o), array_agg(res.off ORDER BY res.o), array_agg(res.txid ORDER BY res.o)
    INTO fresh, offsets, txids FROM res;
    IF p_subs AND true = ANY (fresh) THEN
        PERFORM queen._push_ready(ARRAY[p_pid], ARRAY[p_qid], ARRAY[p_queue]);
    END IF;
END
$fn$;

-- _push_partition_write_one is _push_partition_write for one message: a
-- dedup probe and plain INSERT and UPDATE, whose plans cost less to start
-- up than the batch statement's CTEs (docs/benchmarks.md, "Push fast
-- paths").
CREATE OR REPLACE FUNCTION queen._push_partition_write_one(p_queue text, p_pid uuid, p_pnum bigint, p_qid bigint,
                                                           p_last bigint, p_window int, p_floor timestamptz,
                                                           p_subs boolean, p_at timestamptz, p_txid text,
                                                           p_payload text, p_trace_id text, p_producer_sub text,
                                                           p_key_id text, p_seed bigint,
                                                           OUT fresh boolean[], OUT offsets bigint[], OUT txids text[])
LANGUAGE plpgsql SET plan_cache_mode = force_generic_plan SET jit = off AS $fn$
DECLARE
    v_seen bigint;  -- the offset of the message's live copy
BEGIN
    IF p_window > 0 AND p_txid IS NOT NULL THEN
        SELECT s.seen INTO v_seen
        FROM queen._dedup_seen(p_pnum, p_pid, p_qid, p_txid, p_at - make_interval(secs => p_window),
                               coalesce(p_floor, '-infinity')) s;
    END IF;
    fresh := ARRAY[v_seen IS NULL];
    offsets := ARRAY[coalesce(v_seen, p_last + 1)];
    -- a generated id is derived (NULL here and in the segment), unless its
    -- place is too long to name
    txids := ARRAY[queen.stored_txid(p_txid, p_at, p_pnum, p_last + 1)];
    IF v_seen IS NOT NULL THEN
        RETURN;
    END IF;
    INSERT INTO queen.segments (partition_num, base_offset, created_at, txid, payload, trace_ids, producer_sub, key_id,
                                located, id_seed)
    VALUES (p_pnum, p_last + 1, p_at, txids[1], p_payload, CASE WHEN p_trace_id IS NOT NULL THEN ARRAY[p_trace_id] END,
            p_producer_sub, p_key_id, nullif(queen.self_located(txids[1], p_txid IS NULL, p_pnum, p_last + 1), false),
            CASE WHEN txids[1] IS NULL THEN p_seed END);
    UPDATE queen.partitions p SET last_offset = p_last + 1, last_pushed_at = p_at,
        oldest_at = coalesce(p.oldest_at, '-infinity')  -- retention looks (partitions_oldest)
    WHERE p.id = p_pid;
    IF p_subs THEN
        PERFORM queen._push_ready(ARRAY[p_pid], ARRAY[p_qid], ARRAY[p_queue]);
    END IF;
END
$fn$;

CREATE OR REPLACE FUNCTION queen.push_partition_v2(p_queue text, p_partition text, p_txids text[], p_payloads text[],
                                                   p_trace_ids text[], p_producer_sub text, p_key_id text,
                                                   p_now timestamptz, p_seed bigint,
                                                   OUT partition_id uuid, OUT created_at timestamptz,
                                                   OUT part_num bigint, OUT first_offset bigint,
                                                   OUT fresh boolean[], OUT offsets bigint[], OUT txids text[])
LANGUAGE plpgsql SET plan_cache_mode = force_generic_plan SET jit = off AS $fn$
DECLARE
    t record;  -- the partition, locked, its queue's settings and whether the queue has groups
BEGIN
    -- Shared against subscription creation and queue deletion (exclusive).
    PERFORM pg_advisory_xact_lock_shared(queen.queue_lock_key(p_queue));
    IF cardinality(p_txids) = 1 AND p_txids[1] IS NULL THEN
        SELECT * INTO partition_id, created_at, part_num, first_offset, txids
        FROM queen._push_partition_append_one(p_queue, p_partition, p_payloads[1], p_trace_ids[1], p_producer_sub,
                                              p_key_id, p_now, p_seed);
    ELSIF array_remove(p_txids, NULL) = '{}' THEN
        SELECT * INTO partition_id, created_at, part_num, first_offset, txids
        FROM queen._push_partition_append(p_queue, p_partition, p_payloads, p_trace_ids, p_producer_sub, p_key_id,
                                          p_now, p_seed);
    END IF;
    IF partition_id IS NOT NULL THEN
        RETURN;
    END IF;
    -- Ids to probe, or a partition the ways above do not write to. The
    -- steady state, one statement: an existing partition of an uncapped
    -- queue it may write to, looked up and locked.
    SELECT p.id AS pid, p.num AS pnum, x.id AS qid, p.last_offset AS last, p.last_pushed_at AS last_at, x.dedup_window,
           x.max_size, (SELECT f.floor FROM queen.dedup_floor f WHERE f.queue_id = x.id) AS dedup_floor,
           EXISTS (SELECT 1 FROM queen.subscriptions s WHERE s.queue_name = p_queue) AS subs
    INTO t
    FROM queen.queues x JOIN queen.partitions p ON p.queue_id = x.id
    WHERE x.name = p_queue AND p.name = p_partition AND x.max_size = 0
      AND (p_key_id IS NOT NULL OR NOT x.encryption_enabled)
      AND NOT EXISTS (SELECT 1 FROM queen.maintenance m WHERE m.mode = 'push' AND m.enabled)
    FOR NO KEY UPDATE OF p;
    IF NOT FOUND THEN  -- missing, capped, encrypted or paused: the careful way
        IF EXISTS (SELECT 1 FROM queen.maintenance m WHERE m.mode = 'push' AND m.enabled) THEN
            RAISE EXCEPTION 'pushes are paused for maintenance' USING ERRCODE = 'QN503';
        END IF;
        SELECT * INTO t FROM queen._push_target(p_queue, p_partition, p_key_id IS NULL, p_now);
    END IF;
    partition_id := t.pid;
    part_num := t.pnum;
    -- Stamped under the partition lock: created_at is monotone per partition.
    created_at := greatest(coalesce(p_now, clock_timestamp()), coalesce(t.last_at, '-infinity'));
    IF cardinality(p_txids) = 1 THEN
        SELECT * INTO fresh, offsets, txids
        FROM queen._push_partition_write_one(p_queue, t.pid, t.pnum, t.qid, t.last, t.dedup_window, t.dedup_floor,
                                             t.subs, push_partition_v2.created_at, p_txids[1], p_payloads[1],
                                             p_trace_ids[1], p_producer_sub, p_key_id, p_seed);
    ELSE
        SELECT * INTO fresh, offsets, txids
        FROM queen._push_partition_write(p_queue, t.pid, t.pnum, t.qid, t.last, t.dedup_window, t.dedup_floor, t.subs,
                                         push_partition_v2.created_at, p_txids, p_payloads, p_trace_ids,
                                         p_producer_sub, p_key_id, p_seed);
    END IF;
    IF t.max_size > 0 AND queen.queue_depth(t.qid) > t.max_size THEN
        RAISE EXCEPTION 'queue % is full', p_queue USING ERRCODE = 'QN429';
    END IF;
END
$fn$;

-- push_v3 is push_v2 with the items as arrays in input order, as
-- push_partition_v2 takes them (queue, partition, the stored text of each
-- payload, transactionId, traceId and producer, NULL where none; the key
-- each sealed payload is sealed with, NULL for a plain one; an array
-- NULL when every element is), so the database parses no JSON.
DROP FUNCTION IF EXISTS queen.push_v3(text[], text[], text[], text[], text[], text, text, timestamptz, bigint);
DROP FUNCTION IF EXISTS queen.push_v3(text[], text[], text[], text[], text[], text, text[], timestamptz, bigint);
CREATE OR REPLACE FUNCTION queen.push_v3(p_qn text[], p_pn text[], p_payloads text[], p_txids text[],
                                         p_traces text[], p_producer_subs text[], p_key_ids text[],
                                         p_now timestamptz, p_seed bigint)
RETURNS TABLE (partition_ids uuid[], part_nums bigint[], created_ats timestamptz[], fresh boolean[],
               offsets bigint[], txids text[])
LANGUAGE sql SET jit = off AS $$
    SELECT r.pids, r.nums, r.ats, r.fresh, r.offsets, r.txids
    FROM queen._push_arrays(ROW(p_qn, p_pn, p_payloads, p_txids, p_traces, p_producer_subs,
                                coalesce(p_key_ids, array_fill(NULL::text, ARRAY[cardinality(p_qn)])),
                                coalesce(ARRAY(SELECT k IS NULL FROM unnest(p_key_ids) WITH ORDINALITY AS u(k, o) ORDER BY o),
                                         array_fill(true, ARRAY[cardinality(p_qn)])))::queen.push_items,
                            p_now, p_seed) r
$$;
