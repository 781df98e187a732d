-- ---------------------------------------------------------------------------
-- pop

-- _claim_lock locks the group's cursor of a partition without waiting,
-- creating it on the group's first visit, and settles an expired lease.
-- NULL (every field) when another transaction or a live lease holds it.
CREATE OR REPLACE FUNCTION queen._claim_lock(q queen.queues, s queen.subscriptions, p_pid uuid, p_group text,
                                              p_now timestamptz)
RETURNS queen.consumers LANGUAGE plpgsql SET plan_cache_mode = force_generic_plan SET jit = off AS $fn$
DECLARE
    cr queen.consumers;
BEGIN
    SELECT * INTO cr FROM queen.consumers
    WHERE partition_id = p_pid AND group_name = p_group
    FOR UPDATE SKIP LOCKED;
    IF NOT FOUND THEN
        -- Locked by another transaction, or the group's first visit here.
        IF EXISTS (SELECT 1 FROM queen.consumers WHERE partition_id = p_pid AND group_name = p_group) THEN
            RETURN NULL;
        END IF;
        -- The new row is this transaction's: locked until it commits.
        INSERT INTO queen.consumers (partition_id, group_name, queue_id, committed, delivered, updated_at)
        SELECT p_pid, p_group, q.id, v.start, v.start, p_now
        FROM (SELECT queen._start_offset(p_pid, s.from_ts) AS start) v
        ON CONFLICT DO NOTHING
        RETURNING * INTO cr;
        IF NOT FOUND THEN
            RETURN NULL;  -- another transaction created it meanwhile
        END IF;
    END IF;
    IF cr.lease_id IS NOT NULL THEN
        IF cr.lease_expires_at > p_now THEN
            RETURN NULL;
        END IF;
        PERFORM queen._expire(p_pid, p_group, p_now);
        SELECT * INTO cr FROM queen.consumers WHERE partition_id = p_pid AND group_name = p_group;
    END IF;
    RETURN cr;
END
$fn$;

-- _claim_survivor moves a locked cursor whose next message was removed by
-- retention to just before the oldest message that survives (to the
-- partition's end when none does), so attempts count against a message
-- that exists, and returns the moved cursor.
DROP FUNCTION IF EXISTS queen._claim_survivor(queen.consumers, bigint, timestamptz);
CREATE OR REPLACE FUNCTION queen._claim_survivor(cr queen.consumers, p_num bigint, p_last bigint, p_now timestamptz)
RETURNS queen.consumers LANGUAGE plpgsql SET plan_cache_mode = force_generic_plan SET jit = off AS $fn$
DECLARE
    v_to bigint;
BEGIN
    SELECT min(base_offset) - 1 INTO v_to FROM queen.segments
    WHERE partition_num = p_num AND base_offset > cr.committed;
    UPDATE queen.consumers
    SET committed = coalesce(v_to, p_last), delivered = greatest(delivered, coalesce(v_to, p_last)),
        attempts = 0, head_only = false, updated_at = p_now  -- the head that came alone is gone
    WHERE partition_id = cr.partition_id AND group_name = cr.group_name
    RETURNING * INTO cr;
    RETURN cr;
END
$fn$;

-- _claim_read reads up to p_lim deliverable messages of a partition from
-- offset p_from (the segment holding it starts at p_seg), in offset order;
-- p_num is the partition's number;
-- foreign_key is a key reference the caller does not hold, if any message
-- is sealed with one.
DROP FUNCTION IF EXISTS queen._claim_read(queen.queues, queen.consumers, text, bigint, bigint, int, text[],
                                          timestamptz);
CREATE OR REPLACE FUNCTION queen._claim_read(q queen.queues, cr queen.consumers, p_num bigint, p_pname text,
                                              p_seg bigint, p_from bigint, p_lim int, p_keys text[],
                                              p_now timestamptz,
                                              OUT items queen.popped[], OUT n int, OUT last bigint,
                                              OUT foreign_key text)
LANGUAGE plpgsql SET plan_cache_mode = force_generic_plan SET jit = off AS $fn$
BEGIN
    SELECT array_agg(ROW(m.off, m.txid, m.payload, m.trace_id, m.created_at, m.producer_sub, m.key_id,
                         CASE WHEN m.off = cr.committed + 1 THEN cr.attempts ELSE 0 END,
                         cr.partition_id, p_pname)::queen.popped
                     ORDER BY m.off),
           count(*), max(m.off), min(m.key_id) FILTER (WHERE NOT (m.key_id = ANY (coalesce(p_keys, '{}'))))
    INTO items, n, last, foreign_key
    FROM (
        SELECT sg.base_offset + u.ord - 1 AS off,
               queen.seg_txid(u.txid, sg.created_at, p_num, sg.base_offset + u.ord - 1, sg.id_seed) AS txid, u.payload,
               sg.trace_ids[u.ord] AS trace_id, sg.created_at, sg.producer_sub, sg.key_id
        FROM queen.segments sg
        CROSS JOIN LATERAL unnest(queen.seg_all(sg.txid, sg.txids), queen.seg_all(sg.payload, sg.payloads))
                           WITH ORDINALITY AS u(txid, payload, ord)
        WHERE sg.partition_num = p_num
          AND sg.base_offset >= p_seg AND sg.base_offset < p_from + p_lim
          AND sg.base_offset + u.ord - 1 >= p_from
          AND sg.base_offset + u.ord - 1 < p_from + p_lim
          AND (q.delayed_processing = 0
               OR sg.created_at <= p_now - make_interval(secs => q.delayed_processing))
    ) m;
END
$fn$;

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
RETURNS queen.claim LANGUAGE plpgsql SET plan_cache_mode = force_generic_plan SET jit = off AS $fn$
DECLARE
    cr     queen.consumers;
    r      queen.claim;
    rd     record;  -- _claim_read
    v_last bigint;
    v_pushed timestamptz;
    v_seg  bigint;
    v_num  bigint;
BEGIN
    r.n := 0;
    cr := queen._claim_lock(q, s, p_pid, p_group, p_now);
    IF cr.partition_id IS NULL THEN
        r.status := 'busy';
        RETURN r;
    END IF;
    SELECT num, last_offset, last_pushed_at INTO v_num, v_last, v_pushed FROM queen.partitions WHERE id = p_pid;
    IF cr.committed >= v_last THEN
        r.status := 'consumed';
        RETURN r;
    END IF;
    r.status := 'waiting';
    IF cr.retry_at > p_now THEN  -- retryDelay after a failed attempt
        r.not_before := cr.retry_at;
        RETURN r;
    END IF;
    IF q.window_buffer > 0 AND v_pushed > p_now - make_interval(secs => q.window_buffer) THEN
        r.not_before := v_pushed + make_interval(secs => q.window_buffer);
        RETURN r;
    END IF;

    SELECT max(base_offset) INTO v_seg FROM queen.segments
    WHERE partition_num = v_num AND base_offset <= cr.committed + 1;
    IF v_seg IS NULL THEN  -- the head was removed by retention
        cr := queen._claim_survivor(cr, v_num, v_last, p_now);
        IF cr.committed >= v_last THEN
            r.status := 'consumed';
            RETURN r;
        END IF;
        v_seg := cr.committed + 1;
    END IF;
    SELECT * INTO rd FROM queen._claim_read(q, cr, v_num, p_pname, v_seg, cr.committed + 1,
                                            CASE WHEN cr.head_only THEN 1 ELSE p_budget END, p_keys, p_now);
    IF rd.n = 0 THEN
        -- Only delayedProcessing leaves a stored head undeliverable; the
        -- segment holding it is the oldest that can become deliverable.
        SELECT created_at + make_interval(secs => q.delayed_processing) INTO r.not_before
        FROM queen.segments WHERE partition_num = v_num AND base_offset = v_seg;
        RETURN r;
    END IF;
    IF rd.foreign_key IS NOT NULL THEN
        -- Nothing is leased or committed: the caller fetches the key and
        -- pops again, or reports that it lacks it (the detail names it).
        RAISE EXCEPTION 'queue %, partition %: messages are sealed with key %, which this server does not hold',
            q.name, p_pname, rd.foreign_key USING ERRCODE = 'QNKEY', DETAIL = rd.foreign_key;
    END IF;
    PERFORM queen._claim_take(q, p_pid, p_group, rd.last, p_auto, p_lease, p_worker, p_now);
    r.status := 'claimed';
    r.items := rd.items;
    r.n := rd.n;
    RETURN r;
END
$fn$;

-- _claim_take commits (autoAck) or leases the claimed span up to p_end;
-- a lease gets its row in queen.leases (migration 0019).
CREATE OR REPLACE FUNCTION queen._claim_take(q queen.queues, p_pid uuid, p_group text, p_end bigint,
                                              p_auto boolean, p_lease uuid, p_worker text, p_now timestamptz)
RETURNS void LANGUAGE plpgsql SET plan_cache_mode = force_generic_plan SET jit = off AS $fn$
BEGIN
    IF p_auto THEN
        UPDATE queen.consumers
        SET committed = p_end, delivered = greatest(delivered, p_end), attempts = 0,
            head_only = false, retry_at = NULL, updated_at = p_now
        WHERE partition_id = p_pid AND group_name = p_group;
    ELSE
        UPDATE queen.consumers
        SET batch_end = p_end, delivered = greatest(delivered, p_end), lease_id = p_lease,
            lease_expires_at = p_now + make_interval(secs => q.lease_time),
            worker_id = p_worker, updated_at = p_now
        WHERE partition_id = p_pid AND group_name = p_group;
        INSERT INTO queen.leases (lease_id, partition_id, group_name, expires_at)
        VALUES (p_lease, p_pid, p_group, p_now + make_interval(secs => q.lease_time));
    END IF;
END
$fn$;

-- _ready_cursor_move records how far a wildcard pop of the group went round
-- its ready set (pop reads it back as where to start). Only a hint: when
-- another pop holds the row, that pop's position will do.
CREATE OR REPLACE FUNCTION queen._ready_cursor_move(p_queue bigint, p_group text, p_start bigint, p_pos bigint)
RETURNS void LANGUAGE plpgsql SET plan_cache_mode = force_generic_plan SET jit = off AS $fn$
BEGIN
    IF p_start IS NULL THEN
        INSERT INTO queen.ready_cursor (queue_id, group_name, pos) VALUES (p_queue, p_group, p_pos)
        ON CONFLICT DO NOTHING;
        RETURN;
    END IF;
    UPDATE queen.ready_cursor SET pos = p_pos
    WHERE ctid = (SELECT ctid FROM queen.ready_cursor WHERE queue_id = p_queue AND group_name = p_group
                  FOR NO KEY UPDATE SKIP LOCKED);
END
$fn$;

-- _pop_round is a wildcard pop's partition choice: it goes round the group's
-- ready set from where the group's last pop stopped (keys above v_start),
-- then from the start up to there, claiming partitions until the batch or
-- the partition budget is used. Consumed partitions leave the ready set
-- when they are acked, so the scan meets only partitions with something to
-- deliver; it looks at a few more than it may lease. Returns the claimed
-- messages (status is not set).
CREATE OR REPLACE FUNCTION queen._pop_round(q queen.queues, s queen.subscriptions, p_group text,
                                             p_batch int, p_maxp int, p_lease uuid, p_auto boolean,
                                             p_worker text, p_keys text[], p_now timestamptz)
RETURNS queen.claim LANGUAGE plpgsql SET plan_cache_mode = force_generic_plan SET jit = off AS $fn$
DECLARE
    res       queen.claim;
    r         queen.claim;
    v_pid     uuid;
    v_pname   text;
    v_start   bigint;
    v_key     bigint;
    v_last    bigint;
    v_pos     bigint;
    v_upto    bigint := 9223372036854775807;
    v_parts   int := 0;
    v_scanned int := 0;
BEGIN
    res.n := 0;
    res.items := '{}';
    SELECT pos INTO v_start FROM queen.ready_cursor WHERE queue_id = q.id AND group_name = p_group;
    v_pos := coalesce(v_start, 0);
    LOOP
        EXIT WHEN v_parts >= p_maxp OR res.n >= p_batch OR v_scanned >= 64 + p_maxp;
        -- Partitions leased by another consumer of the group, and those a
        -- pop found waiting (delayedProcessing, windowBuffer, retryDelay)
        -- until they can be deliverable, are passed over here, so they
        -- never use up the scan budget.
        SELECT rd.partition_id, p.name, rd.order_key INTO v_pid, v_pname, v_key
        FROM queen.ready rd JOIN queen.partitions p ON p.id = rd.partition_id
        WHERE rd.queue_id = q.id AND rd.group_name = p_group
          AND rd.order_key > v_pos AND rd.order_key <= v_upto
          AND (rd.not_before IS NULL OR rd.not_before <= p_now)
          -- a scalar subquery, so the generic plan looks the cursor up by
          -- key whatever the table's size when it was planned
          AND NOT coalesce((SELECT c.lease_id IS NOT NULL AND c.lease_expires_at > p_now
                            FROM queen.consumers c
                            WHERE c.partition_id = rd.partition_id AND c.group_name = p_group), false)
        ORDER BY rd.order_key
        LIMIT 1
        FOR UPDATE OF rd SKIP LOCKED;
        IF NOT FOUND THEN
            EXIT WHEN v_start IS NULL OR v_upto = v_start;
            v_pos := 0;  -- round the corner: from the start up to where this pop began
            v_upto := v_start;
            CONTINUE;
        END IF;
        v_pos := v_key;
        v_last := v_key;
        r := queen._claim(q, s, v_pid, v_pname, p_group, p_batch - res.n, p_lease, p_auto,
                          p_worker, p_keys, p_now);
        IF r.status <> 'waiting' THEN
            v_scanned := v_scanned + 1;  -- a waiting row is passed over from now on
        END IF;
        IF r.status = 'consumed' OR (r.status = 'claimed' AND p_auto) THEN
            PERFORM queen._unschedule(v_pid, p_group);
        ELSIF r.status = 'waiting' THEN
            UPDATE queen.ready SET not_before = r.not_before
            WHERE partition_id = v_pid AND group_name = p_group;  -- by ready_partition
        END IF;
        IF r.status = 'claimed' THEN
            res.items := res.items || r.items;
            res.n := res.n + r.n;
            v_parts := v_parts + 1;
        END IF;
    END LOOP;
    IF v_last IS NOT NULL THEN
        PERFORM queen._ready_cursor_move(q.id, p_group, v_start, v_last);
    END IF;
    RETURN res;
END
$fn$;

-- _pop leases up to batch messages from one partition (or up to `partitions`
-- partitions under one lease id, sharing the batch budget), and returns
-- them in delivery order, with the lease (NULL when nothing was leased, or
-- with autoAck) and its expiry.
-- p_req: {queue, partition?, group?, batch, partitions, autoAck, mode, from, worker, keys, target?}
-- With target ({url} or {function}) the pop is a subscription's delivery:
-- it leases nothing unless the (queue, group) subscription is enabled and
-- still delivers to that target, checked in the transaction that takes
-- the lease.
CREATE OR REPLACE FUNCTION queen._pop(p_req json, p_now timestamptz,
                                      OUT lease_id uuid, OUT lease_expires_at timestamptz,
                                      OUT items queen.popped[])
LANGUAGE plpgsql SET plan_cache_mode = force_generic_plan SET jit = off AS $fn$
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
    v_lease   uuid := queen.new_lease(v_now);
    q         queen.queues;
    s         queen.subscriptions;
    r         queen.claim;
    v_pid     uuid;
    v_got     int := 0;
BEGIN
    IF EXISTS (SELECT 1 FROM queen.maintenance WHERE mode = 'pop' AND enabled) THEN
        RETURN;  -- pop maintenance: nothing is delivered
    END IF;
    IF p_req->'target' IS NOT NULL AND NOT EXISTS (
        SELECT 1 FROM queen.subscription_targets t
        WHERE t.queue_name = v_queue AND t.group_name = v_group AND t.enabled
          AND t.target_url IS NOT DISTINCT FROM p_req->'target'->>'url'
          AND t.target_function IS NOT DISTINCT FROM p_req->'target'->>'function') THEN
        RETURN;  -- a subscription's delivery, and the subscription was deleted, paused or retargeted
    END IF;
    s := queen._subscribe(v_queue, v_group, p_req->>'mode', (p_req->>'from')::timestamptz, v_now);
    SELECT * INTO q FROM queen.queues WHERE name = v_queue;
    IF NOT FOUND THEN
        RETURN;
    END IF;

    IF v_part IS NOT NULL THEN
        SELECT id INTO v_pid FROM queen.partitions WHERE queue_id = q.id AND name = v_part;
        IF FOUND THEN
            r := queen._claim(q, s, v_pid, v_part, v_group, v_batch, v_lease, v_auto, v_worker, v_keys, v_now);
            IF r.status = 'claimed' THEN
                items := r.items;
                v_got := r.n;
                IF v_auto THEN
                    PERFORM queen._unschedule(v_pid, v_group);
                END IF;
            END IF;
        END IF;
    ELSE
        r := queen._pop_round(q, s, v_group, v_batch, v_maxp, v_lease, v_auto, v_worker, v_keys, v_now);
        items := r.items;
        v_got := r.n;
    END IF;
    IF v_got > 0 AND NOT v_auto THEN
        lease_id := v_lease;
        lease_expires_at := v_now + make_interval(secs => q.lease_time);
    END IF;
END
$fn$;

-- pop_v2 is a pop (see _pop) whose messages come back as arrays, one
-- element per message in delivery order: the Go core renders the reply
-- (message ids as queen.message_id derives them), so the database neither
-- parses the payloads nor renders JSON. A payload is its stored text:
-- compact JSON, or the base64 text of a sealed one (key_ids names its key).
CREATE OR REPLACE FUNCTION queen.pop_v2(p_req json, p_now timestamptz,
                                        OUT lease_id uuid, OUT lease_expires_at timestamptz,
                                        OUT pids uuid[], OUT pnames text[], OUT offs bigint[], OUT txids text[],
                                        OUT payloads text[], OUT key_ids text[], OUT trace_ids text[],
                                        OUT producer_subs text[], OUT created_ats timestamptz[], OUT retries int[])
LANGUAGE plpgsql SET plan_cache_mode = force_generic_plan SET jit = off AS $fn$
DECLARE
    p  record;
BEGIN
    p := queen._pop(p_req, p_now);
    lease_id := p.lease_id;
    lease_expires_at := p.lease_expires_at;
    -- One sort for the ten arrays (00_common.sql: ordered input), not
    -- one per array_agg(... ORDER BY).
    SELECT array_agg(m.pid), array_agg(m.pname), array_agg(m.off), array_agg(m.txid), array_agg(m.payload),
           array_agg(m.key_id), array_agg(m.trace_id), array_agg(m.producer_sub), array_agg(m.created_at),
           array_agg(m.retry)
    INTO pids, pnames, offs, txids, payloads, key_ids, trace_ids, producer_subs, created_ats, retries
    FROM (SELECT * FROM unnest(p.items) WITH ORDINALITY AS m(off, txid, payload, trace_id, created_at, producer_sub,
                                                             key_id, retry, pid, pname, o)
          ORDER BY m.o) m;
END
$fn$;
