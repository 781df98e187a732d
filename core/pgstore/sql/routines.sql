-- Queen routines. Every operation is one call of one of these functions:
-- one statement, one round trip, one transaction, no session state.
--
-- This file is re-applied (CREATE OR REPLACE) by the migrator whenever its
-- checksum changes, after the numbered migrations.
--
-- Lock order, everywhere: consumers rows (sorted by partition id, group) →
-- queue-name advisory locks (sorted) → queues rows (sorted by name) →
-- partitions rows (sorted by id) → ready rows.
-- Pops take row locks only with SKIP LOCKED, so they never wait on them.
-- Pushes lock queues and partitions FOR NO KEY UPDATE, which does not
-- conflict with the FOR KEY SHARE that foreign-key checks take (a pop
-- creating a consumers row checks its partition), so those never wait either.

-- Performance notes (see README, Benchmarks):
-- * Every lookup is by key (scalar subqueries, LATERAL, = ANY on a primary
--   key), so no statement's cost grows with the number of queues,
--   partitions, dedup keys or idle cursors. Functions run with
--   plan_cache_mode = force_generic_plan: custom plans of the push CTE cost
--   ~10 ms to plan, generic plans are reused per connection.
-- * A push in the steady state is five statements: read the items, lock
--   the queue names (shared advisory), look up and lock the partitions (by
--   key, in order), write.
--   Per message it probes and inserts one dedup key (transactionId first,
--   so UUIDv7 keys append at the index edge; BRIN on created_at for
--   pruning); per partition it inserts one segment and HOT-updates one row.
-- * Measured on 2 cores: a 1-message push costs ~0.45 ms of backend time
--   against ~0.1 ms for a bare INSERT, and a 100-message push to 100
--   partitions ~9 ms (300 row writes). That, not locking, is why the push
--   targets of SPEC §7 are missed; the next steps would be a single-item
--   fast path and fewer row writes per partition.

-- A message's id is derived from its address, so it costs no storage.
CREATE OR REPLACE FUNCTION queen.message_id(p_pid uuid, p_off bigint)
RETURNS uuid LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
    SELECT md5(p_pid::text || ':' || p_off::text)::uuid
$$;

-- payload_json renders a stored payload for a reply: plain JSON text as
-- itself, a sealed payload (p_key set) as a JSON string of its base64 text,
-- which the Go core opens.
CREATE OR REPLACE FUNCTION queen.payload_json(p_payload text, p_key text)
RETURNS json LANGUAGE sql IMMUTABLE AS $$
    SELECT CASE WHEN p_key IS NULL THEN p_payload::json ELSE to_json(p_payload) END
$$;

-- The advisory key that serializes subscription creation (exclusive) with
-- pushes (shared) on one queue name.
CREATE OR REPLACE FUNCTION queen.queue_lock_key(p_queue text)
RETURNS bigint LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
    SELECT ('x' || substr(md5('queen.queue:' || p_queue), 1, 16))::bit(64)::bigint
$$;

-- _start_offset is the cursor a subscription starts at on one partition:
-- -1 (from the beginning), or just before the first message with
-- created_at >= p_from among the stored ones (just before the oldest stored
-- message when all of them are that young; the head when none is).
CREATE OR REPLACE FUNCTION queen._start_offset(p_pid uuid, p_from timestamptz)
RETURNS bigint LANGUAGE sql STABLE AS $$
    SELECT CASE WHEN p_from IS NULL THEN -1 ELSE coalesce(
        (SELECT s.base_offset + cardinality(s.txids) - 1
         FROM queen.segments s
         WHERE s.partition_id = p_pid AND s.created_at < p_from
         ORDER BY s.base_offset DESC LIMIT 1),
        (SELECT CASE WHEN p.last_pushed_at < p_from THEN p.last_offset
                     ELSE coalesce((SELECT min(s.base_offset) - 1 FROM queen.segments s
                                    WHERE s.partition_id = p_pid), p.last_offset) END
         FROM queen.partitions p WHERE p.id = p_pid)) END
$$;

-- group_position is a subscribed group's position on a partition, as
-- listings, lag and depth count it: its cursor (p_committed), or its
-- subscription start while it has no cursor there — and never before the
-- oldest stored message, since what retention removed cannot be read.
-- Lag is lastOffset - group_position.
CREATE OR REPLACE FUNCTION queen.group_position(p_pid uuid, p_committed bigint, p_from timestamptz)
RETURNS bigint LANGUAGE sql STABLE AS $$
    SELECT greatest(coalesce(p_committed, queen._start_offset(p_pid, p_from)),
                    coalesce((SELECT min(s.base_offset) - 1 FROM queen.segments s WHERE s.partition_id = p_pid),
                             (SELECT p.last_offset FROM queen.partitions p WHERE p.id = p_pid)))
$$;

-- Unconsumed messages of a queue (what maxSize caps): per partition, the
-- stored messages after the slowest subscribed group's position; all
-- stored messages when no group subscribes. Messages removed by retention
-- do not count.
CREATE OR REPLACE FUNCTION queen.queue_depth(p_queue_id bigint)
RETURNS bigint LANGUAGE sql STABLE AS $$
    SELECT coalesce(sum(p.last_offset - coalesce(
               (SELECT min(queen.group_position(p.id, c.committed, sb.from_ts))
                FROM queen.subscriptions sb
                LEFT JOIN queen.consumers c ON c.partition_id = p.id AND c.group_name = sb.group_name
                WHERE sb.queue_name = x.name),
               queen.group_position(p.id, -1, NULL))), 0)::bigint
    FROM queen.partitions p JOIN queen.queues x ON x.id = p.queue_id
    WHERE p.queue_id = p_queue_id
$$;

-- ---------------------------------------------------------------------------
-- push

-- _push appends items [{queue, partition, payload, transactionId, traceId}]
-- (validated and completed by the caller) and returns one result per item,
-- in input order. All or nothing.
CREATE OR REPLACE FUNCTION queen._push(p_items json, p_now timestamptz)
RETURNS json LANGUAGE plpgsql SET plan_cache_mode = force_generic_plan AS $fn$
DECLARE
    v_ts      timestamptz;
    v_qn      text[];     -- distinct (queue, partition) pairs in lock order
    v_pn      text[];
    v_plain   boolean[];  -- per pair: an item carries a plain payload
    v_pids    uuid[];
    v_queues  text[];
    v_missing boolean;
    v_capped  boolean;
    v_res     json;
    v_full    text;
    v_sealme  text;
    n         int;
BEGIN
    IF EXISTS (SELECT 1 FROM queen.maintenance WHERE mode = 'push' AND enabled) THEN
        RAISE EXCEPTION 'pushes are paused for maintenance' USING ERRCODE = 'QN503';
    END IF;
    -- Every statement below finds rows by key (scalar subqueries, = ANY),
    -- so its cost does not depend on how many queues, partitions or dedup
    -- keys exist. In the steady state (queue and partitions exist, no
    -- maxSize) a push is five statements: read the items, lock the queue
    -- names, look up the partitions, lock them, write.

    -- An item is plain unless the Go core sealed it (keyId) or it re-pushes
    -- a stored dead-letter snapshot as it was (snapshot).
    SELECT array_agg(u.qn ORDER BY u.qn COLLATE "C", u.pn COLLATE "C"),
           array_agg(u.pn ORDER BY u.qn COLLATE "C", u.pn COLLATE "C"),
           array_agg(u.plain ORDER BY u.qn COLLATE "C", u.pn COLLATE "C"),
           array_agg(DISTINCT u.qn COLLATE "C" ORDER BY u.qn COLLATE "C")
    INTO v_qn, v_pn, v_plain, v_queues
    FROM (SELECT i->>'queue' AS qn, i->>'partition' AS pn,
                 bool_or(i->>'keyId' IS NULL AND i->>'snapshot' IS NULL) AS plain
          FROM json_array_elements(p_items) i GROUP BY 1, 2) u;

    -- Shared against subscription creation and queue deletion (exclusive)
    -- on each queue name; taken before anything is looked up.
    PERFORM pg_advisory_xact_lock_shared(queen.queue_lock_key(o.q))
    FROM (SELECT q FROM unnest(v_queues) WITH ORDINALITY AS u(q, ord) ORDER BY ord) o;

    -- Look the partitions up; create what is missing, then look again.
    FOR n IN 1 .. 2 LOOP
        SELECT array_agg(l.pid ORDER BY l.o), bool_or(l.pid IS NULL), coalesce(bool_or(l.capped), false),
               min(l.qn) FILTER (WHERE l.plain AND l.encrypted)
        INTO v_pids, v_missing, v_capped, v_sealme
        FROM (
            SELECT u.o, u.qn, u.plain,
                   (SELECT p.id FROM queen.partitions p
                    WHERE p.queue_id = (SELECT x.id FROM queen.queues x WHERE x.name = u.qn) AND p.name = u.pn) AS pid,
                   (SELECT x.max_size > 0 FROM queen.queues x WHERE x.name = u.qn) AS capped,
                   (SELECT x.encryption_enabled FROM queen.queues x WHERE x.name = u.qn) AS encrypted
            FROM unnest(v_qn, v_pn, v_plain) WITH ORDINALITY AS u(qn, pn, plain, o)
        ) l;
        EXIT WHEN NOT v_missing;

        INSERT INTO queen.queues (name, created_at, updated_at)
        SELECT q, coalesce(p_now, now()), coalesce(p_now, now())
        FROM unnest(v_queues) q
        WHERE (SELECT x.id FROM queen.queues x WHERE x.name = q) IS NULL
        ON CONFLICT (name) DO NOTHING;

        INSERT INTO queen.partitions (id, queue_id, name, created_at)
        SELECT gen_random_uuid(), (SELECT x.id FROM queen.queues x WHERE x.name = u.qn), u.pn, coalesce(p_now, now())
        FROM unnest(v_qn, v_pn) AS u(qn, pn)
        WHERE (SELECT p.id FROM queen.partitions p
               WHERE p.queue_id = (SELECT x.id FROM queen.queues x WHERE x.name = u.qn) AND p.name = u.pn) IS NULL
        ON CONFLICT (queue_id, name) DO NOTHING;
    END LOOP;

    -- An encrypted queue never stores a plain payload: the caller seals and
    -- sends again (the queue name is the error's detail).
    IF v_sealme IS NOT NULL THEN
        RAISE EXCEPTION 'queue % is encrypted: its payloads must be sealed', v_sealme
            USING ERRCODE = 'QNENC', DETAIL = v_sealme;
    END IF;

    -- Capped queues: hold the queue row so the size check below is exact.
    IF v_capped THEN
        PERFORM 1 FROM queen.queues x
        WHERE x.name = ANY (v_queues) AND x.max_size > 0
        ORDER BY x.name COLLATE "C"
        FOR NO KEY UPDATE;
    END IF;

    -- Lock the partitions in one fixed order (by id; pushes are the only
    -- writers of partition rows), so concurrent pushes never deadlock.
    PERFORM 1 FROM queen.partitions WHERE id = ANY (v_pids) ORDER BY id FOR NO KEY UPDATE;

    -- Stamped while the partition locks are held: created_at is monotone
    -- per partition in commit order.
    v_ts := coalesce(p_now, clock_timestamp());

    WITH items AS (
        SELECT (t.ord - 1)::int AS idx, t.i->>'queue' AS qname, t.i->>'partition' AS pname,
               CASE WHEN t.i->>'keyId' IS NULL THEN coalesce((t.i->'payload')::text, 'null')
                    ELSE t.i->>'payload' END AS payload,  -- sealed: the base64 text itself
               t.i->>'transactionId' AS txid, t.i->>'traceId' AS trace_id, t.i->>'producerSub' AS producer_sub,
               t.i->>'keyId' AS key_id
        FROM json_array_elements(p_items) WITH ORDINALITY AS t(i, ord)
    ),
    parts AS (
        SELECT p.id AS pid, p.queue_id, p.name AS pname, x.name AS qname, p.last_offset,
               x.dedup_window, greatest(v_ts, coalesce(p.last_pushed_at, v_ts)) AS ts
        FROM queen.partitions p JOIN queen.queues x ON x.id = p.queue_id
        WHERE p.id = ANY (v_pids)
    ),
    j AS (
        SELECT it.*, pa.pid, pa.queue_id, pa.last_offset, pa.dedup_window, pa.ts,
               min(it.idx) OVER (PARTITION BY pa.pid, it.txid) AS first_idx
        FROM items it JOIN parts pa ON pa.qname = it.qname AND pa.pname = it.pname
    ),
    k AS MATERIALIZED (  -- materialized: one dedup probe per item
        SELECT j.*, dk.msg_offset AS seen_offset
        FROM j
        LEFT JOIN LATERAL (
            SELECT d.msg_offset FROM queen.dedup d
            WHERE d.transaction_id = j.txid AND d.partition_id = j.pid
              AND d.created_at > j.ts - make_interval(secs => j.dedup_window)) dk ON j.dedup_window > 0
    ),
    o AS (
        -- An item is fresh unless its key was seen, or repeats an earlier
        -- item of this request in the same partition; fresh items take the
        -- next offsets in input order.
        SELECT k.*, (k.seen_offset IS NULL AND (k.dedup_window = 0 OR k.idx = k.first_idx)) AS fresh
        FROM k
    ),
    r AS (
        SELECT o.*,
               CASE WHEN o.fresh THEN
                   o.last_offset + count(*) FILTER (WHERE o.fresh) OVER (PARTITION BY o.pid ORDER BY o.idx) END AS off
        FROM o
    ),
    res AS (
        -- A repeat inside the request reports the offset of its first item.
        SELECT r.*, coalesce(r.off, r.seen_offset, max(r.off) OVER (PARTITION BY r.pid, r.txid)) AS final_off
        FROM r
    ),
    fresh AS (
        SELECT pid, queue_id, idx, txid, payload, trace_id, producer_sub, key_id, ts, dedup_window, off
        FROM res WHERE fresh
    ),
    seg AS (
        INSERT INTO queen.segments (partition_id, base_offset, created_at, txids, payloads, trace_ids, producer_sub,
                                    key_id)
        SELECT pid, min(off), min(ts), array_agg(txid ORDER BY off), array_agg(payload ORDER BY off),
               CASE WHEN bool_or(trace_id IS NOT NULL) THEN array_agg(trace_id ORDER BY off) END,
               min(producer_sub),  -- one caller per request
               min(key_id)         -- one key per request
        FROM fresh GROUP BY pid
    ),
    upd AS (
        UPDATE queen.partitions p SET last_offset = f.last, last_pushed_at = f.ts
        FROM (SELECT pid, max(off) AS last, min(ts) AS ts FROM fresh GROUP BY pid) f
        WHERE p.id = f.pid AND p.id = ANY (v_pids)
    ),
    dd AS (
        INSERT INTO queen.dedup (partition_id, transaction_id, msg_offset, created_at)
        SELECT pid, txid, off, ts FROM fresh WHERE dedup_window > 0
        ORDER BY txid, pid
        ON CONFLICT (transaction_id, partition_id)
            DO UPDATE SET msg_offset = EXCLUDED.msg_offset, created_at = EXCLUDED.created_at
    ),
    rdy AS (
        INSERT INTO queen.ready (queue_id, group_name, partition_id, order_key)
        SELECT f.queue_id, s.group_name, f.pid, nextval('queen.ready_order')
        FROM (SELECT DISTINCT pid, queue_id, qname FROM fresh JOIN parts USING (pid, queue_id)) f
        JOIN queen.subscriptions s ON s.queue_name = f.qname
        ORDER BY f.queue_id, s.group_name, f.pid
        -- An existing row is left alone, unlocked: a push in flight never
        -- hides its partition from the pops that scan the ready set.
        ON CONFLICT DO NOTHING
    )
    SELECT json_agg(json_build_object(
               'index', res.idx,
               'transactionId', res.txid,
               'status', CASE WHEN res.fresh THEN 'queued' ELSE 'duplicate' END,
               'offset', res.final_off,
               'messageId', queen.message_id(res.pid, res.final_off),
               'partitionId', res.pid,
               'queue', res.qname,
               'partition', res.pname,
               'traceId', res.trace_id,
               'createdAt', res.ts)
             ORDER BY res.idx)
    INTO v_res
    FROM res;

    IF json_array_length(v_res) IS DISTINCT FROM json_array_length(p_items) THEN
        -- A partition vanished under us (its queue was deleted): retry.
        RAISE EXCEPTION 'push raced a queue deletion' USING ERRCODE = '40001';
    END IF;

    IF v_capped THEN
        SELECT x.name INTO v_full
        FROM queen.queues x
        WHERE x.name = ANY (v_queues) AND x.max_size > 0
          AND queen.queue_depth(x.id) > x.max_size
        LIMIT 1;
        IF v_full IS NOT NULL THEN
            RAISE EXCEPTION 'queue % is full', v_full USING ERRCODE = 'QN429';
        END IF;
    END IF;

    RETURN v_res;
END
$fn$;

CREATE OR REPLACE FUNCTION queen.push(p_items json, p_now timestamptz)
RETURNS json LANGUAGE sql AS $$
    SELECT queen._push(p_items, p_now)
$$;

-- ---------------------------------------------------------------------------
-- dead letters, leases, subscriptions

-- _dead_letter copies the message at p_off into the DLQ. Returns false when
-- the message no longer exists (removed by retention).
CREATE OR REPLACE FUNCTION queen._dead_letter(p_pid uuid, p_group text, p_off bigint,
                                               p_error text, p_attempts int, p_now timestamptz)
RETURNS boolean LANGUAGE plpgsql SET plan_cache_mode = force_generic_plan AS $fn$
BEGIN
    INSERT INTO queen.dlq (queue_name, partition_name, partition_id, msg_offset, message_id,
                           transaction_id, payload, trace_id, consumer_group, error, attempts,
                           created_at, failed_at, key_id)
    SELECT x.name, p.name, p.id, p_off, queen.message_id(p.id, p_off),
           s.txids[p_off - s.base_offset + 1], s.payloads[p_off - s.base_offset + 1],
           s.trace_ids[p_off - s.base_offset + 1], p_group, p_error, p_attempts,
           s.created_at, p_now, s.key_id  -- a sealed payload stays sealed
    FROM queen.segments s
    JOIN queen.partitions p ON p.id = s.partition_id
    JOIN queen.queues x ON x.id = p.queue_id
    WHERE s.partition_id = p_pid
      AND s.base_offset = (SELECT max(base_offset) FROM queen.segments
                           WHERE partition_id = p_pid AND base_offset <= p_off)
      AND p_off < s.base_offset + cardinality(s.txids);
    RETURN FOUND;
END
$fn$;

-- _wake forgets when a waiting partition was last found deliverable at the
-- earliest (ready.not_before): called when a retryDelay hold ends before
-- its time (the cursor moved on, a seek), since not_before must never be
-- later than the partition's real deliverability.
CREATE OR REPLACE FUNCTION queen._wake(p_pid uuid, p_group text)
RETURNS void LANGUAGE sql AS $$
    UPDATE queen.ready SET not_before = NULL  -- by ready_partition
    WHERE partition_id = p_pid AND group_name = p_group AND not_before IS NOT NULL
$$;

-- _expire ends an expired lease of a consumer row the caller has locked:
-- one failed attempt of the head message, exactly once per lease. When the
-- head's attempts exceed the queue's retryLimit it is dead-lettered;
-- otherwise the head is delivered alone next time. Returns 'expired' or
-- 'dead-lettered'.
CREATE OR REPLACE FUNCTION queen._expire(p_pid uuid, p_group text, p_now timestamptz)
RETURNS text LANGUAGE plpgsql SET plan_cache_mode = force_generic_plan AS $fn$
DECLARE
    cr      queen.consumers;
    v_limit int;
    v_delay int;
    v_att   int;
BEGIN
    SELECT * INTO cr FROM queen.consumers WHERE partition_id = p_pid AND group_name = p_group;
    IF cr.lease_id IS NULL THEN
        RETURN 'none';
    END IF;
    IF NOT EXISTS (SELECT 1 FROM queen.segments s
                   WHERE s.partition_id = p_pid AND s.base_offset <= cr.committed + 1
                     AND s.base_offset + cardinality(s.txids) > cr.committed + 1) THEN
        -- The head was removed by retention: nothing to charge; the cursor
        -- moves to just before the oldest surviving message.
        UPDATE queen.consumers
        SET committed = greatest(committed, coalesce(
                (SELECT min(s.base_offset) - 1 FROM queen.segments s
                 WHERE s.partition_id = p_pid AND s.base_offset > cr.committed),
                (SELECT p.last_offset FROM queen.partitions p WHERE p.id = p_pid))),
            attempts = 0, head_only = false, batch_end = NULL, lease_id = NULL,
            lease_expires_at = NULL, worker_id = NULL, retry_at = NULL, updated_at = p_now
        WHERE partition_id = p_pid AND group_name = p_group;
        UPDATE queen.consumers SET delivered = greatest(delivered, committed)
        WHERE partition_id = p_pid AND group_name = p_group;
        IF cr.retry_at IS NOT NULL THEN
            PERFORM queen._wake(p_pid, p_group);
        END IF;
        RETURN 'expired';
    END IF;
    SELECT retry_limit, retry_delay_ms INTO v_limit, v_delay FROM queen.queues WHERE id = cr.queue_id;
    v_att := cr.attempts + 1;
    IF v_att > v_limit THEN
        PERFORM queen._dead_letter(p_pid, p_group, cr.committed + 1,
                                   format('lease expired (attempt %s of %s)', v_att, v_limit + 1),
                                   v_att, p_now);
        UPDATE queen.consumers
        SET committed = cr.committed + 1, delivered = greatest(delivered, cr.committed + 1),
            attempts = 0, head_only = false, batch_end = NULL, lease_id = NULL,
            lease_expires_at = NULL, worker_id = NULL, retry_at = NULL, updated_at = p_now
        WHERE partition_id = p_pid AND group_name = p_group;
        IF cr.retry_at IS NOT NULL THEN
            PERFORM queen._wake(p_pid, p_group);
        END IF;
        RETURN 'dead-lettered';
    END IF;
    UPDATE queen.consumers
    SET attempts = v_att, head_only = true, batch_end = NULL, lease_id = NULL,
        lease_expires_at = NULL, worker_id = NULL, updated_at = p_now,
        -- the failed attempt ended when the lease did
        retry_at = cr.lease_expires_at + make_interval(secs => v_delay / 1000.0)
    WHERE partition_id = p_pid AND group_name = p_group;
    RETURN 'expired';
END
$fn$;

-- _subscribe returns the (queue, group) subscription, creating it on first
-- use. A new subscription gets ready rows for every partition holding
-- messages it should read.
CREATE OR REPLACE FUNCTION queen._subscribe(p_queue text, p_group text, p_mode text,
                                             p_from timestamptz, p_now timestamptz)
RETURNS queen.subscriptions LANGUAGE plpgsql SET plan_cache_mode = force_generic_plan AS $fn$
DECLARE
    s queen.subscriptions;
BEGIN
    SELECT * INTO s FROM queen.subscriptions WHERE queue_name = p_queue AND group_name = p_group;
    IF FOUND THEN
        RETURN s;
    END IF;
    PERFORM pg_advisory_xact_lock(queen.queue_lock_key(p_queue));
    INSERT INTO queen.subscriptions (queue_name, group_name, mode, from_ts, created_at)
    VALUES (p_queue, p_group, coalesce(p_mode, 'all'),
            CASE WHEN coalesce(p_mode, 'all') = 'all' THEN NULL ELSE coalesce(p_from, p_now) END,
            p_now)
    ON CONFLICT DO NOTHING;
    SELECT * INTO s FROM queen.subscriptions WHERE queue_name = p_queue AND group_name = p_group;
    INSERT INTO queen.ready (queue_id, group_name, partition_id, order_key)
    SELECT p.queue_id, p_group, p.id, nextval('queen.ready_order')
    FROM queen.partitions p JOIN queen.queues x ON x.id = p.queue_id
    WHERE x.name = p_queue AND p.last_offset >= 0
      AND (s.from_ts IS NULL OR p.last_pushed_at >= s.from_ts)
    ORDER BY p.id
    ON CONFLICT DO NOTHING;
    RETURN s;
END
$fn$;

-- _ensure_consumer creates the (partition, group) cursor if missing.
CREATE OR REPLACE FUNCTION queen._ensure_consumer(p_pid uuid, p_queue_id bigint, p_group text,
                                                   p_from timestamptz, p_now timestamptz)
RETURNS void LANGUAGE plpgsql SET plan_cache_mode = force_generic_plan AS $fn$
DECLARE
    v_start bigint;
BEGIN
    IF EXISTS (SELECT 1 FROM queen.consumers WHERE partition_id = p_pid AND group_name = p_group) THEN
        RETURN;
    END IF;
    v_start := queen._start_offset(p_pid, p_from);
    INSERT INTO queen.consumers (partition_id, group_name, queue_id, committed, delivered, updated_at)
    VALUES (p_pid, p_group, p_queue_id, v_start, v_start, p_now)
    ON CONFLICT DO NOTHING;
END
$fn$;

-- _unschedule removes a partition from a group's ready set once the
-- group's cursor has reached its last offset, so consumed partitions never
-- use up a wildcard pop's scan. It never waits: when a push holds the
-- partition (it will add messages, and its ready row must survive) the row
-- stays; otherwise the share lock makes later pushes wait until this
-- transaction has committed, so they re-insert the row.
CREATE OR REPLACE FUNCTION queen._unschedule(p_pid uuid, p_group text)
RETURNS void LANGUAGE plpgsql SET plan_cache_mode = force_generic_plan AS $fn$
DECLARE
    v_last bigint;
BEGIN
    SELECT last_offset INTO v_last FROM queen.partitions WHERE id = p_pid FOR SHARE SKIP LOCKED;
    IF FOUND AND v_last <= (SELECT c.committed FROM queen.consumers c
                            WHERE c.partition_id = p_pid AND c.group_name = p_group) THEN
        DELETE FROM queen.ready WHERE partition_id = p_pid AND group_name = p_group;  -- by ready_partition
    END IF;
END
$fn$;

-- ---------------------------------------------------------------------------
-- pop

-- _claim tries to lease up to p_budget messages of one partition.
-- status: 'claimed', 'consumed' (nothing left), 'busy' (leased or locked),
-- 'waiting' (delayedProcessing / windowBuffer / retryDelay; not_before says
-- when the partition can be deliverable at the earliest).
-- p_keys: the references of the keys the caller holds; a sealed message
-- under any other key aborts the pop before anything is leased.
DROP FUNCTION IF EXISTS queen._claim(queen.queues, queen.subscriptions, uuid, text, text, int, uuid, boolean,
                                     text, timestamptz);
CREATE OR REPLACE FUNCTION queen._claim(q queen.queues, s queen.subscriptions, p_pid uuid,
                                         p_pname text, p_group text, p_budget int, p_lease uuid,
                                         p_auto boolean, p_worker text, p_keys text[], p_now timestamptz)
RETURNS queen.claim LANGUAGE plpgsql SET plan_cache_mode = force_generic_plan AS $fn$
DECLARE
    cr     queen.consumers;
    r      queen.claim;
    v_last bigint;
    v_pushed timestamptz;
    v_seg  bigint;
    v_from bigint;
    v_lim  int;
    v_end  bigint;
    v_key  text;
BEGIN
    r.n := 0;
    SELECT * INTO cr FROM queen.consumers
    WHERE partition_id = p_pid AND group_name = p_group
    FOR UPDATE SKIP LOCKED;
    IF NOT FOUND THEN
        -- Locked by another transaction, or the group's first visit here.
        IF EXISTS (SELECT 1 FROM queen.consumers WHERE partition_id = p_pid AND group_name = p_group) THEN
            r.status := 'busy';
            RETURN r;
        END IF;
        PERFORM queen._ensure_consumer(p_pid, q.id, p_group, s.from_ts, p_now);
        SELECT * INTO cr FROM queen.consumers
        WHERE partition_id = p_pid AND group_name = p_group
        FOR UPDATE SKIP LOCKED;
        IF NOT FOUND THEN
            r.status := 'busy';
            RETURN r;
        END IF;
    END IF;
    IF cr.lease_id IS NOT NULL THEN
        IF cr.lease_expires_at > p_now THEN
            r.status := 'busy';
            RETURN r;
        END IF;
        PERFORM queen._expire(p_pid, p_group, p_now);
        SELECT * INTO cr FROM queen.consumers WHERE partition_id = p_pid AND group_name = p_group;
    END IF;

    SELECT last_offset, last_pushed_at INTO v_last, v_pushed FROM queen.partitions WHERE id = p_pid;
    IF cr.committed >= v_last THEN
        r.status := 'consumed';
        RETURN r;
    END IF;
    IF cr.retry_at > p_now THEN  -- retryDelay after a failed attempt
        r.status := 'waiting';
        r.not_before := cr.retry_at;
        RETURN r;
    END IF;
    IF q.window_buffer > 0 AND v_pushed > p_now - make_interval(secs => q.window_buffer) THEN
        r.status := 'waiting';
        r.not_before := v_pushed + make_interval(secs => q.window_buffer);
        RETURN r;
    END IF;

    v_from := cr.committed + 1;
    SELECT max(base_offset) INTO v_seg FROM queen.segments
    WHERE partition_id = p_pid AND base_offset <= v_from;
    IF v_seg IS NULL THEN
        -- The head was removed by retention: continue at the oldest survivor.
        SELECT min(base_offset) INTO v_seg FROM queen.segments
        WHERE partition_id = p_pid AND base_offset > cr.committed;
        IF v_seg IS NULL THEN
            UPDATE queen.consumers
            SET committed = v_last, delivered = greatest(delivered, v_last), attempts = 0,
                head_only = false, updated_at = p_now
            WHERE partition_id = p_pid AND group_name = p_group;
            r.status := 'consumed';
            RETURN r;
        END IF;
        -- Messages up to the oldest survivor are gone: the cursor moves to
        -- just before it, so attempts count against a message that exists.
        UPDATE queen.consumers
        SET committed = v_seg - 1, delivered = greatest(delivered, v_seg - 1), attempts = 0,
            head_only = false, updated_at = p_now
        WHERE partition_id = p_pid AND group_name = p_group;
        cr.committed := v_seg - 1;
        cr.attempts := 0;
        cr.head_only := false;  -- the head that came alone is gone
        v_from := v_seg;
    END IF;
    v_lim := CASE WHEN cr.head_only THEN 1 ELSE p_budget END;

    SELECT array_agg(json_build_object(
               'id', queen.message_id(p_pid, m.off),
               'transactionId', m.txid,
               'partitionId', p_pid,
               'partition', p_pname,
               'queue', q.name,
               'offset', m.off,
               'data', queen.payload_json(m.payload, m.key_id),
               'keyId', m.key_id,
               'traceId', m.trace_id,
               'producerSub', m.producer_sub,
               'createdAt', m.created_at,
               'retryCount', CASE WHEN m.off = cr.committed + 1 THEN cr.attempts ELSE 0 END)
             ORDER BY m.off),
           count(*), max(m.off), min(m.key_id) FILTER (WHERE NOT (m.key_id = ANY (coalesce(p_keys, '{}'))))
    INTO r.msgs, r.n, v_end, v_key
    FROM (
        SELECT sg.base_offset + u.ord - 1 AS off, u.txid, sg.payloads[u.ord] AS payload,
               sg.trace_ids[u.ord] AS trace_id, sg.created_at, sg.producer_sub, sg.key_id
        FROM queen.segments sg
        CROSS JOIN LATERAL unnest(sg.txids) WITH ORDINALITY AS u(txid, ord)
        WHERE sg.partition_id = p_pid
          AND sg.base_offset >= v_seg AND sg.base_offset < v_from + v_lim
          AND sg.base_offset + u.ord - 1 >= v_from
          AND sg.base_offset + u.ord - 1 < v_from + v_lim
          AND (q.delayed_processing = 0
               OR sg.created_at <= p_now - make_interval(secs => q.delayed_processing))
    ) m;

    IF r.n = 0 THEN
        -- Only delayedProcessing leaves a stored head undeliverable; the
        -- segment holding it is the oldest that can become deliverable.
        r.status := 'waiting';
        SELECT created_at + make_interval(secs => q.delayed_processing) INTO r.not_before
        FROM queen.segments WHERE partition_id = p_pid AND base_offset = v_seg;
        RETURN r;
    END IF;
    IF v_key IS NOT NULL THEN
        -- Nothing is leased or committed: the caller fetches the key and
        -- pops again, or reports that it lacks it (the detail names it).
        RAISE EXCEPTION 'queue %, partition %: messages are sealed with key %, which this server does not hold',
            q.name, p_pname, v_key USING ERRCODE = 'QNKEY', DETAIL = v_key;
    END IF;

    IF p_auto THEN
        UPDATE queen.consumers
        SET committed = v_end, delivered = greatest(delivered, v_end), attempts = 0,
            head_only = false, retry_at = NULL, updated_at = p_now
        WHERE partition_id = p_pid AND group_name = p_group;
    ELSE
        UPDATE queen.consumers
        SET batch_end = v_end, delivered = greatest(delivered, v_end), lease_id = p_lease,
            lease_expires_at = p_now + make_interval(secs => q.lease_time),
            worker_id = p_worker, updated_at = p_now
        WHERE partition_id = p_pid AND group_name = p_group;
    END IF;
    r.status := 'claimed';
    RETURN r;
END
$fn$;

-- pop leases up to batch messages from one partition (or up to `partitions`
-- partitions under one lease id, sharing the batch budget).
-- p_req: {queue, partition?, group?, batch, partitions, autoAck, mode, from, worker, keys}
CREATE OR REPLACE FUNCTION queen.pop(p_req json, p_now timestamptz)
RETURNS json LANGUAGE plpgsql SET plan_cache_mode = force_generic_plan AS $fn$
DECLARE
    v_now     timestamptz := coalesce(p_now, clock_timestamp());
    v_queue   text := p_req->>'queue';
    v_part    text := p_req->>'partition';
    v_group   text := coalesce(p_req->>'group', '__QUEUE_MODE__');
    v_batch   int := coalesce((p_req->>'batch')::int, 1);
    v_maxp    int := coalesce((p_req->>'partitions')::int, 1);
    v_auto    boolean := coalesce((p_req->>'autoAck')::boolean, false);
    v_worker  text := p_req->>'worker';
    v_keys    text[] := ARRAY(SELECT json_array_elements_text(p_req->'keys'));
    v_lease   uuid := gen_random_uuid();
    q         queen.queues;
    s         queen.subscriptions;
    r         queen.claim;
    v_pid     uuid;
    v_pname   text;
    v_seen    uuid[] := '{}';
    v_msgs    json[] := '{}';
    v_got     int := 0;
    v_parts   int := 0;
    v_scanned int := 0;
BEGIN
    IF EXISTS (SELECT 1 FROM queen.maintenance WHERE mode = 'pop' AND enabled) THEN
        RETURN json_build_object('messages', '[]'::json);  -- pop maintenance: nothing is delivered
    END IF;
    s := queen._subscribe(v_queue, v_group, p_req->>'mode', (p_req->>'from')::timestamptz, v_now);
    SELECT * INTO q FROM queen.queues WHERE name = v_queue;
    IF NOT FOUND THEN
        RETURN json_build_object('messages', '[]'::json);
    END IF;

    IF v_part IS NOT NULL THEN
        SELECT id INTO v_pid FROM queen.partitions WHERE queue_id = q.id AND name = v_part;
        IF FOUND THEN
            r := queen._claim(q, s, v_pid, v_part, v_group, v_batch, v_lease, v_auto, v_worker, v_keys, v_now);
            IF r.status = 'claimed' THEN
                v_msgs := r.msgs;
                v_got := r.n;
                IF v_auto THEN
                    PERFORM queen._unschedule(v_pid, v_group);
                END IF;
            END IF;
        END IF;
    ELSE
        LOOP
            -- Consumed partitions leave the ready set when they are acked,
            -- so the scan meets only partitions with something to deliver;
            -- it looks at a few more than it may lease.
            EXIT WHEN v_parts >= v_maxp OR v_got >= v_batch OR v_scanned >= 64 + v_maxp;
            -- Partitions leased by another consumer of the group, and those
            -- a pop found waiting (delayedProcessing, windowBuffer,
            -- retryDelay) until they can be deliverable, are passed over
            -- here, so they never use up the scan budget.
            SELECT rd.partition_id, p.name INTO v_pid, v_pname
            FROM queen.ready rd JOIN queen.partitions p ON p.id = rd.partition_id
            WHERE rd.queue_id = q.id AND rd.group_name = v_group
              AND rd.partition_id <> ALL (v_seen)
              AND (rd.not_before IS NULL OR rd.not_before <= v_now)
              -- a scalar subquery, so the generic plan looks the cursor
              -- up by key whatever the table's size when it was planned
              AND NOT coalesce((SELECT c.lease_id IS NOT NULL AND c.lease_expires_at > v_now
                                FROM queen.consumers c
                                WHERE c.partition_id = rd.partition_id AND c.group_name = v_group), false)
            ORDER BY rd.order_key
            LIMIT 1
            FOR UPDATE OF rd SKIP LOCKED;
            EXIT WHEN NOT FOUND;
            v_seen := v_seen || v_pid;
            r := queen._claim(q, s, v_pid, v_pname, v_group, v_batch - v_got, v_lease, v_auto,
                              v_worker, v_keys, v_now);
            IF r.status <> 'waiting' THEN
                v_scanned := v_scanned + 1;  -- a waiting row is passed over from now on
            END IF;
            IF r.status = 'consumed' THEN
                PERFORM queen._unschedule(v_pid, v_group);
            ELSIF r.status IN ('claimed', 'waiting') THEN
                UPDATE queen.ready SET order_key = nextval('queen.ready_order'), not_before = r.not_before
                WHERE partition_id = v_pid AND group_name = v_group;  -- by ready_partition
                IF r.status = 'claimed' AND v_auto THEN
                    PERFORM queen._unschedule(v_pid, v_group);
                END IF;
            END IF;
            IF r.status = 'claimed' THEN
                v_msgs := v_msgs || r.msgs;
                v_got := v_got + r.n;
                v_parts := v_parts + 1;
            END IF;
        END LOOP;
    END IF;

    RETURN json_build_object(
        'leaseId', CASE WHEN v_got > 0 AND NOT v_auto THEN v_lease END,
        'leaseExpiresAt', CASE WHEN v_got > 0 AND NOT v_auto
                               THEN v_now + make_interval(secs => q.lease_time) END,
        'messages', coalesce(array_to_json(v_msgs), '[]'::json));
END
$fn$;

-- ---------------------------------------------------------------------------
-- ack

-- _locate_beyond resolves a transactionId that the group's delivered window
-- (p_committed, p_delivered] does not hold: the lowest stored offset above
-- p_delivered holding it (an ack of an undelivered message, which is
-- rejected), or NULL when no stored message after the cursor holds it —
-- then the message is at or below the cursor and the ack is an
-- "already committed" no-op, however old it is. The cost is bounded by the
-- partition's unconsumed span, never by its history: a live dedup key
-- (which names the newest message with that id) answers at once; without
-- one only the undelivered tail is read.
CREATE OR REPLACE FUNCTION queen._locate_beyond(p_pid uuid, p_txid text, p_committed bigint,
                                                 p_delivered bigint)
RETURNS bigint LANGUAGE plpgsql STABLE SET plan_cache_mode = force_generic_plan AS $fn$
DECLARE
    v_key bigint;
    v_off bigint;
BEGIN
    SELECT msg_offset INTO v_key FROM queen.dedup WHERE transaction_id = p_txid AND partition_id = p_pid;
    IF FOUND THEN
        IF v_key <= p_delivered THEN
            RETURN NULL;  -- committed, or removed by retention
        END IF;
        IF EXISTS (SELECT 1 FROM queen.segments s
                   WHERE s.partition_id = p_pid AND s.base_offset <= v_key
                     AND s.base_offset + cardinality(s.txids) > v_key) THEN
            RETURN v_key;
        END IF;
        RETURN NULL;
    END IF;
    SELECT s.base_offset + u.ord - 1 INTO v_off
    FROM queen.segments s CROSS JOIN LATERAL unnest(s.txids) WITH ORDINALITY AS u(txid, ord)
    WHERE s.partition_id = p_pid
      AND s.base_offset >= coalesce((SELECT max(s2.base_offset) FROM queen.segments s2
                                     WHERE s2.partition_id = p_pid AND s2.base_offset <= p_delivered + 1), 0)
      AND u.txid = p_txid AND s.base_offset + u.ord - 1 > p_delivered
    ORDER BY 1 LIMIT 1;
    RETURN v_off;
END
$fn$;

-- _ack applies acknowledgements [{partitionId, transactionId, status,
-- group, leaseId, error}] (status normalized to completed | failed | retry |
-- dlq by the caller) in one transaction. Returns {ok, results}. When any
-- item is invalid nothing is written and ok is false. p_strict (the acks of
-- a transaction) also rejects an ack at or below the cursor: applying a
-- transaction twice must fail, not repeat its pushes.
--
-- The rule (SPEC §3.5), per (partition, group) with cursor C. Each offset
-- above C the call mentions carries its strongest status (dlq > failed >
-- retry > completed) and is one of:
--   a resolution   completed; dlq; failed whose attempt exceeds retryLimit
--                  (dead-lettered);
--   a stop signal  retry; failed with attempts left; or a retry/failed
--                  beyond the batch_end of a live lease — another
--                  consumer's: it is declined (not applied), but it still
--                  stops the call.
-- With the highest resolved offset and the lowest stop signal:
--   committed = max(C, min(highest_resolved, lowest_stop - 1))
-- Dead-letter signals at or below the new cursor are applied, those above
-- are not. Example: span (2,5], [3 completed, 4 failed, 5 completed] →
-- committed = min(5, 4 - 1) = 3; offset 4 comes back with one more attempt,
-- then 5. Offsets the call does not mention count as covered.
DROP FUNCTION IF EXISTS queen._ack(json, timestamptz);
CREATE OR REPLACE FUNCTION queen._ack(p_items json, p_now timestamptz, p_strict boolean)
RETURNS json LANGUAGE plpgsql SET plan_cache_mode = force_generic_plan AS $fn$
DECLARE
    v_now              timestamptz := coalesce(p_now, clock_timestamp());
    v_items            queen.ack_item[];
    v_units            queen.ack_unit[] := '{}';
    u                  record;
    sig                record;
    cr                 queen.consumers;
    v_retry_limit      int;
    v_retry_delay      int;
    v_live_lease       boolean;
    v_head_attempts    int;   -- attempts so far of the signal's message
    v_highest_resolved bigint;
    v_lowest_stop      bigint;
    v_stop_applied     boolean;
    v_stop_attempts    int;   -- the stop's attempts when it is a failed
    v_dead_offs        bigint[];
    v_dead_errors      text[];
    v_dead_attempts    int[];
    v_applied_dead     bigint[];
    v_committed        bigint;
    v_attempts         int;
    v_released         boolean;
    v_bad              boolean;
BEGIN
    -- Lock the cursors in one fixed order.
    FOR u IN
        SELECT DISTINCT (i->>'partitionId')::uuid AS pid, i->>'group' AS grp
        FROM json_array_elements(p_items) i ORDER BY 1, 2
    LOOP
        PERFORM 1 FROM queen.consumers WHERE partition_id = u.pid AND group_name = u.grp FOR NO KEY UPDATE;
    END LOOP;

    SELECT array_agg(ROW(it.idx, it.pid, it.grp, it.txid, it.status, it.lease, it.err, it.off,
                         CASE
                           WHEN it.part_missing THEN 'partition not found'
                           WHEN it.committed IS NULL THEN
                             format('message not delivered to consumer group %s', it.grp)
                           WHEN it.off IS NULL THEN  -- at or below the cursor: a no-op
                             CASE WHEN p_strict THEN 'already committed or unknown: a transaction acks each message once' END
                           WHEN it.off > it.delivered THEN
                             format('message not delivered to consumer group %s', it.grp)
                           WHEN it.lease IS NOT NULL AND (it.cur_lease IS DISTINCT FROM it.lease
                                                          OR it.expires <= v_now)
                             THEN 'invalid or expired lease'
                         END,
                         CASE WHEN it.part_missing THEN 'not_found' ELSE 'conflict' END)::queen.ack_item
                     ORDER BY it.idx)
    INTO v_items
    FROM (
        -- Resolve transactionIds to offsets above the cursor: first among
        -- what was delivered to the group (one scan of each cursor's
        -- window), then in the undelivered tail.
        WITH itm AS (
            SELECT t.ord - 1 AS idx, (t.i->>'partitionId')::uuid AS pid, t.i->>'group' AS grp,
                   t.i->>'transactionId' AS txid, t.i->>'status' AS status,
                   (t.i->>'leaseId')::uuid AS lease, t.i->>'error' AS err,
                   NOT EXISTS (SELECT 1 FROM queen.partitions p
                               WHERE p.id = (t.i->>'partitionId')::uuid) AS part_missing,
                   c.committed, c.delivered, c.cur_lease, c.expires
            FROM json_array_elements(p_items) WITH ORDINALITY AS t(i, ord)
            -- The group's cursor; a subscribed group that has not read the
            -- partition yet is at its subscription start.
            LEFT JOIN LATERAL (
                SELECT cc.committed, cc.delivered, cc.lease_id AS cur_lease, cc.lease_expires_at AS expires
                FROM queen.consumers cc
                WHERE cc.partition_id = (t.i->>'partitionId')::uuid AND cc.group_name = t.i->>'group'
                UNION ALL
                SELECT st.start, st.start, NULL, NULL
                FROM (SELECT queen._start_offset(p.id, sb.from_ts) AS start
                      FROM queen.partitions p
                      JOIN queen.queues x ON x.id = p.queue_id
                      JOIN queen.subscriptions sb ON sb.queue_name = x.name AND sb.group_name = t.i->>'group'
                      WHERE p.id = (t.i->>'partitionId')::uuid) st
                WHERE NOT EXISTS (SELECT 1 FROM queen.consumers cc
                                  WHERE cc.partition_id = (t.i->>'partitionId')::uuid
                                    AND cc.group_name = t.i->>'group')) c ON true
        ),
        units AS (
            SELECT DISTINCT pid, grp, committed, delivered FROM itm
            WHERE committed IS NOT NULL AND delivered > committed
        ),
        win AS (
            SELECT wu.pid, wu.grp, sg.base_offset + x.ord - 1 AS off, x.txid
            FROM units wu
            CROSS JOIN LATERAL (
                SELECT s.base_offset, s.txids FROM queen.segments s
                WHERE s.partition_id = wu.pid
                  AND s.base_offset >= coalesce((SELECT max(s2.base_offset) FROM queen.segments s2
                                                 WHERE s2.partition_id = wu.pid
                                                   AND s2.base_offset <= wu.committed + 1), 0)
                  AND s.base_offset <= wu.delivered) sg
            CROSS JOIN LATERAL unnest(sg.txids) WITH ORDINALITY AS x(txid, ord)
            WHERE sg.base_offset + x.ord - 1 > wu.committed AND sg.base_offset + x.ord - 1 <= wu.delivered
        ),
        hit AS (
            SELECT DISTINCT ON (itm.idx) itm.idx, w.off
            FROM itm JOIN win w ON w.pid = itm.pid AND w.grp = itm.grp AND w.txid = itm.txid
            ORDER BY itm.idx, w.off
        )
        SELECT itm.*,
               CASE WHEN hit.off IS NOT NULL THEN hit.off
                    WHEN itm.committed IS NOT NULL THEN
                        queen._locate_beyond(itm.pid, itm.txid, itm.committed, itm.delivered) END AS off
        FROM itm LEFT JOIN hit ON hit.idx = itm.idx
    ) it;

    SELECT bool_or(x.problem IS NOT NULL) INTO v_bad FROM unnest(v_items) x;
    IF v_bad THEN
        RETURN json_build_object('ok', false, 'results', (
            SELECT json_agg(json_build_object(
                       'index', x.idx, 'transactionId', x.txid, 'partitionId', x.pid,
                       'success', false,
                       'error', coalesce(x.problem, 'not applied: another item of this call was rejected'),
                       'code', CASE WHEN x.problem IS NULL THEN 'skipped' ELSE x.code END)
                   ORDER BY x.idx)
            FROM unnest(v_items) x));
    END IF;

    FOR u IN SELECT DISTINCT x.pid, x.grp FROM unnest(v_items) x ORDER BY 1, 2 LOOP
        SELECT * INTO cr FROM queen.consumers WHERE partition_id = u.pid AND group_name = u.grp;
        IF NOT FOUND THEN
            -- A subscribed group that has not read this partition: every
            -- item is at or below its start, a no-op.
            SELECT queen.group_position(p.id, NULL, sb.from_ts) INTO v_committed
            FROM queen.partitions p
            JOIN queen.queues x ON x.id = p.queue_id
            JOIN queen.subscriptions sb ON sb.queue_name = x.name AND sb.group_name = u.grp
            WHERE p.id = u.pid;
            v_units := v_units || ROW(u.pid, u.grp, v_committed, v_committed, false, NULL, '{}')::queen.ack_unit;
            CONTINUE;
        END IF;
        SELECT retry_limit, retry_delay_ms INTO v_retry_limit, v_retry_delay FROM queen.queues WHERE id = cr.queue_id;
        v_live_lease := cr.lease_id IS NOT NULL AND cr.lease_expires_at > v_now;
        v_highest_resolved := NULL;
        v_lowest_stop := NULL;
        v_stop_applied := false;
        v_stop_attempts := NULL;
        v_dead_offs := '{}';
        v_dead_errors := '{}';
        v_dead_attempts := '{}';
        v_applied_dead := '{}';

        -- Each mentioned offset above the cursor, with its strongest status;
        -- a dead letter keeps the first dlq item's error, else the first
        -- failed item's.
        FOR sig IN
            SELECT x.off,
                   (array_agg(x.status ORDER BY CASE x.status WHEN 'dlq' THEN 4 WHEN 'failed' THEN 3
                                                             WHEN 'retry' THEN 2 ELSE 1 END DESC))[1] AS status,
                   bool_or(x.status = 'failed') AS any_failed,
                   (array_agg(x.err ORDER BY (x.status = 'dlq') DESC, x.idx)
                        FILTER (WHERE x.status IN ('dlq', 'failed') AND x.err IS NOT NULL))[1] AS err
            FROM unnest(v_items) x
            WHERE x.pid = u.pid AND x.grp = u.grp AND x.off IS NOT NULL
            GROUP BY x.off ORDER BY x.off
        LOOP
            v_head_attempts := CASE WHEN sig.off = cr.committed + 1 THEN cr.attempts ELSE 0 END;
            IF sig.status = 'completed' THEN
                v_highest_resolved := sig.off;
            ELSIF sig.status = 'dlq' THEN
                v_highest_resolved := sig.off;
                v_dead_offs := array_append(v_dead_offs, sig.off);
                v_dead_errors := array_append(v_dead_errors, sig.err);
                v_dead_attempts := array_append(v_dead_attempts,
                                                v_head_attempts + CASE WHEN sig.any_failed THEN 1 ELSE 0 END);
            ELSIF v_live_lease AND sig.off > cr.batch_end THEN
                -- A retry or failed from a consumer whose lease is gone: it
                -- must not end another consumer's lease, nor be turned into
                -- a commit. Declined, it still stops the call.
                IF v_lowest_stop IS NULL THEN
                    v_lowest_stop := sig.off;
                END IF;
            ELSIF sig.status = 'failed' AND v_head_attempts + 1 > v_retry_limit THEN
                v_highest_resolved := sig.off;
                v_dead_offs := array_append(v_dead_offs, sig.off);
                v_dead_errors := array_append(v_dead_errors, sig.err);
                v_dead_attempts := array_append(v_dead_attempts, v_head_attempts + 1);
            ELSIF v_lowest_stop IS NULL THEN
                v_lowest_stop := sig.off;
                v_stop_applied := true;
                v_stop_attempts := CASE WHEN sig.status = 'failed' THEN v_head_attempts + 1 END;
            END IF;
        END LOOP;

        -- committed = max(C, min(highest_resolved, lowest_stop - 1))
        v_committed := coalesce(v_highest_resolved, cr.committed);
        IF v_lowest_stop IS NOT NULL THEN
            v_committed := least(v_committed, v_lowest_stop - 1);
        END IF;
        v_committed := greatest(v_committed, cr.committed);

        -- Dead letters at or below the new cursor are applied.
        FOR i IN 1 .. coalesce(array_length(v_dead_offs, 1), 0) LOOP
            IF v_dead_offs[i] <= v_committed THEN
                PERFORM queen._dead_letter(u.pid, u.grp, v_dead_offs[i], v_dead_errors[i],
                                           v_dead_attempts[i], v_now);
                v_applied_dead := array_append(v_applied_dead, v_dead_offs[i]);
            END IF;
        END LOOP;

        -- The new head's attempts: a failed stop right above the cursor
        -- consumed one; a moved cursor starts a fresh head.
        v_attempts := CASE
            WHEN v_stop_applied AND v_lowest_stop = v_committed + 1 AND v_stop_attempts IS NOT NULL
                THEN v_stop_attempts
            WHEN v_committed > cr.committed THEN 0
            ELSE cr.attempts END;
        -- The lease ends when the cursor reaches batch_end or an applied
        -- stop signal ends the batch; a partial ack keeps it.
        v_released := cr.lease_id IS NOT NULL AND (v_stop_applied OR v_committed >= cr.batch_end);

        UPDATE queen.consumers
        SET committed = v_committed,
            delivered = greatest(delivered, v_committed),
            attempts = v_attempts,
            head_only = CASE WHEN v_committed > cr.committed THEN false ELSE head_only END,
            batch_end = CASE WHEN v_released THEN NULL ELSE batch_end END,
            lease_id = CASE WHEN v_released THEN NULL ELSE lease_id END,
            lease_expires_at = CASE WHEN v_released THEN NULL ELSE lease_expires_at END,
            worker_id = CASE WHEN v_released THEN NULL ELSE worker_id END,
            -- retryDelay: an applied stop signal holds the partition back
            retry_at = CASE WHEN v_stop_applied THEN v_now + make_interval(secs => v_retry_delay / 1000.0)
                            WHEN v_committed > cr.committed THEN NULL
                            ELSE retry_at END,
            updated_at = v_now
        WHERE partition_id = u.pid AND group_name = u.grp;
        IF cr.retry_at IS NOT NULL AND (v_stop_applied OR v_committed > cr.committed) THEN
            -- the hold ended with the cursor's move, or a new one replaced
            -- it (possibly shorter, after retryDelay was lowered)
            PERFORM queen._wake(u.pid, u.grp);
        END IF;
        IF v_committed >= (SELECT p.last_offset FROM queen.partitions p WHERE p.id = u.pid) THEN
            PERFORM queen._unschedule(u.pid, u.grp);
        END IF;
        -- Reported as listings show it: never before the oldest stored message.
        v_units := v_units || ROW(u.pid, u.grp, cr.committed,
                                  queen.group_position(u.pid, v_committed, NULL), v_released,
                                  CASE WHEN v_stop_applied THEN v_lowest_stop END,
                                  v_applied_dead)::queen.ack_unit;
    END LOOP;

    RETURN json_build_object('ok', true, 'results', (
        SELECT json_agg(json_build_object(
                   'index', x.idx, 'transactionId', x.txid, 'partitionId', x.pid,
                   'offset', x.off, 'consumerGroup', x.grp,
                   'queue', xq.name, 'partition', p.name,
                   'success', true,
                   'result', CASE
                       WHEN x.off IS NULL THEN 'already committed'
                       WHEN x.off = ANY (un2.dlq_offs) THEN 'dead-lettered'
                       WHEN x.off <= un2.new THEN 'committed'
                       WHEN x.off = un2.stop_off THEN 'redelivered'
                       ELSE 'not applied' END,
                   'dlq', coalesce(x.off = ANY (un2.dlq_offs) AND x.status IN ('dlq', 'failed'), false),
                   'committed', un2.new,
                   'leaseReleased', un2.released)
               ORDER BY x.idx)
        FROM unnest(v_items) x
        JOIN unnest(v_units) un2 ON un2.pid = x.pid AND un2.grp = x.grp
        JOIN queen.partitions p ON p.id = x.pid
        JOIN queen.queues xq ON xq.id = p.queue_id));
END
$fn$;

CREATE OR REPLACE FUNCTION queen.ack(p_items json, p_now timestamptz)
RETURNS json LANGUAGE sql AS $$
    SELECT queen._ack(p_items, p_now, false)
$$;

-- transact applies acks and pushes atomically. Required leases must be
-- live, and are checked, like the acks, under the cursor locks that apply
-- them: of several concurrent or repeated identical transactions exactly
-- one applies; the others find the lease gone or the acks applied and are
-- refused, pushing nothing.
CREATE OR REPLACE FUNCTION queen.transact(p_acks json, p_items json, p_leases uuid[],
                                           p_now timestamptz)
RETURNS json LANGUAGE plpgsql SET plan_cache_mode = force_generic_plan AS $fn$
DECLARE
    v_now   timestamptz := coalesce(p_now, clock_timestamp());
    v_lease uuid;
    v_ack   json;
    v_push  json;
BEGIN
    -- Every cursor the transaction acks or whose lease it requires, locked
    -- in one fixed order before anything is checked.
    PERFORM 1 FROM queen.consumers c
    WHERE (c.partition_id, c.group_name) IN (SELECT (i->>'partitionId')::uuid, i->>'group'
                                             FROM json_array_elements(p_acks) i)
       OR c.lease_id = ANY (p_leases)
    ORDER BY c.partition_id, c.group_name
    FOR NO KEY UPDATE;
    SELECT l INTO v_lease FROM unnest(p_leases) l
    WHERE NOT EXISTS (SELECT 1 FROM queen.consumers c
                      WHERE c.lease_id = l AND c.lease_expires_at > v_now)
    LIMIT 1;
    IF v_lease IS NOT NULL THEN
        RETURN json_build_object('ok', false, 'code', 'conflict',
                                 'error', format('invalid or expired lease %s', v_lease));
    END IF;
    IF json_array_length(p_acks) > 0 THEN
        v_ack := queen._ack(p_acks, v_now, true);
        IF NOT (v_ack->>'ok')::boolean THEN
            RETURN json_build_object('ok', false, 'ack', v_ack->'results');
        END IF;
    END IF;
    IF json_array_length(p_items) > 0 THEN
        v_push := queen._push(p_items, p_now);
    END IF;
    RETURN json_build_object('ok', true, 'ack', coalesce(v_ack->'results', '[]'::json),
                             'push', coalesce(v_push, '[]'::json));
END
$fn$;

-- extend_lease pushes out the expiry of every partition lease held under
-- p_lease to p_seconds from now (0: the queue's leaseTime). Returns
-- {status: 'ok'|'expired'|'unknown', expiresAt}.
CREATE OR REPLACE FUNCTION queen.extend_lease(p_lease uuid, p_seconds int, p_now timestamptz)
RETURNS json LANGUAGE plpgsql SET plan_cache_mode = force_generic_plan AS $fn$
DECLARE
    v_now timestamptz := coalesce(p_now, clock_timestamp());
    v_exp timestamptz;
BEGIN
    WITH u AS (
        UPDATE queen.consumers c
        SET lease_expires_at = greatest(c.lease_expires_at,
                                        v_now + make_interval(secs => coalesce(nullif(p_seconds, 0), q.lease_time))),
            updated_at = v_now
        FROM queen.queues q
        WHERE c.lease_id = p_lease AND c.lease_expires_at > v_now AND q.id = c.queue_id
        RETURNING c.lease_expires_at
    )
    SELECT max(lease_expires_at) INTO v_exp FROM u;
    IF v_exp IS NOT NULL THEN
        RETURN json_build_object('status', 'ok', 'expiresAt', v_exp);
    END IF;
    IF EXISTS (SELECT 1 FROM queen.consumers WHERE lease_id = p_lease) THEN
        RETURN json_build_object('status', 'expired');
    END IF;
    RETURN json_build_object('status', 'unknown');
END
$fn$;

-- ---------------------------------------------------------------------------
-- seek, configure, DLQ retry

-- seek moves a group's cursors on a queue. p_target: {toEnd} | {toBeginning}
-- | {timestamp} | {offsets: {partition: nextOffset}}. Clears leases and
-- attempt counts. Returns {status, partitions: [{partition, committed}]}.
CREATE OR REPLACE FUNCTION queen.seek(p_group text, p_queue text, p_target json, p_now timestamptz)
RETURNS json LANGUAGE plpgsql SET plan_cache_mode = force_generic_plan AS $fn$
DECLARE
    v_now timestamptz := coalesce(p_now, clock_timestamp());
    q     queen.queues;
    s     queen.subscriptions;
    v_ts  timestamptz := (p_target->>'timestamp')::timestamptz;
    v_bad text;
    v_res json;
BEGIN
    SELECT * INTO q FROM queen.queues WHERE name = p_queue;
    IF NOT FOUND THEN
        RETURN json_build_object('status', 'queue_not_found');
    END IF;
    IF p_target->'offsets' IS NOT NULL THEN
        SELECT k INTO v_bad FROM json_object_keys(p_target->'offsets') k
        WHERE NOT EXISTS (SELECT 1 FROM queen.partitions p WHERE p.queue_id = q.id AND p.name = k)
        LIMIT 1;
        IF v_bad IS NOT NULL THEN
            RETURN json_build_object('status', 'partition_not_found', 'partition', v_bad);
        END IF;
    END IF;
    s := queen._subscribe(p_queue, p_group, 'all', NULL, v_now);

    INSERT INTO queen.consumers (partition_id, group_name, queue_id, committed, delivered, updated_at)
    SELECT p.id, p_group, q.id, queen._start_offset(p.id, s.from_ts),
           queen._start_offset(p.id, s.from_ts), v_now
    FROM queen.partitions p
    WHERE p.queue_id = q.id
      AND NOT EXISTS (SELECT 1 FROM queen.consumers c WHERE c.partition_id = p.id AND c.group_name = p_group)
    ORDER BY p.id
    ON CONFLICT DO NOTHING;

    PERFORM 1 FROM queen.consumers c
    WHERE c.queue_id = q.id AND c.group_name = p_group
    ORDER BY c.partition_id
    FOR UPDATE;
    -- retryDelay holds end with the seek, and a seek back may make an
    -- older, deliverable head the next one
    UPDATE queen.ready SET not_before = NULL
    WHERE queue_id = q.id AND group_name = p_group AND not_before IS NOT NULL;

    WITH target AS (
        SELECT p.id AS pid, p.name, p.last_offset,
               CASE
                 WHEN (p_target->>'toEnd')::boolean THEN p.last_offset
                 WHEN (p_target->>'toBeginning')::boolean THEN -1
                 WHEN v_ts IS NOT NULL THEN queen._start_offset(p.id, v_ts)
                 WHEN p_target->'offsets'->>p.name IS NULL THEN NULL
                 ELSE least(greatest((p_target->'offsets'->>p.name)::bigint - 1, -1), p.last_offset)
               END AS committed
        FROM queen.partitions p
        WHERE p.queue_id = q.id
    ),
    upd AS (
        UPDATE queen.consumers c
        SET committed = t.committed, delivered = t.committed, attempts = 0, head_only = false, retry_at = NULL,
            batch_end = NULL, lease_id = NULL, lease_expires_at = NULL, worker_id = NULL,
            updated_at = v_now
        FROM target t
        WHERE c.partition_id = t.pid AND c.group_name = p_group AND t.committed IS NOT NULL
        RETURNING t.pid, t.name, t.committed, t.last_offset
    ),
    rdy AS (
        INSERT INTO queen.ready (queue_id, group_name, partition_id, order_key)
        SELECT q.id, p_group, upd.pid, nextval('queen.ready_order')
        FROM upd WHERE upd.committed < upd.last_offset
        ORDER BY upd.pid
        ON CONFLICT DO NOTHING
    )
    SELECT json_agg(json_build_object('partition', upd.name, 'committed', upd.committed,
                                      'lastOffset', upd.last_offset) ORDER BY upd.name)
    INTO v_res FROM upd;
    RETURN json_build_object('status', 'ok', 'partitions', coalesce(v_res, '[]'::json));
END
$fn$;

-- configure creates the queue if needed and applies the options present in
-- p_opts (a partial update). Returns the queue row.
CREATE OR REPLACE FUNCTION queen.configure(p_queue text, p_namespace text, p_task text,
                                            p_opts json, p_now timestamptz)
RETURNS json LANGUAGE plpgsql SET plan_cache_mode = force_generic_plan AS $fn$
DECLARE
    v_now timestamptz := coalesce(p_now, clock_timestamp());
    q     queen.queues;
BEGIN
    IF p_opts->'encryptionEnabled' IS NOT NULL THEN
        -- Exclusive against pushes (they hold it shared while they check
        -- whether the queue takes sealed payloads only), so no push that
        -- checked before this commits plain payloads after it.
        PERFORM pg_advisory_xact_lock(queen.queue_lock_key(p_queue));
    END IF;
    INSERT INTO queen.queues (name, created_at, updated_at)
    VALUES (p_queue, v_now, v_now)
    ON CONFLICT (name) DO NOTHING;
    UPDATE queen.queues SET
        namespace = coalesce(p_namespace, namespace),
        task = coalesce(p_task, task),
        lease_time = coalesce((p_opts->>'leaseTime')::int, lease_time),
        retry_limit = coalesce((p_opts->>'retryLimit')::int, retry_limit),
        retry_delay_ms = coalesce((p_opts->>'retryDelay')::int, retry_delay_ms),
        dedup_window = coalesce((p_opts->>'dedupWindowSeconds')::int, dedup_window),
        delayed_processing = coalesce((p_opts->>'delayedProcessing')::int, delayed_processing),
        window_buffer = coalesce((p_opts->>'windowBuffer')::int, window_buffer),
        max_size = coalesce((p_opts->>'maxSize')::bigint, max_size),
        retention_seconds = coalesce((p_opts->>'retentionSeconds')::int, retention_seconds),
        completed_retention_seconds = coalesce((p_opts->>'completedRetentionSeconds')::int,
                                               completed_retention_seconds),
        encryption_enabled = coalesce((p_opts->>'encryptionEnabled')::boolean, encryption_enabled),
        priority = coalesce((p_opts->>'priority')::int, priority),
        updated_at = v_now
    WHERE name = p_queue
    RETURNING * INTO q;
    IF p_opts->'delayedProcessing' IS NOT NULL OR p_opts->'windowBuffer' IS NOT NULL
       OR p_opts->'retryDelay' IS NOT NULL THEN
        -- when a waiting partition can be deliverable depends on them
        UPDATE queen.ready SET not_before = NULL WHERE queue_id = q.id AND not_before IS NOT NULL;
    END IF;
    RETURN row_to_json(q);
END
$fn$;

-- dlq_retry re-pushes the stored snapshot of a dead letter to its queue and
-- partition under p_new_txid, then drops the DLQ rows of that address
-- (only p_group's when given). Returns the push result, or null when there
-- is no such dead letter.
CREATE OR REPLACE FUNCTION queen.dlq_retry(p_pid uuid, p_txid text, p_group text,
                                            p_new_txid text, p_now timestamptz)
RETURNS json LANGUAGE plpgsql SET plan_cache_mode = force_generic_plan AS $fn$
DECLARE
    d     queen.dlq;
    v_res json;
BEGIN
    -- Delete first: a concurrent retry of the same address waits for this
    -- one's row locks, then finds nothing and answers not found, so the
    -- message is re-pushed exactly once.
    WITH gone AS (
        DELETE FROM queen.dlq
        WHERE partition_id = p_pid AND transaction_id = p_txid
          AND (p_group IS NULL OR consumer_group = p_group)
        RETURNING *
    )
    SELECT * INTO d FROM gone ORDER BY id DESC LIMIT 1;
    IF NOT FOUND THEN
        RETURN NULL;
    END IF;
    -- The snapshot goes back as it was stored: a sealed one stays sealed
    -- (it is bound to this queue and partition), a plain one stays plain.
    v_res := queen._push(json_build_array(json_build_object(
                 'queue', d.queue_name, 'partition', d.partition_name,
                 'payload', queen.payload_json(d.payload, d.key_id), 'keyId', d.key_id, 'snapshot', true,
                 'transactionId', p_new_txid, 'traceId', d.trace_id)),
             p_now);
    RETURN v_res->0;
END
$fn$;

-- ---------------------------------------------------------------------------
-- reaper

-- reap does one bounded maintenance pass: expire leases (counting the
-- attempt), prune dedup keys past their window, apply retentionSeconds and
-- completedRetentionSeconds. At most p_limit rows of each kind. Safe to run
-- concurrently with itself and with traffic.
CREATE OR REPLACE FUNCTION queen.reap(p_now timestamptz, p_limit int)
RETURNS json LANGUAGE plpgsql SET plan_cache_mode = force_generic_plan AS $fn$
DECLARE
    v_now      timestamptz := coalesce(p_now, clock_timestamp());
    lk         record;
    v_expired  int := 0;
    v_dead     int := 0;
    v_dedup    int := 0;
    v_retained int := 0;
    v_complete int := 0;
BEGIN
    FOR lk IN
        SELECT partition_id, group_name FROM queen.consumers
        WHERE lease_id IS NOT NULL AND lease_expires_at <= v_now
        ORDER BY lease_expires_at
        LIMIT p_limit
        FOR UPDATE SKIP LOCKED
    LOOP
        CASE queen._expire(lk.partition_id, lk.group_name, v_now)
            WHEN 'expired' THEN v_expired := v_expired + 1;
            WHEN 'dead-lettered' THEN v_expired := v_expired + 1; v_dead := v_dead + 1;
            ELSE NULL;
        END CASE;
    END LOOP;

    -- The constant bound (the shortest window) lets the BRIN index on
    -- created_at skip the young part of the table.
    DELETE FROM queen.dedup WHERE ctid = ANY (ARRAY(
        SELECT d.ctid FROM queen.dedup d
        JOIN queen.partitions p ON p.id = d.partition_id
        JOIN queen.queues x ON x.id = p.queue_id
        WHERE d.created_at <= v_now - make_interval(secs => x.dedup_window)
          AND d.created_at <= v_now - make_interval(secs => (SELECT coalesce(min(dedup_window) FILTER (WHERE dedup_window > 0), 0)
                                                              FROM queen.queues))
        LIMIT p_limit));
    GET DIAGNOSTICS v_dedup = ROW_COUNT;

    DELETE FROM queen.segments WHERE ctid = ANY (ARRAY(
        SELECT sg.ctid
        FROM queen.queues x
        JOIN queen.partitions p ON p.queue_id = x.id
        CROSS JOIN LATERAL (
            SELECT s.ctid FROM queen.segments s
            WHERE s.partition_id = p.id
              AND s.created_at < v_now - make_interval(secs => x.retention_seconds)
            ORDER BY s.base_offset LIMIT p_limit) sg
        WHERE x.retention_seconds > 0
        LIMIT p_limit));
    GET DIAGNOSTICS v_retained = ROW_COUNT;

    DELETE FROM queen.segments WHERE ctid = ANY (ARRAY(
        SELECT sg.ctid
        FROM queen.queues x
        JOIN queen.partitions p ON p.queue_id = x.id
        -- The slowest subscribed group: its cursor, or its subscription
        -- start while it has no cursor here (a group subscribed after a
        -- segment never holds it back).
        CROSS JOIN LATERAL (
            SELECT min(queen.group_position(p.id, c.committed, sb.from_ts)) AS low
            FROM queen.subscriptions sb
            LEFT JOIN queen.consumers c ON c.partition_id = p.id AND c.group_name = sb.group_name
            WHERE sb.queue_name = x.name) cm
        CROSS JOIN LATERAL (
            SELECT s.ctid FROM queen.segments s
            WHERE s.partition_id = p.id
              AND s.created_at < v_now - make_interval(secs => x.completed_retention_seconds)
              AND s.base_offset + cardinality(s.txids) - 1 <= cm.low
            ORDER BY s.base_offset LIMIT p_limit) sg
        WHERE x.completed_retention_seconds > 0
          AND cm.low IS NOT NULL
        LIMIT p_limit));
    GET DIAGNOSTICS v_complete = ROW_COUNT;

    RETURN json_build_object('leasesExpired', v_expired, 'deadLettered', v_dead,
                             'dedupPruned', v_dedup, 'segmentsRetained', v_retained,
                             'segmentsCompleted', v_complete);
END
$fn$;

-- delete_queue drops a queue with its log, cursors and subscriptions.
-- Dead letters are kept: they survive the log. Returns false when there
-- was nothing to delete.
CREATE OR REPLACE FUNCTION queen.delete_queue(p_queue text)
RETURNS boolean LANGUAGE plpgsql SET plan_cache_mode = force_generic_plan AS $fn$
DECLARE
    v_id   bigint;
    v_subs int;
BEGIN
    -- Exclusive against pushes to this queue (they hold it shared).
    PERFORM pg_advisory_xact_lock(queen.queue_lock_key(p_queue));
    DELETE FROM queen.subscriptions WHERE queue_name = p_queue;
    GET DIAGNOSTICS v_subs = ROW_COUNT;
    SELECT id INTO v_id FROM queen.queues WHERE name = p_queue FOR UPDATE;
    IF v_id IS NULL THEN
        RETURN v_subs > 0;
    END IF;
    DELETE FROM queen.segments WHERE partition_id IN (SELECT id FROM queen.partitions WHERE queue_id = v_id);
    DELETE FROM queen.dedup WHERE partition_id IN (SELECT id FROM queen.partitions WHERE queue_id = v_id);
    DELETE FROM queen.ready WHERE queue_id = v_id;
    DELETE FROM queen.queues WHERE id = v_id;  -- cascades to partitions and consumers
    RETURN true;
END
$fn$;

-- ---------------------------------------------------------------------------
-- maintenance

-- maintenance_state returns {push, pop}: which maintenance modes are on.
CREATE OR REPLACE FUNCTION queen.maintenance_state()
RETURNS json LANGUAGE sql STABLE AS $$
    SELECT json_build_object(
        'push', coalesce((SELECT enabled FROM queen.maintenance WHERE mode = 'push'), false),
        'pop', coalesce((SELECT enabled FROM queen.maintenance WHERE mode = 'pop'), false))
$$;

-- set_maintenance switches one maintenance mode ('push' or 'pop') and
-- returns both.
CREATE OR REPLACE FUNCTION queen.set_maintenance(p_mode text, p_enabled boolean, p_now timestamptz)
RETURNS json LANGUAGE sql AS $$
    INSERT INTO queen.maintenance (mode, enabled, updated_at) VALUES (p_mode, p_enabled, p_now)
    ON CONFLICT (mode) DO UPDATE SET enabled = excluded.enabled, updated_at = excluded.updated_at;
    SELECT queen.maintenance_state();
$$;
