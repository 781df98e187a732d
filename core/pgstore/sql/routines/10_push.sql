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

