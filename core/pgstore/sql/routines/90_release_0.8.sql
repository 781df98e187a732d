-- ---------------------------------------------------------------------------
-- release 0.8: the calls of the code before 0.9.0 (the first versioned
-- release). A deploy migrates and replaces the routines before it replaces
-- the functions' code, so for a while the previous release's code calls
-- this release's routines: these are its entry points, kept for exactly
-- one release. Delete this file when 0.10.0 ships (TestCompatRetired
-- fails from then on); the current contract is in the files before it.
-- TestPreviousReleaseCallsWork makes these calls against the current
-- schema.

-- push_partition is push_partition_v2 with every item's offset and
-- transactionId in arrays.
DROP FUNCTION IF EXISTS queen.push_partition(text, text, text[], text[], text[], text, text, timestamptz);
CREATE OR REPLACE FUNCTION queen.push_partition(p_queue text, p_partition text, p_txids text[], p_payloads text[],
                                                p_trace_ids text[], p_producer_sub text, p_key_id text,
                                                p_now timestamptz,
                                                OUT partition_id uuid, OUT created_at timestamptz,
                                                OUT fresh boolean[], OUT offsets bigint[], OUT txids text[])
LANGUAGE plpgsql SET plan_cache_mode = force_generic_plan SET jit = off AS $fn$
DECLARE
    r      record;
    v_seed bigint := queen.new_seed();
BEGIN
    SELECT * INTO r FROM queen.push_partition_v2(p_queue, p_partition, p_txids, p_payloads, p_trace_ids,
                                                 p_producer_sub, p_key_id, p_now, v_seed);
    partition_id := r.partition_id;
    created_at := r.created_at;
    fresh := coalesce(r.fresh, array_fill(true, ARRAY[cardinality(p_payloads)]));
    offsets := coalesce(r.offsets, ARRAY(SELECT r.first_offset + g FROM generate_series(0, cardinality(p_payloads) - 1) g
                                         ORDER BY g));
    SELECT array_agg(queen.seg_txid(r.txids[u.o], r.created_at, r.part_num, u.off, v_seed) ORDER BY u.o)
    INTO txids FROM unnest(offsets) WITH ORDINALITY AS u(off, o);
END
$fn$;

-- push takes the items as JSON and answers the push's results as JSON.
CREATE OR REPLACE FUNCTION queen.push(p_items json, p_now timestamptz)
RETURNS json LANGUAGE sql AS $$
    SELECT queen._push(p_items, p_now)
$$;

-- push_v2 is push_v3 with the items as JSON: the items as push reads them, p_seed the seed of the ids it generates;
-- per item, in input order, its partition's id and number, the push's time
-- in that partition, whether it was stored (fresh), the offset it is at (a
-- duplicate: the offset its first copy is at) and its transactionId, NULL
-- for an id derived from p_seed (txids is NULL when every one is). The Go
-- core renders the reply (pgstore.GeneratedID, MessageID) once the
-- partitions are unlocked.
CREATE OR REPLACE FUNCTION queen.push_v2(p_items json, p_now timestamptz, p_seed bigint)
RETURNS TABLE (partition_ids uuid[], part_nums bigint[], created_ats timestamptz[], fresh boolean[],
               offsets bigint[], txids text[])
LANGUAGE sql SET jit = off AS $$
    SELECT r.pids, r.nums, r.ats, r.fresh, r.offsets, r.txids FROM queen._push_arrays(p_items, p_now, p_seed) r
$$;

-- pop is pop_v2 with its reply as JSON,
-- {leaseId, leaseExpiresAt, messages: [{id, transactionId, partitionId,
-- partition, queue, offset, data, keyId, traceId, producerSub, createdAt,
-- retryCount}]}.
CREATE OR REPLACE FUNCTION queen.pop(p_req json, p_now timestamptz)
RETURNS json LANGUAGE plpgsql SET plan_cache_mode = force_generic_plan SET jit = off AS $fn$
DECLARE
    p  record;
BEGIN
    p := queen._pop(p_req, p_now);
    RETURN json_build_object(
        'leaseId', p.lease_id,
        'leaseExpiresAt', p.lease_expires_at,
        'messages', coalesce((SELECT json_agg(json_build_object(
                                  'id', queen.message_id(m.pid, m.off),
                                  'transactionId', m.txid,
                                  'partitionId', m.pid,
                                  'partition', m.pname,
                                  'queue', p_req->>'queue',
                                  'offset', m.off,
                                  'data', queen.payload_json(m.payload, m.key_id),
                                  'keyId', m.key_id,
                                  'traceId', m.trace_id,
                                  'producerSub', m.producer_sub,
                                  'createdAt', m.created_at,
                                  'retryCount', m.retry) ORDER BY m.o)
                              FROM unnest(p.items) WITH ORDINALITY AS m(off, txid, payload, trace_id, created_at,
                                                                        producer_sub, key_id, retry, pid, pname,
                                                                        o)),
                             '[]'::json));
END
$fn$;

-- ack takes the items as JSON and answers {ok, results} as JSON.
CREATE OR REPLACE FUNCTION queen.ack(p_items json, p_now timestamptz)
RETURNS json LANGUAGE sql AS $$
    SELECT queen._ack(p_items, p_now, false)
$$;

-- ack_v2 is ack_v3 with the items as JSON: the results come back as arrays, one
-- element per item in input order (the caller knows each item's
-- transactionId, partition and group): the Go core renders them. When ok
-- is false nothing was applied and only errors and codes are set.
CREATE OR REPLACE FUNCTION queen.ack_v2(p_items json, p_now timestamptz,
                                        OUT ok boolean, OUT offs bigint[], OUT queues text[], OUT partitions text[],
                                        OUT results text[], OUT dlqs boolean[], OUT committed bigint[],
                                        OUT released boolean[], OUT errors text[], OUT codes text[])
LANGUAGE plpgsql SET plan_cache_mode = force_generic_plan SET jit = off AS $fn$
DECLARE
    a record;  -- _ack_args
BEGIN
    a := queen._ack_args(p_items);
    SELECT * INTO ok, offs, queues, partitions, results, dlqs, committed, released, errors, codes
    FROM queen.ack_v3(a.pids, a.grps, a.txids, a.statuses, a.leases, a.errs, p_now);
END
$fn$;

-- extend_lease is extend_lease_v2 answering with a status where it raises:
-- {status: ok, expiresAt} | {status: expired} | {status: unknown}.
CREATE OR REPLACE FUNCTION queen.extend_lease(p_lease uuid, p_seconds int, p_now timestamptz)
RETURNS json LANGUAGE plpgsql SET jit = off AS $fn$
BEGIN
    RETURN json_build_object('status', 'ok',
                             'expiresAt', queen.extend_lease_v2(p_lease, p_seconds, p_now)->'expiresAt');
EXCEPTION
    WHEN SQLSTATE 'QN409' THEN RETURN json_build_object('status', 'expired');
    WHEN SQLSTATE 'QN404' THEN RETURN json_build_object('status', 'unknown');
END
$fn$;

-- seek is seek_v2 answering with a status where it raises:
-- {status: ok, partitions} | {status: queue_not_found} |
-- {status: partition_not_found, partition}.
CREATE OR REPLACE FUNCTION queen.seek(p_group text, p_queue text, p_target json, p_now timestamptz)
RETURNS json LANGUAGE plpgsql SET jit = off AS $fn$
DECLARE
    v_part text;
BEGIN
    RETURN json_build_object('status', 'ok',
                             'partitions', queen.seek_v2(p_group, p_queue, p_target, p_now)->'partitions');
EXCEPTION WHEN SQLSTATE 'QN404' THEN
    GET STACKED DIAGNOSTICS v_part = PG_EXCEPTION_DETAIL;
    IF coalesce(v_part, '') = '' THEN
        RETURN json_build_object('status', 'queue_not_found');
    END IF;
    RETURN json_build_object('status', 'partition_not_found', 'partition', v_part);
END
$fn$;

-- reap is a one-transaction pass (at most p_limit rows of each kind, no
-- default retention) where reap_step does one batch of one kind.
CREATE OR REPLACE FUNCTION queen.reap(p_now timestamptz, p_limit int)
RETURNS json LANGUAGE plpgsql SET plan_cache_mode = force_generic_plan SET jit = off AS $fn$
DECLARE
    v_now    timestamptz := coalesce(p_now, clock_timestamp());
    v_leases json;
BEGIN
    v_leases := queen._reap_leases(v_now, p_limit);
    RETURN json_build_object('leasesExpired', (v_leases->>'n')::int, 'deadLettered', (v_leases->>'dead')::int,
                             'dedupPruned', queen._reap_dedup(v_now, p_limit),
                             'segmentsRetained', queen._reap_segments(v_now, p_limit, false, 0),
                             'segmentsCompleted', queen._reap_segments(v_now, p_limit, true, 0));
END
$fn$;
