-- ---------------------------------------------------------------------------
-- reaper

-- retention_keep is how long queue x keeps its segments, in seconds (0:
-- for ever): with p_completed its completedRetentionSeconds, else the
-- smallest of retentionSeconds, ttl and maxWaitTimeSeconds that is set;
-- none while retentionEnabled is false.
CREATE OR REPLACE FUNCTION queen.retention_keep(x queen.queues, p_completed boolean)
RETURNS int LANGUAGE sql IMMUTABLE AS $$
    SELECT CASE
        WHEN x.retention_enabled IS FALSE THEN 0
        WHEN p_completed THEN x.completed_retention_seconds
        ELSE coalesce(least(nullif(x.retention_seconds, 0), nullif(x.ttl, 0), nullif(x.max_wait_time_seconds, 0)), 0)
    END
$$;

-- _reap_segments deletes up to p_limit segments older than their queue's
-- retentionSeconds, or (p_completed) older than its
-- completedRetentionSeconds and consumed by every subscribed group: by
-- each group's cursor, or its subscription start while it has no cursor
-- there (a group subscribed after a segment never holds it back).
CREATE OR REPLACE FUNCTION queen._reap_segments(p_now timestamptz, p_limit int, p_completed boolean)
RETURNS int LANGUAGE plpgsql SET plan_cache_mode = force_generic_plan SET jit = off AS $fn$
DECLARE
    n int;
BEGIN
    WITH del AS (
        DELETE FROM queen.segments WHERE ctid = ANY (ARRAY(
            SELECT sg.ctid
            FROM queen.queues x
            JOIN queen.partitions p ON p.queue_id = x.id
            CROSS JOIN LATERAL (
                SELECT queen.retention_keep(x, p_completed) AS keep,
                       CASE WHEN p_completed THEN queen.slowest_position(p.id, x.name) END AS low) cm
            CROSS JOIN LATERAL (
                SELECT s.ctid FROM queen.segments s
                WHERE s.partition_num = p.num
                  AND s.created_at < p_now - make_interval(secs => cm.keep)
                  AND (NOT p_completed OR queen.seg_last(s.base_offset, s.txids, s.id_count) <= cm.low)
                ORDER BY s.base_offset LIMIT p_limit) sg
            WHERE cm.keep > 0 AND (NOT p_completed OR cm.low IS NOT NULL)
            LIMIT p_limit))
        RETURNING partition_num, base_offset, created_at, txid, txids, id_seed, id_count
    ),
    keep AS (
        -- A first message's key was its segment's (migration 0012), a
        -- self-located message's its offset (0015): one still inside its
        -- window moves to queen.dedup, as the others are.
        INSERT INTO queen.dedup (key, msg_offset, created_at)
        -- A derived id (migration 0017) is self-located.
        SELECT queen.dedup_key(p.id, queen.seg_txid(u.txid, d.created_at, d.partition_num, d.base_offset + u.i - 1,
                                                    d.id_seed)),
               d.base_offset + u.i - 1, d.created_at
        FROM del d
        JOIN queen.partitions p ON p.num = d.partition_num
        JOIN queen.queues x ON x.id = p.queue_id
        CROSS JOIN LATERAL ROWS FROM (unnest(queen.seg_all(d.txid, d.txids)),
                                      generate_series(1, queen.seg_count(d.txids, d.id_count))) AS u(txid, i)
        WHERE x.dedup_window > 0 AND d.created_at > p_now - make_interval(secs => x.dedup_window)
          AND NOT queen._dedup_off(x.id, d.created_at)
          AND (u.i = 1 OR d.id_seed IS NOT NULL
               OR queen.self_located(u.txid, false, d.partition_num, d.base_offset + u.i - 1))
    )
    SELECT count(*) INTO n FROM del;
    RETURN n;
END
$fn$;

-- reap does one bounded maintenance pass: expire leases (counting the
-- attempt), prune dedup keys past their window, apply retentionSeconds and
-- completedRetentionSeconds. At most p_limit rows of each kind. Safe to run
-- concurrently with itself and with traffic.
CREATE OR REPLACE FUNCTION queen.reap(p_now timestamptz, p_limit int)
RETURNS json LANGUAGE plpgsql SET plan_cache_mode = force_generic_plan SET jit = off AS $fn$
DECLARE
    v_now      timestamptz := coalesce(p_now, clock_timestamp());
    lk         record;
    v_expired  int := 0;
    v_dead     int := 0;
    v_dedup    int := 0;
    v_retained int := 0;
    v_complete int := 0;
    v_cutoff   timestamptz;
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

    -- A key row does not know its queue: rows go once past every queue's
    -- window (BRIN on created_at). Keys past their own queue's window are
    -- out of every probe already, and the time of this run keeps them out
    -- if the window grows (see configure and migration 0011).
    -- The cutoff is kept too: an ack looking up a transactionId knows that
    -- no key newer than it was removed (see _locate_beyond).
    v_cutoff := v_now - make_interval(secs => (SELECT coalesce(max(x.dedup_window), 0) FROM queen.queues x));
    INSERT INTO queen.reaper (one, last_reap, dedup_cutoff) VALUES (true, v_now, v_cutoff)
    ON CONFLICT (one) DO UPDATE SET last_reap = greatest(queen.reaper.last_reap, EXCLUDED.last_reap),
                                    dedup_cutoff = greatest(queen.reaper.dedup_cutoff, EXCLUDED.dedup_cutoff);
    DELETE FROM queen.dedup WHERE ctid = ANY (ARRAY(
        SELECT d.ctid FROM queen.dedup d
        WHERE d.created_at <= v_cutoff
        LIMIT p_limit));
    GET DIAGNOSTICS v_dedup = ROW_COUNT;

    v_retained := queen._reap_segments(v_now, p_limit, false);
    v_complete := queen._reap_segments(v_now, p_limit, true);

    RETURN json_build_object('leasesExpired', v_expired, 'deadLettered', v_dead,
                             'dedupPruned', v_dedup, 'segmentsRetained', v_retained,
                             'segmentsCompleted', v_complete);
END
$fn$;

-- delete_queue drops a queue with its log, cursors and subscriptions.
-- Dead letters are kept: they survive the log. Returns false when there
-- was nothing to delete.
CREATE OR REPLACE FUNCTION queen.delete_queue(p_queue text)
RETURNS boolean LANGUAGE plpgsql SET plan_cache_mode = force_generic_plan SET jit = off AS $fn$
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
    DELETE FROM queen.segments WHERE partition_num IN (SELECT num FROM queen.partitions WHERE queue_id = v_id);
    -- Its dedup keys stay until the reaper takes them: they name its
    -- partitions, which no queue will have again.
    DELETE FROM queen.ready WHERE queue_id = v_id;
    DELETE FROM queen.ready_cursor WHERE queue_id = v_id;
    DELETE FROM queen.queues WHERE id = v_id;  -- cascades to partitions and consumers
    RETURN true;
END
$fn$;

