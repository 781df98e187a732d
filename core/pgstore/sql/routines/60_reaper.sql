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
    DELETE FROM queen.ready_cursor WHERE queue_id = v_id;
    DELETE FROM queen.queues WHERE id = v_id;  -- cascades to partitions and consumers
    RETURN true;
END
$fn$;

