-- ---------------------------------------------------------------------------
-- transactions and leases (acks are in 40_ack.sql)

-- transact applies acks and pushes atomically. Required leases must be
-- live, and are checked, like the acks, under the cursor locks that apply
-- them: of several concurrent or repeated identical transactions exactly
-- one applies; the others find the lease gone or the acks applied and are
-- refused, pushing nothing.
CREATE OR REPLACE FUNCTION queen.transact(p_acks json, p_items json, p_leases uuid[],
                                           p_now timestamptz)
RETURNS json LANGUAGE plpgsql SET plan_cache_mode = force_generic_plan SET jit = off AS $fn$
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
                                             FROM json_array_elements(p_acks) i
                                             UNION ALL
                                             SELECT l.partition_id, l.group_name FROM queen.leases l
                                             WHERE l.lease_id = ANY (p_leases))
    ORDER BY c.partition_id, c.group_name
    FOR NO KEY UPDATE;
    SELECT r INTO v_lease FROM unnest(p_leases) r
    WHERE NOT EXISTS (SELECT 1 FROM queen.leases l
                      JOIN queen.consumers c ON c.partition_id = l.partition_id AND c.group_name = l.group_name
                      WHERE l.lease_id = r AND c.lease_id = r AND c.lease_expires_at > v_now)
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

-- extend_lease_v2 moves a live lease's expiry to p_seconds from now (0:
-- the queue's leaseTime), never earlier than it was. Returns {expiresAt};
-- raises QN409 when the lease has expired, QN404 when no cursor holds it.
CREATE OR REPLACE FUNCTION queen.extend_lease_v2(p_lease uuid, p_seconds int, p_now timestamptz)
RETURNS json LANGUAGE plpgsql SET plan_cache_mode = force_generic_plan SET jit = off AS $fn$
DECLARE
    v_now timestamptz := coalesce(p_now, clock_timestamp());
    v_exp timestamptz;
BEGIN
    -- queen.leases finds the lease's cursors; each cursor is the truth.
    WITH u AS (
        UPDATE queen.consumers c
        SET lease_expires_at = greatest(c.lease_expires_at,
                                        v_now + make_interval(secs => coalesce(nullif(p_seconds, 0), q.lease_time))),
            updated_at = v_now
        FROM queen.leases l, queen.queues q
        WHERE l.lease_id = p_lease AND c.partition_id = l.partition_id AND c.group_name = l.group_name
          AND c.lease_id = p_lease AND c.lease_expires_at > v_now AND q.id = c.queue_id
        RETURNING c.partition_id, c.group_name, c.lease_expires_at
    ),
    l AS (
        UPDATE queen.leases l SET expires_at = u.lease_expires_at
        FROM u
        WHERE l.lease_id = p_lease AND l.partition_id = u.partition_id AND l.group_name = u.group_name
    )
    SELECT max(lease_expires_at) INTO v_exp FROM u;
    IF v_exp IS NOT NULL THEN
        RETURN json_build_object('expiresAt', v_exp);
    END IF;
    IF EXISTS (SELECT 1 FROM queen.leases l
               JOIN queen.consumers c ON c.partition_id = l.partition_id AND c.group_name = l.group_name
               WHERE l.lease_id = p_lease AND c.lease_id = p_lease) THEN
        RAISE EXCEPTION 'lease % has expired', p_lease USING ERRCODE = 'QN409';
    END IF;
    RAISE EXCEPTION 'lease % not found', p_lease USING ERRCODE = 'QN404';
END
$fn$;

-- release_lease ends every partition lease held under p_lease as if it had
-- expired at p_now (queen._expire: an attempt counted for the head, which
-- is delivered alone next time, or dead-lettered past the retry limit). A
-- subscription's dispatcher ends a batch this way when its target fails
-- as a whole (docs/subscriptions.md §3). Returns how many leases it ended;
-- QN409 when none was live.
CREATE OR REPLACE FUNCTION queen.release_lease(p_lease uuid, p_now timestamptz)
RETURNS int LANGUAGE plpgsql SET plan_cache_mode = force_generic_plan SET jit = off AS $fn$
DECLARE
    v_now timestamptz := coalesce(p_now, clock_timestamp());
    v_n   int := 0;
    r     record;
BEGIN
    -- The cursors' rows in the one order every operation locks them.
    FOR r IN
        SELECT c.partition_id, c.group_name
        FROM queen.leases l
        JOIN queen.consumers c ON c.partition_id = l.partition_id AND c.group_name = l.group_name
        WHERE l.lease_id = p_lease AND c.lease_id = p_lease AND c.lease_expires_at > v_now
        ORDER BY c.partition_id, c.group_name
        FOR NO KEY UPDATE OF c
    LOOP
        -- ended now: a retryDelay counts from here
        UPDATE queen.consumers SET lease_expires_at = v_now
        WHERE partition_id = r.partition_id AND group_name = r.group_name;
        PERFORM queen._expire(r.partition_id, r.group_name, v_now);
        v_n := v_n + 1;
    END LOOP;
    IF v_n = 0 THEN
        RAISE EXCEPTION 'lease % has ended or does not exist', p_lease USING ERRCODE = 'QN409';
    END IF;
    RETURN v_n;
END
$fn$;
