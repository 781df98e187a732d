-- ---------------------------------------------------------------------------
-- ack

-- _locate_beyond resolves a transactionId that the group's delivered window
-- (p_committed, p_delivered] does not hold: the lowest stored offset above
-- p_delivered holding it (an ack of an undelivered message, which is
-- rejected), or NULL when no stored message after the cursor holds it —
-- then the message is at or below the cursor and the ack is an
-- "already committed" no-op, however old it is. The cost is bounded by the
-- partition's unconsumed span, never by its history: a dedup key (a row,
-- a segment's first message, or a self-located message's own offset,
-- migration 0015) answers at once when it points past the delivered window
-- (any offset there is rejected alike), or when it names the newest
-- message with that id: every message pushed since has a key or is that
-- self-located one,
-- because the queue's window has not been 0 since (queen.dedup_off), and
-- none of those keys was pruned, because the key is newer than the
-- reaper's cutoff (a segment's first key is never pruned, so without that
-- an old first key could hide a newer message whose key row is gone).
-- Otherwise only the undelivered tail is read.
DROP FUNCTION IF EXISTS queen._locate_beyond(uuid, text, bigint, bigint);
CREATE OR REPLACE FUNCTION queen._locate_beyond(p_pid uuid, p_num bigint, p_txid text, p_committed bigint,
                                                 p_delivered bigint)
RETURNS bigint LANGUAGE plpgsql STABLE SET plan_cache_mode = force_generic_plan SET jit = off AS $fn$
DECLARE
    v_key    bigint;
    v_at     timestamptz;
    v_seg    bigint;
    v_seg_at timestamptz;
    v_self   bigint;
    v_off    bigint;
BEGIN
    SELECT d.msg_offset, d.created_at INTO v_key, v_at FROM queen.dedup d
    WHERE d.key = queen.dedup_key(p_pid, p_txid) AND queen._dedup_same(p_num, d.msg_offset, p_txid)
    ORDER BY d.msg_offset DESC LIMIT 1;
    -- The newest segment that starts with the id: its key entries newest
    -- first, so an id stored many times costs one match, not its history.
    SELECT fk.base_offset, fk.created_at INTO v_seg, v_seg_at
    FROM queen._first_key_newest(p_num, p_txid) fk;
    IF v_seg > v_key OR v_key IS NULL THEN
        v_key := v_seg;
        v_at := v_seg_at;
    END IF;
    -- A self-located message (migration 0015) has no key: it is at the
    -- offset its id names, and no other self-located message has that id.
    v_self := queen.self_offset(p_txid, p_num);
    SELECT m.created_at INTO v_seg_at FROM queen._message_at(p_num, v_self) m WHERE m.txid = p_txid;
    IF FOUND AND (v_self > v_key OR v_key IS NULL) THEN
        v_key := v_self;
        v_at := v_seg_at;
    END IF;
    IF v_key > p_delivered AND queen._txid_at(p_num, v_key) IS NOT NULL THEN  -- still stored
        RETURN v_key;
    END IF;
    IF v_key <= p_delivered
       AND v_at > coalesce((SELECT r.dedup_cutoff FROM queen.reaper r), '-infinity')
       AND NOT EXISTS (SELECT 1 FROM queen.dedup_off o
                       WHERE o.queue_id = (SELECT p.queue_id FROM queen.partitions p WHERE p.id = p_pid)
                         AND (o.until IS NULL OR o.until > v_at)) THEN
        RETURN NULL;  -- the newest with that id: committed, or removed by retention
    END IF;
    SELECT s.base_offset + u.ord - 1 INTO v_off
    FROM queen.segments s
    CROSS JOIN LATERAL ROWS FROM (unnest(queen.seg_all(s.txid, s.txids)),
                                  generate_series(1, queen.seg_count(s.txids, s.id_count))) AS u(txid, ord)
    WHERE s.partition_num = p_num
      AND s.base_offset >= coalesce((SELECT max(s2.base_offset) FROM queen.segments s2
                                     WHERE s2.partition_num = p_num AND s2.base_offset <= p_delivered + 1), 0)
      AND queen.seg_txid(u.txid, s.created_at, p_num, s.base_offset + u.ord - 1, s.id_seed) = p_txid
      AND s.base_offset + u.ord - 1 > p_delivered
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
-- The rule (semantics.md §3.5.3), per (partition, group) with cursor C. Each offset
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
RETURNS json LANGUAGE plpgsql SET plan_cache_mode = force_generic_plan SET jit = off AS $fn$
DECLARE
    a record;  -- _ack_apply
BEGIN
    a := queen._ack_apply(p_items, p_now, p_strict);
    IF NOT a.ok THEN
        RETURN json_build_object('ok', false, 'results', (
            SELECT json_agg(json_build_object(
                       'index', x.idx, 'transactionId', x.txid, 'partitionId', x.pid,
                       'success', false,
                       'error', coalesce(x.problem, 'not applied: another item of this call was rejected'),
                       'code',
                       CASE WHEN x.problem IS NULL THEN 'skipped' ELSE x.code END)  -- closed set: ack codes
                   ORDER BY x.idx)
            FROM unnest(a.items) x));
    END IF;
    RETURN queen._ack_results(a.items, a.units);
END
$fn$;

-- _ack_args reads an ack call's items [{partitionId, group,
-- transactionId, status, leaseId, error}] once, into arrays in input
-- order (for _ack_apply).
CREATE OR REPLACE FUNCTION queen._ack_args(p_items json, OUT pids uuid[], OUT grps text[], OUT txids text[],
                                           OUT statuses text[], OUT leases uuid[], OUT errs text[])
LANGUAGE plpgsql SET plan_cache_mode = force_generic_plan SET jit = off AS $fn$
BEGIN
    SELECT array_agg(t.pid::uuid ORDER BY t.ord), array_agg(t.grp ORDER BY t.ord), array_agg(t.txid ORDER BY t.ord),
           array_agg(t.status ORDER BY t.ord), array_agg(t.lease::uuid ORDER BY t.ord), array_agg(t.err ORDER BY t.ord)
    INTO pids, grps, txids, statuses, leases, errs
    FROM ROWS FROM (json_to_recordset(p_items) AS ("partitionId" text, "group" text, "transactionId" text,
                                                   status text, "leaseId" text, error text))
         WITH ORDINALITY AS t(pid, grp, txid, status, lease, err, ord);
END
$fn$;

-- _ack_apply resolves the items (see _ack) and, when none is refused,
-- applies them: ok, the resolved items, and what each cursor became. The
-- items as JSON (_ack_args), or as arrays in input order (ack_v3).
CREATE OR REPLACE FUNCTION queen._ack_apply(p_items json, p_now timestamptz, p_strict boolean,
                                            OUT ok boolean, OUT items queen.ack_item[], OUT units queen.ack_unit[])
LANGUAGE plpgsql SET plan_cache_mode = force_generic_plan SET jit = off AS $fn$
DECLARE
    a record;  -- _ack_args
BEGIN
    a := queen._ack_args(p_items);
    SELECT x.ok, x.items, x.units INTO ok, items, units
    FROM queen._ack_apply(a.pids, a.grps, a.txids, a.statuses, a.leases, a.errs, p_now, p_strict) x;
END
$fn$;

CREATE OR REPLACE FUNCTION queen._ack_apply(p_pids uuid[], p_grps text[], p_txids text[], p_statuses text[],
                                            p_leases uuid[], p_errs text[], p_now timestamptz, p_strict boolean,
                                            OUT ok boolean, OUT items queen.ack_item[], OUT units queen.ack_unit[])
LANGUAGE plpgsql SET plan_cache_mode = force_generic_plan SET jit = off AS $fn$
DECLARE
    v_now timestamptz := coalesce(p_now, clock_timestamp());
    u     record;
BEGIN
    items := queen._ack_resolve(p_pids, p_grps, p_txids, p_statuses, p_leases, p_errs, v_now, p_strict);
    units := '{}';
    ok := NOT EXISTS (SELECT 1 FROM unnest(items) x WHERE x.problem IS NOT NULL);
    IF NOT ok THEN
        RETURN;
    END IF;
    FOR u IN SELECT DISTINCT x.pid, x.grp FROM unnest(items) x ORDER BY 1, 2 LOOP
        units := units || queen._ack_unit(u.pid, u.grp, items, v_now);
    END LOOP;
END
$fn$;

-- ack_v3 is ack_v2 for the Go core: the items as arrays in input order
-- (partition, group, transactionId, status, leaseId and error; NULL for
-- no lease or error), so the database parses no JSON.
CREATE OR REPLACE FUNCTION queen.ack_v3(p_pids uuid[], p_grps text[], p_txids text[], p_statuses text[],
                                        p_leases uuid[], p_errs text[], p_now timestamptz,
                                        OUT ok boolean, OUT offs bigint[], OUT queues text[], OUT partitions text[],
                                        OUT results text[], OUT dlqs boolean[], OUT committed bigint[],
                                        OUT released boolean[], OUT errors text[], OUT codes text[])
LANGUAGE plpgsql SET plan_cache_mode = force_generic_plan SET jit = off AS $fn$
DECLARE
    a record;  -- _ack_apply
BEGIN
    a := queen._ack_apply(p_pids, p_grps, p_txids, p_statuses, p_leases, p_errs, p_now, false);
    ok := a.ok;
    IF NOT ok THEN
        SELECT array_agg(coalesce(x.problem, 'not applied: another item of this call was rejected') ORDER BY x.idx),
               array_agg(CASE WHEN x.problem IS NULL THEN 'skipped' ELSE x.code END ORDER BY x.idx)  -- closed set: ack codes
        INTO errors, codes
        FROM unnest(a.items) x;
        RETURN;
    END IF;
    SELECT array_agg(r.off), array_agg(r.qname), array_agg(r.pname), array_agg(r.result), array_agg(r.dlq),
           array_agg(r.new), array_agg(r.released)
    INTO offs, queues, partitions, results, dlqs, committed, released
    FROM (SELECT * FROM queen._ack_rows(a.items, a.units) ORDER BY idx) r;  -- one sort (ordered input)
END
$fn$;

-- _ack_rows is the outcome of each applied item (see _ack_results).
CREATE OR REPLACE FUNCTION queen._ack_rows(p_items queen.ack_item[], p_units queen.ack_unit[])
RETURNS TABLE (idx int, txid text, pid uuid, grp text, off bigint, qname text, pname text, result text,
               dlq boolean, new bigint, released boolean)
LANGUAGE plpgsql SET plan_cache_mode = force_generic_plan SET jit = off AS $fn$
#variable_conflict use_column
BEGIN
    RETURN QUERY
    SELECT x.idx, x.txid, x.pid, x.grp, x.off, un2.qname, un2.pname,
           -- closed set: ack results
           CASE
               WHEN x.off IS NULL THEN 'already committed'
               WHEN x.off = ANY (un2.dlq_offs) THEN 'dead-lettered'
               WHEN x.off <= un2.new THEN 'committed'
               WHEN x.off = un2.stop_off THEN 'redelivered'
               ELSE 'not applied' END,
           -- end closed set
           coalesce(x.off = ANY (un2.dlq_offs) AND x.status IN ('dlq', 'failed'), false),
           un2.new, un2.released
    FROM unnest(p_items) x
    JOIN (SELECT un.*, p.name AS pname, xq.name AS qname  -- names looked up once per unit
          FROM unnest(p_units) un
          JOIN queen.partitions p ON p.id = un.pid
          JOIN queen.queues xq ON xq.id = p.queue_id
          OFFSET 0) un2 ON un2.pid = x.pid AND un2.grp = x.grp;
END
$fn$;

-- _ack_problem says why an ack item must be refused, or NULL: its
-- partition does not exist; its leaseId is not the live lease (named before
-- the next reason: after a seek the caller must learn its lease is gone);
-- its message was never delivered to the group (beyond the cursor's
-- delivered window, or no cursor at all). An item at or below the cursor
-- is a no-op, except in a transaction (p_strict), which acks each message
-- once; and a transaction's retry or failed without a leaseId needs a live
-- lease, or a repeat of it would charge the attempt again.
DROP FUNCTION IF EXISTS queen._ack_problem(boolean, text, bigint, bigint, bigint, uuid, uuid, timestamptz,
                                          timestamptz, boolean);
CREATE OR REPLACE FUNCTION queen._ack_problem(p_part_missing boolean, p_grp text, p_committed bigint,
                                               p_delivered bigint, p_off bigint, p_status text, p_lease uuid,
                                               p_cur_lease uuid, p_expires timestamptz, p_now timestamptz,
                                               p_strict boolean)
RETURNS text LANGUAGE sql STABLE AS $$
    SELECT CASE
        WHEN p_part_missing THEN 'partition not found'
        WHEN p_committed IS NULL THEN format('message not delivered to consumer group %s', p_grp)
        WHEN p_off IS NULL THEN
            CASE WHEN p_strict THEN 'already committed or unknown: a transaction acks each message once' END
        WHEN p_lease IS NOT NULL AND (p_cur_lease IS DISTINCT FROM p_lease OR p_expires <= p_now)
            THEN 'invalid or expired lease'
        WHEN p_off > p_delivered THEN format('message not delivered to consumer group %s', p_grp)
        WHEN p_strict AND p_lease IS NULL AND p_status IN ('retry', 'failed')
             AND (p_cur_lease IS NULL OR p_expires <= p_now)
            THEN 'no live lease holds the message: a transaction reports a retry or failure once, '
                 'while the delivery it reports on is leased'
    END
$$;

-- _ack_lock locks the cursors the acks name, in one fixed order.
DROP FUNCTION IF EXISTS queen._ack_lock(json);
CREATE OR REPLACE FUNCTION queen._ack_lock(p_pids uuid[], p_grps text[])
RETURNS void LANGUAGE plpgsql SET plan_cache_mode = force_generic_plan SET jit = off AS $fn$
DECLARE
    u record;
BEGIN
    FOR u IN
        SELECT DISTINCT t.pid, t.grp FROM unnest(p_pids, p_grps) AS t(pid, grp) ORDER BY 1, 2
    LOOP
        PERFORM 1 FROM queen.consumers WHERE partition_id = u.pid AND group_name = u.grp FOR NO KEY UPDATE;
    END LOOP;
END
$fn$;

-- _ack_cursor is what an ack reads of group p_grp's cursor on partition
-- p_pid: committed, delivered and the lease. A subscribed group that has
-- not read the partition yet is at its subscription start, without a
-- lease; a group with neither reads as NULLs.
CREATE OR REPLACE FUNCTION queen._ack_cursor(p_pid uuid, p_grp text, OUT committed bigint, OUT delivered bigint,
                                             OUT cur_lease uuid, OUT expires timestamptz)
LANGUAGE plpgsql STABLE SET plan_cache_mode = force_generic_plan SET jit = off AS $fn$
BEGIN
    SELECT c.committed, c.delivered, c.lease_id, c.lease_expires_at INTO committed, delivered, cur_lease, expires
    FROM queen.consumers c
    WHERE c.partition_id = p_pid AND c.group_name = p_grp;
    IF NOT FOUND THEN
        SELECT queen._start_offset(p.id, sb.from_ts) INTO committed
        FROM queen.partitions p
        JOIN queen.queues x ON x.id = p.queue_id
        JOIN queen.subscriptions sb ON sb.queue_name = x.name AND sb.group_name = p_grp
        WHERE p.id = p_pid;
        delivered := committed;
    END IF;
END
$fn$;

-- _ack_resolve locks the cursors the acks name and resolves each item: its
-- offset above the cursor (NULL: at or below it, a no-op) and, when it must
-- be refused, the problem and its code.
DROP FUNCTION IF EXISTS queen._ack_resolve(json, timestamptz, boolean);
CREATE OR REPLACE FUNCTION queen._ack_resolve(p_pids uuid[], p_grps text[], p_txids text[], p_statuses text[],
                                              p_leases uuid[], p_errs text[], v_now timestamptz, p_strict boolean)
RETURNS queen.ack_item[] LANGUAGE plpgsql SET plan_cache_mode = force_generic_plan SET jit = off AS $fn$
DECLARE
    v_items queen.ack_item[];
BEGIN
    PERFORM queen._ack_lock(p_pids, p_grps);
    SELECT array_agg(ROW(it.idx, it.pid, it.grp, it.txid, it.status, it.lease, it.err, it.off,
                         queen._ack_problem(it.part_missing, it.grp, it.committed, it.delivered, it.off,
                                            it.status, it.lease, it.cur_lease, it.expires, v_now, p_strict),
                         CASE WHEN it.part_missing THEN 'not_found' ELSE 'conflict' END)::queen.ack_item  -- closed set: ack codes
                     ORDER BY it.idx)
    INTO v_items
    FROM (
        -- Resolve transactionIds to offsets above the cursor: first among
        -- what was delivered to the group (one scan of each cursor's
        -- window), then in the undelivered tail.
        -- The items, read once; each (partition, group) they name is
        -- looked up once, not once per item.
        WITH raw AS (
            SELECT (t.ord - 1)::int AS idx, t.pid, t.grp, t.txid, t.status, t.lease, t.err
            FROM unnest(p_pids, p_grps, p_txids, p_statuses, p_leases, p_errs)
                 WITH ORDINALITY AS t(pid, grp, txid, status, lease, err, ord)
        ),
        cur AS MATERIALIZED (
            SELECT u.pid, u.grp, u.num, u.num IS NULL AS part_missing,
                   c.committed, c.delivered, c.cur_lease, c.expires
            FROM (SELECT r.pid, r.grp,
                         -- a subquery per unit: as a join, a generic plan
                         -- may hash every partition
                         (SELECT p.num FROM queen.partitions p WHERE p.id = r.pid) AS num
                  FROM (SELECT DISTINCT r.pid, r.grp FROM raw r) r) u
            CROSS JOIN LATERAL queen._ack_cursor(u.pid, u.grp) c
        ),
        itm AS (
            SELECT r.idx, r.pid, r.grp, r.txid, r.status, r.lease, r.err, cu.num, cu.part_missing,
                   cu.committed, cu.delivered, cu.cur_lease, cu.expires
            FROM raw r JOIN cur cu ON cu.pid = r.pid AND cu.grp = r.grp
        ),
        units AS (
            SELECT DISTINCT pid, num, grp, committed, delivered FROM itm
            WHERE committed IS NOT NULL AND delivered > committed
        ),
        win AS MATERIALIZED (  -- each cursor's window read once, not once per item
            SELECT wu.pid, wu.grp, sg.base_offset + x.ord - 1 AS off,
                   queen.seg_txid(x.txid, sg.created_at, wu.num, sg.base_offset + x.ord - 1, sg.id_seed) AS txid
            FROM units wu
            CROSS JOIN LATERAL (
                SELECT s.base_offset, queen.seg_all(s.txid, s.txids) AS txids, s.created_at, s.id_seed,
                       queen.seg_count(s.txids, s.id_count) AS n
                FROM queen.segments s
                WHERE s.partition_num = wu.num
                  AND s.base_offset >= coalesce((SELECT max(s2.base_offset) FROM queen.segments s2
                                                 WHERE s2.partition_num = wu.num
                                                   AND s2.base_offset <= wu.committed + 1), 0)
                  AND s.base_offset <= wu.delivered) sg
            -- zipped, so a segment of derived ids (one NULL) gives a row per message
            CROSS JOIN LATERAL ROWS FROM (unnest(sg.txids), generate_series(1, sg.n)) AS x(txid, ord)
            WHERE sg.base_offset + x.ord - 1 > wu.committed AND sg.base_offset + x.ord - 1 <= wu.delivered
        )
        -- Each item's first copy in the window, else beyond it. One join
        -- (itm's estimate in a generic plan is one row: a separate DISTINCT
        -- ON joined back by idx was run again for every item).
        SELECT DISTINCT ON (itm.idx) itm.*,
               CASE WHEN w.off IS NOT NULL THEN w.off
                    WHEN itm.committed IS NOT NULL THEN
                        queen._locate_beyond(itm.pid, itm.num, itm.txid, itm.committed, itm.delivered) END AS off
        FROM itm LEFT JOIN win w ON w.pid = itm.pid AND w.grp = itm.grp AND w.txid = itm.txid
        ORDER BY itm.idx, w.off
    ) it;
    RETURN v_items;
END
$fn$;

-- _ack_signals reads the call's signals for one cursor cr, each mentioned
-- offset above the cursor with its strongest status (semantics.md §3.5.3): the
-- highest offset the call resolves (completed or dead-lettered), the lowest
-- stop signal (retry, or failed with attempts left; a declined stale one
-- still counts) and whether it applies, and the dead letters to make.
CREATE OR REPLACE FUNCTION queen._ack_signals(cr queen.consumers, p_items queen.ack_item[], p_retry_limit int,
                                               p_now timestamptz,
                                               OUT highest_resolved bigint, OUT lowest_stop bigint,
                                               OUT stop_applied boolean, OUT stop_attempts int,
                                               OUT dead_offs bigint[], OUT dead_errors text[], OUT dead_attempts int[])
LANGUAGE plpgsql SET plan_cache_mode = force_generic_plan SET jit = off AS $fn$
DECLARE
    sig             record;
    v_live_lease    boolean := cr.lease_id IS NOT NULL AND cr.lease_expires_at > p_now;
    v_head_attempts int;   -- attempts so far of the signal's message
    v_completions   boolean;  -- every signal a completion
BEGIN
    stop_applied := false;
    dead_offs := '{}';
    dead_errors := '{}';
    dead_attempts := '{}';
    -- The common ack, every signal a completion (or none): the highest
    -- resolves, nothing stops, nothing is dead-lettered; the loop below
    -- finds the same at several times the cost.
    SELECT max(x.off), bool_and(x.status = 'completed') INTO highest_resolved, v_completions
    FROM unnest(p_items) x
    WHERE x.pid = cr.partition_id AND x.grp = cr.group_name AND x.off IS NOT NULL;
    IF v_completions IS NOT FALSE THEN
        RETURN;
    END IF;
    highest_resolved := NULL;
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
        FROM unnest(p_items) x
        WHERE x.pid = cr.partition_id AND x.grp = cr.group_name AND x.off IS NOT NULL
        GROUP BY x.off ORDER BY x.off
    LOOP
        v_head_attempts := CASE WHEN sig.off = cr.committed + 1 THEN cr.attempts ELSE 0 END;
        IF sig.status = 'completed' THEN
            highest_resolved := sig.off;
        ELSIF sig.status = 'dlq' THEN
            highest_resolved := sig.off;
            dead_offs := array_append(dead_offs, sig.off);
            dead_errors := array_append(dead_errors, sig.err);
            dead_attempts := array_append(dead_attempts,
                                            v_head_attempts + CASE WHEN sig.any_failed THEN 1 ELSE 0 END);
        ELSIF v_live_lease AND sig.off > cr.batch_end THEN
            -- A retry or failed from a consumer whose lease is gone: it
            -- must not end another consumer's lease, nor be turned into
            -- a commit. Declined, it still stops the call.
            IF lowest_stop IS NULL THEN
                lowest_stop := sig.off;
            END IF;
        ELSIF sig.status = 'failed' AND v_head_attempts + 1 > p_retry_limit THEN
            highest_resolved := sig.off;
            dead_offs := array_append(dead_offs, sig.off);
            dead_errors := array_append(dead_errors, sig.err);
            dead_attempts := array_append(dead_attempts, v_head_attempts + 1);
        ELSIF lowest_stop IS NULL THEN
            lowest_stop := sig.off;
            stop_applied := true;
            stop_attempts := CASE WHEN sig.status = 'failed' THEN v_head_attempts + 1 END;
        END IF;
    END LOOP;
END
$fn$;

-- _ack_dead_letters makes the dead letters an ack's signals call for
-- (offsets p_offs, with their errors and attempts) at or below the new
-- cursor p_upto; those above it are not applied (the messages come back).
-- Returns the offsets it dead-lettered.
CREATE OR REPLACE FUNCTION queen._ack_dead_letters(p_pid uuid, p_grp text, p_offs bigint[], p_errors text[],
                                                    p_attempts int[], p_upto bigint, p_now timestamptz)
RETURNS bigint[] LANGUAGE plpgsql SET plan_cache_mode = force_generic_plan SET jit = off AS $fn$
DECLARE
    v_done bigint[] := '{}';
BEGIN
    FOR i IN 1 .. coalesce(array_length(p_offs, 1), 0) LOOP
        IF p_offs[i] <= p_upto THEN
            PERFORM queen._dead_letter(p_pid, p_grp, p_offs[i], p_errors[i], p_attempts[i], p_now);
            v_done := array_append(v_done, p_offs[i]);
        END IF;
    END LOOP;
    RETURN v_done;
END
$fn$;

-- _ack_unit applies the call's acks to one cursor: the ack rule (semantics.md
-- §3.5.3), the dead letters at or below the new cursor, the head's attempts,
-- the lease and the retryDelay hold. It returns what the results report.
CREATE OR REPLACE FUNCTION queen._ack_unit(p_pid uuid, p_grp text, p_items queen.ack_item[], v_now timestamptz)
RETURNS queen.ack_unit LANGUAGE plpgsql SET plan_cache_mode = force_generic_plan SET jit = off AS $fn$
DECLARE
    cr             queen.consumers;
    sg             record;
    v_retry_limit  int;
    v_retry_delay  int;
    v_applied_dead bigint[];
    v_committed    bigint;
    v_attempts     int;      -- the new head's
    v_released     boolean;  -- the lease ends
BEGIN
    SELECT * INTO cr FROM queen.consumers WHERE partition_id = p_pid AND group_name = p_grp;
    IF NOT FOUND THEN
        -- A subscribed group that has not read this partition: every item
        -- is at or below its start, a no-op.
        SELECT queen.group_position(p.id, NULL, sb.from_ts) INTO v_committed
        FROM queen.partitions p
        JOIN queen.queues x ON x.id = p.queue_id
        JOIN queen.subscriptions sb ON sb.queue_name = x.name AND sb.group_name = p_grp
        WHERE p.id = p_pid;
        RETURN ROW(p_pid, p_grp, v_committed, v_committed, false, NULL, '{}')::queen.ack_unit;
    END IF;
    SELECT retry_limit, retry_delay_ms INTO v_retry_limit, v_retry_delay FROM queen.queues WHERE id = cr.queue_id;
    SELECT * INTO sg FROM queen._ack_signals(cr, p_items, v_retry_limit, v_now);

    -- committed = max(C, min(highest_resolved, lowest_stop - 1))
    v_committed := coalesce(sg.highest_resolved, cr.committed);
    IF sg.lowest_stop IS NOT NULL THEN
        v_committed := least(v_committed, sg.lowest_stop - 1);
    END IF;
    v_committed := greatest(v_committed, cr.committed);

    v_applied_dead := queen._ack_dead_letters(p_pid, p_grp, sg.dead_offs, sg.dead_errors, sg.dead_attempts,
                                              v_committed, v_now);

    -- A failed stop right above the cursor consumed an attempt; a moved
    -- cursor starts a fresh head.
    v_attempts := CASE
        WHEN sg.stop_applied AND sg.lowest_stop = v_committed + 1 AND sg.stop_attempts IS NOT NULL
            THEN sg.stop_attempts
        WHEN v_committed > cr.committed THEN 0
        ELSE cr.attempts END;
    -- at batch_end, or an applied stop signal; a partial ack keeps the lease
    v_released := cr.lease_id IS NOT NULL AND (sg.stop_applied OR v_committed >= cr.batch_end);

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
        retry_at = CASE WHEN sg.stop_applied AND sg.stop_attempts IS NOT NULL  -- a failed attempt
                            THEN v_now + queen._failure_delay(cr.queue_id, p_grp)
                        WHEN sg.stop_applied THEN v_now + make_interval(secs => v_retry_delay / 1000.0)
                        WHEN v_committed > cr.committed THEN NULL
                        ELSE retry_at END,
        updated_at = v_now
    WHERE partition_id = p_pid AND group_name = p_grp;
    IF v_released THEN
        DELETE FROM queen.leases WHERE lease_id = cr.lease_id AND partition_id = p_pid AND group_name = p_grp;
    END IF;
    IF cr.retry_at IS NOT NULL AND (sg.stop_applied OR v_committed > cr.committed) THEN
        -- the hold ended with the cursor's move, or a new one replaced
        -- it (possibly shorter, after retryDelay was lowered)
        PERFORM queen._wake(p_pid, p_grp);
    END IF;
    IF v_committed >= (SELECT p.last_offset FROM queen.partitions p WHERE p.id = p_pid) THEN
        PERFORM queen._unschedule(p_pid, p_grp);
    END IF;
    -- Reported as listings show it: never before the oldest stored message.
    RETURN ROW(p_pid, p_grp, cr.committed, queen.group_position(p_pid, v_committed, NULL), v_released,
               CASE WHEN sg.stop_applied THEN sg.lowest_stop END, v_applied_dead)::queen.ack_unit;
END
$fn$;

-- _ack_results reports each item of an applied call.
CREATE OR REPLACE FUNCTION queen._ack_results(p_items queen.ack_item[], p_units queen.ack_unit[])
RETURNS json LANGUAGE plpgsql SET plan_cache_mode = force_generic_plan SET jit = off AS $fn$
BEGIN
    RETURN json_build_object('ok', true, 'results', (
        SELECT json_agg(json_build_object(
                   'index', r.idx, 'transactionId', r.txid, 'partitionId', r.pid,
                   'offset', r.off, 'consumerGroup', r.grp,
                   'queue', r.qname, 'partition', r.pname,
                   'success', true,
                   'result', r.result,
                   'dlq', r.dlq,
                   'committed', r.new,
                   'leaseReleased', r.released)
               ORDER BY r.idx)
        FROM queen._ack_rows(p_items, p_units) r));
END
$fn$;
