-- ---------------------------------------------------------------------------
-- seek, configure, DLQ retry

-- seek_v2 moves a group's cursors on a queue. p_target: {toEnd} |
-- {toBeginning} | {timestamp} | {offsets: {partition: nextOffset}}. Clears
-- leases and attempt counts. Returns {partitions: [{partition, committed,
-- lastOffset}]}; raises QN404 when the queue, or a partition the offsets
-- name (the detail), does not exist.
CREATE OR REPLACE FUNCTION queen.seek_v2(p_group text, p_queue text, p_target json, p_now timestamptz)
RETURNS json LANGUAGE plpgsql SET plan_cache_mode = force_generic_plan SET jit = off AS $fn$
DECLARE
    v_now timestamptz := coalesce(p_now, clock_timestamp());
    q     queen.queues;
    s     queen.subscriptions;
    v_ts  timestamptz := (p_target->>'timestamp')::timestamptz;
    v_bad text;
    v_res json;
    v_pids uuid[];
BEGIN
    SELECT * INTO q FROM queen.queues WHERE name = p_queue;
    IF NOT FOUND THEN
        RAISE EXCEPTION 'queue % not found', p_queue USING ERRCODE = 'QN404';
    END IF;
    IF p_target->'offsets' IS NOT NULL THEN
        SELECT k INTO v_bad FROM json_object_keys(p_target->'offsets') k
        WHERE NOT EXISTS (SELECT 1 FROM queen.partitions p WHERE p.queue_id = q.id AND p.name = k)
        LIMIT 1;
        IF v_bad IS NOT NULL THEN
            RAISE EXCEPTION 'partition % not found in queue %', v_bad, p_queue USING ERRCODE = 'QN404', DETAIL = v_bad;
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
    )
    SELECT json_agg(json_build_object('partition', upd.name, 'committed', upd.committed,
                                      'lastOffset', upd.last_offset) ORDER BY upd.name),
           array_agg(upd.pid) FILTER (WHERE upd.committed < upd.last_offset)
    INTO v_res, v_pids FROM upd;
    PERFORM queen._schedule(q.id, p_group, v_pids);
    RETURN json_build_object('partitions', coalesce(v_res, '[]'::json));
END
$fn$;

-- _dedup_window_changed records that queue q's dedup window changed at
-- p_at from p_old seconds: the keys the reaper took out under the old window
-- stay out (those of its last run, if that ran while the old window was in
-- force), and pushes made while the window is 0 record no key (their
-- segments' first keys are ignored, see queen._dedup_off).
CREATE OR REPLACE FUNCTION queen._dedup_window_changed(q queen.queues, p_old int, p_at timestamptz)
RETURNS void LANGUAGE plpgsql SET plan_cache_mode = force_generic_plan SET jit = off AS $fn$
BEGIN
    INSERT INTO queen.dedup_floor (queue_id, floor, window_since)
    SELECT q.id,
           CASE WHEN r.last_reap >= coalesce((SELECT f.window_since FROM queen.dedup_floor f WHERE f.queue_id = q.id),
                                             q.created_at)
                THEN r.last_reap - make_interval(secs => p_old) ELSE '-infinity' END,
           p_at
    FROM (SELECT (SELECT x.last_reap FROM queen.reaper x) AS last_reap) r
    ON CONFLICT (queue_id) DO UPDATE SET floor = greatest(queen.dedup_floor.floor, EXCLUDED.floor),
                                         window_since = EXCLUDED.window_since;
    IF q.dedup_window = 0 THEN
        INSERT INTO queen.dedup_off (queue_id, since) VALUES (q.id, p_at);
    ELSIF p_old = 0 THEN
        UPDATE queen.dedup_off SET until = p_at WHERE queue_id = q.id AND until IS NULL;
    END IF;
END
$fn$;

-- configure creates the queue if needed and applies the options present in
-- p_opts (a partial update). Returns the queue row.
CREATE OR REPLACE FUNCTION queen.configure(p_queue text, p_namespace text, p_task text,
                                            p_opts json, p_now timestamptz)
RETURNS json LANGUAGE plpgsql SET plan_cache_mode = force_generic_plan SET jit = off AS $fn$
DECLARE
    v_now    timestamptz := coalesce(p_now, clock_timestamp());
    q        queen.queues;
    v_window int;
    v_at     timestamptz;
BEGIN
    IF p_opts->'encryptionEnabled' IS NOT NULL OR p_opts->'dedupWindowSeconds' IS NOT NULL THEN
        -- Exclusive against pushes (they hold it shared while they read the
        -- queue): no push that read the old encryption setting commits
        -- plain payloads after this, and every push is wholly before or
        -- after a change of the dedup window, whose time is taken below,
        -- once the pushes in flight have committed. Taken whenever either
        -- is given, changed or not, so that concurrent configures of one
        -- queue take turns rather than fail.
        PERFORM pg_advisory_xact_lock(queen.queue_lock_key(p_queue));
    END IF;
    v_at := coalesce(p_now, clock_timestamp());
    INSERT INTO queen.queues (name, created_at, updated_at)
    VALUES (p_queue, v_now, v_now)
    ON CONFLICT (name) DO NOTHING;
    SELECT x.dedup_window INTO v_window FROM queen.queues x WHERE x.name = p_queue FOR NO KEY UPDATE;
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
        ttl = coalesce((p_opts->>'ttl')::int, ttl),
        max_wait_time_seconds = coalesce((p_opts->>'maxWaitTimeSeconds')::int, max_wait_time_seconds),
        retention_enabled = coalesce((p_opts->>'retentionEnabled')::boolean, retention_enabled),
        completed_retention_seconds = coalesce((p_opts->>'completedRetentionSeconds')::int,
                                               completed_retention_seconds),
        dlq_retention_seconds = coalesce((p_opts->>'dlqRetentionSeconds')::int, dlq_retention_seconds),
        encryption_enabled = coalesce((p_opts->>'encryptionEnabled')::boolean, encryption_enabled),
        priority = coalesce((p_opts->>'priority')::int, priority),
        updated_at = v_now
    WHERE name = p_queue
    RETURNING * INTO q;
    IF q.dedup_window <> v_window THEN
        PERFORM queen._dedup_window_changed(q, v_window, v_at);
    END IF;
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
RETURNS json LANGUAGE plpgsql SET plan_cache_mode = force_generic_plan SET jit = off AS $fn$
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


-- delete_group removes a group from one queue or (p_queue null) every
-- queue it reads: its subscriptions, delivery targets, cursors and
-- scheduling rows, and its part of the summaries. Returns how many
-- subscriptions, targets and cursors it removed (0: nothing to delete).
CREATE OR REPLACE FUNCTION queen.delete_group(p_group text, p_queue text)
RETURNS bigint LANGUAGE plpgsql SET plan_cache_mode = force_generic_plan SET jit = off AS $fn$
DECLARE
    v_queues text[];
    v_n      bigint;
    v_more   bigint;
BEGIN
    WITH s AS (
        DELETE FROM queen.subscriptions
        WHERE group_name = p_group AND (p_queue IS NULL OR queue_name = p_queue)
        RETURNING queue_name
    )
    SELECT array_agg(queue_name), count(*) INTO v_queues, v_n FROM s;
    DELETE FROM queen.subscription_targets
    WHERE group_name = p_group AND (p_queue IS NULL OR queue_name = p_queue);
    GET DIAGNOSTICS v_more = ROW_COUNT;
    v_n := v_n + v_more;
    DELETE FROM queen.consumers c
    USING queen.queues x
    WHERE c.queue_id = x.id AND c.group_name = p_group AND (p_queue IS NULL OR x.name = p_queue);
    GET DIAGNOSTICS v_more = ROW_COUNT;
    v_n := v_n + v_more;
    DELETE FROM queen.ready r
    USING queen.queues x
    WHERE r.queue_id = x.id AND r.group_name = p_group AND (p_queue IS NULL OR x.name = p_queue);
    DELETE FROM queen.ready_cursor r
    USING queen.queues x
    WHERE r.queue_id = x.id AND r.group_name = p_group AND (p_queue IS NULL OR x.name = p_queue);
    IF cardinality(v_queues) > 0 THEN
        -- Last, after the cursors' locks: the fold never waits for those.
        PERFORM pg_advisory_xact_lock(queen.summary_lock_key());
        DELETE FROM queen.summary_parts sp
        USING queen.partitions p, queen.queues x
        WHERE sp.group_name = p_group AND sp.partition_num = p.num AND p.queue_id = x.id
          AND x.name = ANY (v_queues);
        DELETE FROM queen.summaries sm
        USING queen.queues x
        WHERE sm.group_name = p_group AND sm.queue_id = x.id AND x.name = ANY (v_queues);
        DELETE FROM queen.summary_marks m
        USING queen.queues x
        WHERE m.group_name = p_group AND m.queue_id = x.id AND x.name = ANY (v_queues);
        PERFORM queen._summary_groups_changed(q) FROM unnest(v_queues) q;
    END IF;
    RETURN v_n;
END
$fn$;
