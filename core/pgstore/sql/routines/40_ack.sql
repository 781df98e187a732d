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

