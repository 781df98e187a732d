-- ---------------------------------------------------------------------------
-- dead letters, leases, subscriptions

-- _dead_letter copies the message at p_off into the DLQ. Returns false when
-- the message no longer exists (removed by retention).
CREATE OR REPLACE FUNCTION queen._dead_letter(p_pid uuid, p_group text, p_off bigint,
                                               p_error text, p_attempts int, p_now timestamptz)
RETURNS boolean LANGUAGE plpgsql SET plan_cache_mode = force_generic_plan SET jit = off AS $fn$
BEGIN
    INSERT INTO queen.dlq (queue_name, partition_name, partition_id, msg_offset, message_id,
                           transaction_id, payload, trace_id, consumer_group, error, attempts,
                           created_at, failed_at, key_id)
    SELECT x.name, p.name, p.id, p_off, queen.message_id(p.id, p_off),
           queen.seg_txid((queen.seg_all(s.txid, s.txids))[p_off - s.base_offset + 1], s.created_at, s.partition_num,
                           p_off, s.id_seed),
           (queen.seg_all(s.payload, s.payloads))[p_off - s.base_offset + 1],
           s.trace_ids[p_off - s.base_offset + 1], p_group, p_error, p_attempts,
           s.created_at, p_now, s.key_id  -- a sealed payload stays sealed
    FROM queen.partitions p
    JOIN queen.queues x ON x.id = p.queue_id
    JOIN queen.segments s ON s.partition_num = p.num
    WHERE p.id = p_pid
      AND s.base_offset = (SELECT max(s2.base_offset) FROM queen.segments s2
                           WHERE s2.partition_num = p.num AND s2.base_offset <= p_off)
      AND p_off <= queen.seg_last(s.base_offset, s.txids, s.id_count);
    RETURN FOUND;
END
$fn$;

-- _failure_delay is how long a partition waits after a failed attempt of
-- p_group (a failed ack, a lease expiry): the queue's retryDelay, and at
-- least a second when a subscription delivers the group
-- (docs/subscriptions.md §3), so that no dispatcher, however many workers
-- or runs it has, spends the attempts faster than that.
CREATE OR REPLACE FUNCTION queen._failure_delay(p_queue_id bigint, p_group text)
RETURNS interval LANGUAGE sql STABLE AS $fn$
    SELECT make_interval(secs => greatest(x.retry_delay_ms,
               CASE WHEN EXISTS (SELECT 1 FROM queen.subscription_targets t
                                 WHERE t.queue_name = x.name AND t.group_name = p_group)
                    THEN 1000 ELSE 0 END) / 1000.0)
    FROM queen.queues x WHERE x.id = p_queue_id
$fn$;

-- _wake forgets when a waiting partition was last found deliverable at the
-- earliest (ready.not_before): called when a retryDelay hold ends before
-- its time (the cursor moved on, a seek), since not_before must never be
-- later than the partition's real deliverability.
CREATE OR REPLACE FUNCTION queen._wake(p_pid uuid, p_group text)
RETURNS void LANGUAGE plpgsql SET plan_cache_mode = force_generic_plan SET jit = off AS $fn$
BEGIN
    UPDATE queen.ready SET not_before = NULL  -- by ready_partition
    WHERE partition_id = p_pid AND group_name = p_group AND not_before IS NOT NULL;
END
$fn$;

-- _expire ends an expired lease of a consumer row the caller has locked:
-- one failed attempt of the head message, exactly once per lease. When the
-- head's attempts exceed the queue's retryLimit it is dead-lettered;
-- otherwise the head is delivered alone next time. Returns 'expired' or
-- 'dead-lettered'.
CREATE OR REPLACE FUNCTION queen._expire(p_pid uuid, p_group text, p_now timestamptz)
RETURNS text LANGUAGE plpgsql SET plan_cache_mode = force_generic_plan SET jit = off AS $fn$
DECLARE
    cr      queen.consumers;
    v_num   bigint;
    v_limit int;
    v_att   int;
BEGIN
    SELECT * INTO cr FROM queen.consumers WHERE partition_id = p_pid AND group_name = p_group;
    IF cr.lease_id IS NULL THEN
        RETURN 'none';
    END IF;
    DELETE FROM queen.leases WHERE lease_id = cr.lease_id AND partition_id = p_pid AND group_name = p_group;
    v_num := (SELECT p.num FROM queen.partitions p WHERE p.id = p_pid);
    IF queen._txid_at(v_num, cr.committed + 1) IS NULL THEN
        -- The head was removed by retention: nothing to charge; the cursor
        -- moves to just before the oldest surviving message.
        UPDATE queen.consumers
        SET committed = greatest(committed, coalesce(
                (SELECT min(s.base_offset) - 1 FROM queen.segments s
                 WHERE s.partition_num = v_num AND s.base_offset > cr.committed),
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
    SELECT retry_limit INTO v_limit FROM queen.queues WHERE id = cr.queue_id;
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
        retry_at = cr.lease_expires_at + queen._failure_delay(cr.queue_id, p_group)
    WHERE partition_id = p_pid AND group_name = p_group;
    RETURN 'expired';
END
$fn$;

-- _schedule puts partitions of a queue in the group's ready set (at the
-- end of its round); those already in it stay where they are.
CREATE OR REPLACE FUNCTION queen._schedule(p_queue_id bigint, p_group text, p_pids uuid[])
RETURNS void LANGUAGE plpgsql SET plan_cache_mode = force_generic_plan SET jit = off AS $fn$
BEGIN
    INSERT INTO queen.ready (queue_id, group_name, partition_id, order_key)
    SELECT p_queue_id, p_group, u.pid, nextval('queen.ready_order')
    FROM unnest(p_pids) AS u(pid)
    ORDER BY u.pid
    ON CONFLICT DO NOTHING;
END
$fn$;

-- _subscribe returns the (queue, group) subscription, creating it on first
-- use. A new subscription gets ready rows for every partition holding
-- messages it should read.
CREATE OR REPLACE FUNCTION queen._subscribe(p_queue text, p_group text, p_mode text,
                                             p_from timestamptz, p_now timestamptz)
RETURNS queen.subscriptions LANGUAGE plpgsql SET plan_cache_mode = force_generic_plan SET jit = off AS $fn$
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
    IF FOUND THEN  -- the queue's depths and this group's lags are to be folded in
        PERFORM pg_advisory_xact_lock(queen.summary_lock_key());
        PERFORM queen._summary_groups_changed(p_queue);
    END IF;
    SELECT * INTO s FROM queen.subscriptions WHERE queue_name = p_queue AND group_name = p_group;
    PERFORM queen._schedule(x.id, p_group, ARRAY(
        SELECT p.id FROM queen.partitions p
        WHERE p.queue_id = x.id AND p.last_offset >= 0
          AND (s.from_ts IS NULL OR p.last_pushed_at >= s.from_ts)))
    FROM queen.queues x WHERE x.name = p_queue;
    RETURN s;
END
$fn$;

-- A pop creates a group's cursor of a partition on its first visit (_claim_lock).
DROP FUNCTION IF EXISTS queen._ensure_consumer(uuid, bigint, text, timestamptz, timestamptz);

-- _unschedule removes a partition from a group's ready set once the
-- group's cursor has reached its last offset, so consumed partitions never
-- use up a wildcard pop's scan. It never waits: when a push holds the
-- partition (it will add messages, and its ready row must survive) the row
-- stays; otherwise the share lock makes later pushes wait until this
-- transaction has committed, so they re-insert the row.
CREATE OR REPLACE FUNCTION queen._unschedule(p_pid uuid, p_group text)
RETURNS void LANGUAGE plpgsql SET plan_cache_mode = force_generic_plan SET jit = off AS $fn$
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

