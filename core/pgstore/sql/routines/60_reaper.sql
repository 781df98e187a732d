-- ---------------------------------------------------------------------------
-- reaper

-- retention_keep is how long queue x keeps its segments, in seconds (0:
-- for ever): with p_completed its completedRetentionSeconds, else the
-- smallest of retentionSeconds, ttl and maxWaitTimeSeconds that is set.
-- A queue that sets none, or turned retention off (retentionEnabled
-- false), keeps them for the deployment's default, p_default (0: for
-- ever).
DROP FUNCTION IF EXISTS queen.retention_keep(queen.queues, boolean);
CREATE OR REPLACE FUNCTION queen.retention_keep(x queen.queues, p_completed boolean, p_default int)
RETURNS int LANGUAGE sql IMMUTABLE AS $$
    SELECT CASE
        WHEN x.retention_enabled IS FALSE THEN coalesce(p_default, 0)
        WHEN p_completed THEN coalesce(nullif(x.completed_retention_seconds, 0), p_default, 0)
        ELSE coalesce(least(nullif(x.retention_seconds, 0), nullif(x.ttl, 0), nullif(x.max_wait_time_seconds, 0)),
                      p_default, 0)
    END
$$;

-- _due_end is the base offset of partition p_num's first segment written at
-- or after p_cut (among those at or below offset p_upto, unless null): its
-- segments before it are due (a prefix, since a partition's segments are
-- written in time order); null when all are. It reads the due segments
-- and one more.
DROP FUNCTION IF EXISTS queen._due_end(bigint, timestamptz);
CREATE OR REPLACE FUNCTION queen._due_end(p_num bigint, p_cut timestamptz, p_upto bigint)
RETURNS bigint LANGUAGE sql STABLE AS $$
    SELECT s.base_offset FROM queen.segments s
    WHERE s.partition_num = p_num AND s.created_at >= p_cut AND (p_upto IS NULL OR s.base_offset <= p_upto)
    ORDER BY s.base_offset LIMIT 1
$$;

-- _delete_segments deletes the segments at p_ctids for retention, and
-- moves the dedup keys they hold that are still inside their window to
-- queen.dedup. Returns how many it deleted.
CREATE OR REPLACE FUNCTION queen._delete_segments(p_ctids tid[], p_now timestamptz)
RETURNS int LANGUAGE plpgsql SET plan_cache_mode = force_generic_plan SET jit = off AS $fn$
DECLARE
    n int;
BEGIN
    WITH del AS (
        DELETE FROM queen.segments WHERE ctid = ANY (p_ctids)
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

-- _due_prefix returns up to p_room segments of partition p_num from its
-- oldest on that were written before p_cut and, unless p_low is null,
-- lie wholly at or below offset p_low: its due prefix (segments are
-- written in time order). next_at is when the first segment it stops at
-- was written (null when it ran out: at p_low, or the partition's end).
-- It reads in short runs of the primary key's order, since one long LIMIT
-- could be planned as a read and sort of the whole partition.
CREATE OR REPLACE FUNCTION queen._due_prefix(p_num bigint, p_cut timestamptz, p_low bigint, p_room int,
                                             OUT ctids tid[], OUT next_at timestamptz)
LANGUAGE plpgsql SET plan_cache_mode = force_custom_plan SET jit = off AS $fn$
DECLARE
    s       record;
    v_after bigint := -1;
    v_got   int;
BEGIN
    ctids := '{}';
    LOOP
        v_got := 0;
        FOR s IN SELECT sg.ctid, sg.base_offset, sg.created_at,
                        queen.seg_last(sg.base_offset, sg.txids, sg.id_count) AS last
                 FROM queen.segments sg
                 WHERE sg.partition_num = p_num AND sg.base_offset > v_after
                   AND (p_low IS NULL OR sg.base_offset <= p_low)
                 ORDER BY sg.base_offset LIMIT 32
        LOOP
            v_got := v_got + 1;
            v_after := s.base_offset;
            IF s.created_at >= p_cut OR s.last > p_low OR cardinality(ctids) >= p_room THEN
                next_at := s.created_at;
                RETURN;
            END IF;
            ctids := ctids || s.ctid;
        END LOOP;
        EXIT WHEN v_got < 32;
    END LOOP;
END
$fn$;

-- _reap_prefix is what retention may delete of one partition: up to
-- p_room segments of its due prefix (_due_prefix), for completed retention
-- only those every subscribed group consumed; and next_at, when the oldest
-- segment that stays was written (null: none stays).
CREATE OR REPLACE FUNCTION queen._reap_prefix(p_pid uuid, p_num bigint, p_queue text, p_cut timestamptz,
                                              p_completed boolean, p_room int,
                                              OUT ctids tid[], OUT next_at timestamptz)
LANGUAGE plpgsql SET plan_cache_mode = force_custom_plan SET jit = off AS $fn$
DECLARE
    v_low bigint := CASE WHEN p_completed THEN queen.slowest_position(p_pid, p_queue) END;
BEGIN
    IF p_completed AND v_low IS NULL THEN  -- no group subscribes: nothing is consumed
        ctids := '{}';
        next_at := (SELECT sg.created_at FROM queen.segments sg WHERE sg.partition_num = p_num
                    ORDER BY sg.base_offset LIMIT 1);
        RETURN;
    END IF;
    SELECT d.ctids, d.next_at INTO ctids, next_at FROM queen._due_prefix(p_num, p_cut, v_low, p_room) d;
    IF next_at IS NULL AND p_completed THEN  -- what follows the consumed ones
        next_at := (SELECT sg.created_at FROM queen.segments sg WHERE sg.partition_num = p_num
                    AND sg.base_offset > v_low ORDER BY sg.base_offset LIMIT 1);
    END IF;
END
$fn$;

-- _reap_settle stores what the partitions a retention batch visited hold
-- now: the time of their oldest segment, null when none; those that lost
-- segments are dirty for the summaries (queen._summarize_step), as a
-- group's position may have moved up to the oldest one left. The batch
-- held no partition lock: a push only appends, so the oldest segment a
-- visit found is still the oldest, but one that found none may have
-- missed a push meanwhile (the last offset moved), and marks the
-- partition for a first look instead ('-infinity'). The rows are locked
-- in a push's order (by id), so that the two never deadlock.
CREATE OR REPLACE FUNCTION queen._reap_settle(p_nums bigint[], p_lasts bigint[], p_olds timestamptz[],
                                               p_hits boolean[])
RETURNS void LANGUAGE sql AS $fn$
    UPDATE queen.partitions p
    SET oldest_at = CASE WHEN u.oldest IS NULL AND p.last_offset <> u.last THEN '-infinity' ELSE u.oldest END,
        dirty = p.dirty OR u.hit
    FROM (SELECT u.num, u.last, u.oldest, u.hit
          FROM unnest(p_nums, p_lasts, p_olds, p_hits) AS u(num, last, oldest, hit)
          JOIN queen.partitions p2 ON p2.num = u.num
          WHERE p2.oldest_at IS DISTINCT FROM u.oldest OR u.hit
          ORDER BY p2.id
          FOR NO KEY UPDATE OF p2) u
    WHERE p.num = u.num
$fn$;

-- _reap_segments deletes up to p_limit segments older than their queue's
-- retention, or (p_completed) older than its completed retention and
-- consumed by every subscribed group: by each group's cursor, or its
-- subscription start while it has no cursor there (a group subscribed
-- after a segment never holds it back). p_default is the deployment's
-- default window of that kind (see retention_keep). Returns {n, rows}.
-- Its cost grows with what is due, never with what is stored: the
-- partitions with anything old enough come from partitions_oldest (one
-- index range per queue), and in each the due segments are a prefix,
-- read up to the first that is not due (_due_end). It locks no partition
-- (see _reap_settle): pushes append while it deletes from the front.
-- Completed retention goes round the partitions
-- old enough, from where its last batch stopped (queen.reaper's
-- completed_at, completed_num): a partition a group holds back is passed
-- over, and a batch that deleted nothing comes back short, so a group
-- that stopped reading costs a batch of visits per pass, not a visit of
-- every partition it holds back.
DROP FUNCTION IF EXISTS queen._reap_segments(timestamptz, int, boolean, int);
CREATE OR REPLACE FUNCTION queen._reap_segments(p_now timestamptz, p_limit int, p_completed boolean, p_default int)
RETURNS json LANGUAGE plpgsql SET plan_cache_mode = force_custom_plan SET jit = off AS $fn$
DECLARE
    v_mark_at  timestamptz;
    v_mark_num bigint;
    c          record;
    v_more     tid[];
    v_next     timestamptz;  -- the oldest segment left in the partition
    v_ctids    tid[] := '{}';
    v_nums     bigint[] := '{}';
    v_lasts    bigint[] := '{}';  -- their last offsets when the batch began
    v_olds     timestamptz[] := '{}';
    v_hits     boolean[] := '{}';
    v_seen     int := 0;
    v_looks    int := 0;  -- first looks that found nothing due
    v_last_at  timestamptz;  -- the last partition visited, and the one before
    v_last_num bigint;
    v_prev_at  timestamptz;
    v_prev_num bigint;
    v_full     boolean;
    n          int;
BEGIN
    IF p_completed THEN
        SELECT r.completed_at, r.completed_num INTO v_mark_at, v_mark_num FROM queen.reaper r;
        v_last_at := v_mark_at;  -- what comes before the first partition visited
        v_last_num := v_mark_num;
    END IF;
    FOR c IN
        SELECT p.id, p.num, p.oldest_at, p.last_offset, x.name AS queue, w.cut
        FROM queen.queues x
        CROSS JOIN LATERAL (SELECT p_now - make_interval(secs => queen.retention_keep(x, p_completed, p_default)) AS cut) w
        CROSS JOIN LATERAL (
            SELECT p.id, p.num, p.oldest_at, p.last_offset FROM queen.partitions p
            WHERE p.queue_id = x.id AND p.oldest_at < w.cut
              AND (v_mark_num IS NULL OR (p.oldest_at, p.num) > (v_mark_at, v_mark_num))
            ORDER BY p.oldest_at, p.num LIMIT p_limit) p
        WHERE queen.retention_keep(x, p_completed, p_default) > 0
        ORDER BY p.oldest_at, p.num
        LIMIT p_limit
    LOOP
        EXIT WHEN cardinality(v_ctids) + v_looks >= p_limit;
        v_seen := v_seen + 1;
        v_prev_at := v_last_at;
        v_prev_num := v_last_num;
        v_last_at := c.oldest_at;
        v_last_num := c.num;
        SELECT d.ctids, d.next_at INTO v_more, v_next
        FROM queen._reap_prefix(c.id, c.num, c.queue, c.cut, p_completed, p_limit - cardinality(v_ctids)) d;
        v_ctids := v_ctids || v_more;
        IF c.oldest_at = '-infinity' AND cardinality(v_more) = 0 THEN
            v_looks := v_looks + 1;
        END IF;
        v_nums := v_nums || c.num;
        v_lasts := v_lasts || c.last_offset;
        v_olds := v_olds || v_next;
        v_hits := v_hits || (cardinality(v_more) > 0);
    END LOOP;

    n := queen._delete_segments(v_ctids, p_now);
    PERFORM queen._reap_settle(v_nums, v_lasts, v_olds, v_hits);

    IF p_completed THEN
        -- The next batch goes on where this one stopped: after the last
        -- partition visited, or at it when the batch filled up there (it
        -- may have more due); a batch that ran out of partitions went
        -- round, and the next starts again.
        v_full := cardinality(v_ctids) + v_looks >= p_limit;
        UPDATE queen.reaper
        SET completed_at = CASE WHEN v_full THEN v_prev_at WHEN v_seen >= p_limit THEN v_last_at END,
            completed_num = CASE WHEN v_full THEN v_prev_num WHEN v_seen >= p_limit THEN v_last_num END;
    END IF;
    -- A first look is work done: a batch full of them is not caught up.
    RETURN json_build_object('n', n, 'rows', n + v_looks);
END
$fn$;

-- _reap_leases_stale settles the due rows of queen.leases given as arrays
-- whose cursor no longer holds their lease (deleted) or holds it extended
-- (given the cursor's expiry). Returns how many it settled. Its joins go
-- by primary key, as _reap_leases' do.
CREATE OR REPLACE FUNCTION queen._reap_leases_stale(p_leases uuid[], p_pids uuid[], p_groups text[],
                                                     p_now timestamptz)
RETURNS int LANGUAGE plpgsql SET plan_cache_mode = force_custom_plan SET jit = off
    SET enable_hashjoin = off SET enable_mergejoin = off SET enable_seqscan = off AS $fn$
DECLARE
    v_gone  int;
    v_moved int;
BEGIN
    DELETE FROM queen.leases l
    USING unnest(p_leases, p_pids, p_groups) AS u(lease, pid, grp)
    WHERE l.lease_id = u.lease AND l.partition_id = u.pid AND l.group_name = u.grp
      AND NOT EXISTS (SELECT 1 FROM queen.consumers c
                      WHERE c.partition_id = u.pid AND c.group_name = u.grp AND c.lease_id = u.lease);
    GET DIAGNOSTICS v_gone = ROW_COUNT;
    UPDATE queen.leases l SET expires_at = c.lease_expires_at
    FROM unnest(p_leases, p_pids, p_groups) AS u(lease, pid, grp), queen.consumers c
    WHERE l.lease_id = u.lease AND l.partition_id = u.pid AND l.group_name = u.grp
      AND c.partition_id = u.pid AND c.group_name = u.grp AND c.lease_id = u.lease
      AND c.lease_expires_at > p_now;
    GET DIAGNOSTICS v_moved = ROW_COUNT;
    RETURN v_gone + v_moved;
END
$fn$;

-- _reap_leases_rest expires through _expire, one by one, the leases the
-- cursors given still hold: cursors _reap_leases locked and did not
-- expire itself (a head to dead-letter, or one retention removed; see
-- there). Returns the leases expired (n) and the heads dead-lettered
-- (dead).
CREATE OR REPLACE FUNCTION queen._reap_leases_rest(p_pids uuid[], p_groups text[], p_now timestamptz,
                                                    OUT n int, OUT dead int)
LANGUAGE plpgsql SET plan_cache_mode = force_custom_plan SET jit = off
    SET enable_hashjoin = off SET enable_mergejoin = off SET enable_seqscan = off AS $fn$
DECLARE
    r record;
BEGIN
    n := 0;
    dead := 0;
    FOR r IN
        SELECT c.partition_id, c.group_name
        FROM unnest(p_pids, p_groups) AS u(pid, grp)
        JOIN queen.consumers c ON c.partition_id = u.pid AND c.group_name = u.grp
        WHERE c.lease_id IS NOT NULL
    LOOP
        CASE queen._expire(r.partition_id, r.group_name, p_now)
            WHEN 'expired' THEN n := n + 1;
            WHEN 'dead-lettered' THEN n := n + 1; dead := dead + 1;
            ELSE NULL;
        END CASE;
    END LOOP;
END
$fn$;

-- _reap_leases expires up to p_limit leases past their expiry, counting
-- the attempt (the head is dead-lettered once past its retryLimit). It
-- takes the due rows of queen.leases, oldest first, and locks them:
-- rows another batch holds are skipped, so batches can run side by side
-- and no lease is taken by two. A row whose cursor still holds its lease
-- is expired; a stale one (the cursor was acked, sought or deleted since)
-- is deleted; one whose lease was extended behind its back is given the
-- cursor's expiry. Cursors another transaction holds are skipped, and
-- with them their rows, which stay due. Returns {n, dead, rows}: leases
-- expired, heads dead-lettered, and rows done (a batch that comes back
-- short has caught up).
-- One statement locks the cursors, deletes their lease rows and expires
-- the common case (the head is there and has attempts left), doing what
-- _expire does for it. It reaches the rows it locked by their address
-- (ctid), not by a second search of the primary key: a lease row locked
-- by the first statement is the version the second sees. A cursor row
-- changed by a transaction that committed after the statement began is
-- locked in its newer version, which the statement's own UPDATE does not
-- see, and is left with its lease. So when fewer cursors were expired
-- than locked, _reap_leases_rest expires what they still hold; and the
-- stale-row statements run only when some rows found no cursor to lock.
-- Its statements join by address or primary key only (no hash or merge
-- join): a hash join would read all of queen.consumers or queen.leases on
-- every batch, so that a batch's cost would grow with the number of
-- cursors. They are planned on every call (force_custom_plan): the
-- arrays' sizes are known then, and a generic plan kept from a moment
-- when the tables looked empty (after queues were deleted) would read
-- them with scans.
-- (no sequential scans either: with the cursors' statistics taken while
-- the table was small, the batch's join went through every cursor for
-- each lease — 2,000 leases by 10,000 cursors took 4 s)
CREATE OR REPLACE FUNCTION queen._reap_leases(p_now timestamptz, p_limit int)
RETURNS json LANGUAGE plpgsql SET plan_cache_mode = force_custom_plan SET jit = off
    SET enable_hashjoin = off SET enable_mergejoin = off SET enable_seqscan = off AS $fn$
DECLARE
    v_leases      uuid[];
    v_pids        uuid[];
    v_groups      text[];
    v_at          tid[];
    v_rest_pids   uuid[];
    v_rest_groups text[];
    v_locked      int;
    v_n           int;
    v_rows        int;
    v_rest        record;
BEGIN
    SELECT coalesce(array_agg(l.lease_id), '{}'), coalesce(array_agg(l.partition_id), '{}'),
           coalesce(array_agg(l.group_name), '{}'), coalesce(array_agg(l.ctid), '{}')
    INTO v_leases, v_pids, v_groups, v_at
    FROM (SELECT lease_id, partition_id, group_name, ctid FROM queen.leases
          WHERE expires_at <= p_now
          ORDER BY expires_at
          LIMIT p_limit
          FOR UPDATE SKIP LOCKED) l;
    IF cardinality(v_leases) = 0 THEN
        RETURN json_build_object('n', 0, 'dead', 0, 'rows', 0);
    END IF;

    WITH held AS (
        -- The cursors still holding these leases, expired: locked.
        SELECT c.partition_id, c.group_name, c.ctid AS cursor_at, u.at AS lease_at,
               -- the head has attempts left and is stored (what queen._message_at finds)
               c.attempts + 1 <= x.retry_limit
               AND EXISTS (SELECT 1
                           FROM (SELECT s.base_offset, s.txids, s.id_count FROM queen.segments s
                                 WHERE s.partition_num = p.num AND s.base_offset <= c.committed + 1
                                 ORDER BY s.base_offset DESC LIMIT 1) h
                           WHERE c.committed + 1 - h.base_offset < queen.seg_count(h.txids, h.id_count)) AS common,
               -- the failed attempt ended when the lease did
               c.lease_expires_at + queen._failure_delay(x.id, c.group_name) AS retry_at
        FROM unnest(v_leases, v_pids, v_groups, v_at) AS u(lease, pid, grp, at)
        JOIN queen.consumers c ON c.partition_id = u.pid AND c.group_name = u.grp AND c.lease_id = u.lease
        JOIN queen.queues x ON x.id = c.queue_id
        JOIN queen.partitions p ON p.id = c.partition_id
        WHERE c.lease_expires_at <= p_now
        FOR UPDATE OF c SKIP LOCKED
    ), released AS (
        DELETE FROM queen.leases l USING held h WHERE l.ctid = h.lease_at
    ), expired AS (
        UPDATE queen.consumers c
        SET attempts = c.attempts + 1, head_only = true, batch_end = NULL, lease_id = NULL,
            lease_expires_at = NULL, worker_id = NULL, updated_at = p_now, retry_at = h.retry_at
        FROM held h
        WHERE h.common AND c.ctid = h.cursor_at
        RETURNING 1
    )
    SELECT k.locked, k.expired,
           -- the cursors for _reap_leases_rest, read only when some were not expired
           CASE WHEN k.expired < k.locked THEN (SELECT array_agg(h.partition_id ORDER BY h.partition_id, h.group_name)
                                                FROM held h) END,
           CASE WHEN k.expired < k.locked THEN (SELECT array_agg(h.group_name ORDER BY h.partition_id, h.group_name)
                                                FROM held h) END
    INTO v_locked, v_n, v_rest_pids, v_rest_groups
    FROM (SELECT count(*) AS locked, (SELECT count(*) FROM expired) AS expired FROM held) k;

    v_rows := v_locked;
    IF v_locked < cardinality(v_leases) THEN
        v_rows := v_rows + queen._reap_leases_stale(v_leases, v_pids, v_groups, p_now);
    END IF;
    IF v_n = v_locked THEN
        RETURN json_build_object('n', v_n, 'dead', 0, 'rows', v_rows);
    END IF;
    SELECT * INTO v_rest FROM queen._reap_leases_rest(v_rest_pids, v_rest_groups, p_now);
    RETURN json_build_object('n', v_n + v_rest.n, 'dead', v_rest.dead, 'rows', v_rows);
END
$fn$;

-- _reap_dedup deletes up to p_limit dedup keys past every queue's window.
-- A key row does not know its queue: rows go once past every queue's
-- window (BRIN on created_at). Keys past their own queue's window are out
-- of every probe already, and the time of this run keeps them out if the
-- window grows (see configure and migration 0011). The cutoff is kept
-- too: an ack looking up a transactionId knows that no key newer than it
-- was removed (see _locate_beyond).
CREATE OR REPLACE FUNCTION queen._reap_dedup(p_now timestamptz, p_limit int)
RETURNS int LANGUAGE plpgsql SET plan_cache_mode = force_generic_plan SET jit = off AS $fn$
DECLARE
    v_cutoff timestamptz;
    n        int;
BEGIN
    v_cutoff := p_now - make_interval(secs => (SELECT coalesce(max(x.dedup_window), 0) FROM queen.queues x));
    INSERT INTO queen.reaper (one, last_reap, dedup_cutoff) VALUES (true, p_now, v_cutoff)
    ON CONFLICT (one) DO UPDATE SET last_reap = greatest(queen.reaper.last_reap, EXCLUDED.last_reap),
                                    dedup_cutoff = greatest(queen.reaper.dedup_cutoff, EXCLUDED.dedup_cutoff);
    DELETE FROM queen.dedup WHERE ctid = ANY (ARRAY(
        SELECT d.ctid FROM queen.dedup d
        WHERE d.created_at <= v_cutoff
        LIMIT p_limit));
    GET DIAGNOSTICS n = ROW_COUNT;
    RETURN n;
END
$fn$;

-- reap_dlq removes up to p_limit dead letters older than their queue's
-- dlqRetentionSeconds, or p_default for a queue that sets none (and for
-- the dead letters of deleted queues); 0 keeps them for ever. Returns how
-- many it removed: fewer than p_limit means it has caught up. It goes
-- queue by queue through dlq_queue (queue_name, failed_at): the queues
-- that have dead letters with a skip over the index, and in each only the
-- due range, so its cost grows with the queues and what is due, not with
-- the dead letters kept.
CREATE OR REPLACE FUNCTION queen.reap_dlq(p_now timestamptz, p_limit int, p_default int)
RETURNS int LANGUAGE plpgsql SET plan_cache_mode = force_custom_plan SET jit = off AS $fn$
DECLARE
    v_now timestamptz := coalesce(p_now, clock_timestamp());
    n     int;
BEGIN
    WITH RECURSIVE names AS (
        (SELECT d.queue_name FROM queen.dlq d ORDER BY d.queue_name LIMIT 1)
        UNION ALL
        SELECT (SELECT d.queue_name FROM queen.dlq d WHERE d.queue_name > names.queue_name
                ORDER BY d.queue_name LIMIT 1)
        FROM names WHERE names.queue_name IS NOT NULL
    ),
    due AS (
        SELECT e.ctid
        FROM names
        LEFT JOIN queen.queues x ON x.name = names.queue_name
        CROSS JOIN LATERAL (SELECT coalesce(nullif(x.dlq_retention_seconds, 0), p_default, 0) AS keep) k
        CROSS JOIN LATERAL (
            SELECT d.ctid FROM queen.dlq d
            WHERE d.queue_name = names.queue_name AND d.failed_at < v_now - make_interval(secs => k.keep)
            ORDER BY d.failed_at LIMIT p_limit) e
        WHERE names.queue_name IS NOT NULL AND k.keep > 0
        LIMIT p_limit
    )
    DELETE FROM queen.dlq WHERE ctid IN (SELECT ctid FROM due);
    GET DIAGNOSTICS n = ROW_COUNT;
    RETURN n;
END
$fn$;

-- reap_step does one batch of one kind of maintenance, at most p_limit
-- rows, in the caller's (short) transaction: 'leases' expires leases,
-- 'dedup' prunes dedup keys, 'retention' and 'completed' apply the two
-- retention windows, with the deployment's defaults p_keep and
-- p_keep_completed for queues that set none (see retention_keep). Returns
-- {n, dead, rows}: the rows done, the heads dead-lettered, and the rows
-- the batch took (more than n when leases finds stale rows); a batch that
-- took fewer than p_limit means the kind has caught up. The reaper calls it kind after kind until
-- each has caught up or its time is up.
CREATE OR REPLACE FUNCTION queen.reap_step(p_now timestamptz, p_kind text, p_limit int,
                                           p_keep int, p_keep_completed int)
RETURNS json LANGUAGE plpgsql SET plan_cache_mode = force_generic_plan SET jit = off AS $fn$
DECLARE
    v_now timestamptz := coalesce(p_now, clock_timestamp());
    v_n   int;
BEGIN
    CASE p_kind
        WHEN 'leases' THEN RETURN queen._reap_leases(v_now, p_limit);
        WHEN 'dedup' THEN v_n := queen._reap_dedup(v_now, p_limit);
        WHEN 'retention' THEN RETURN queen._reap_segments(v_now, p_limit, false, p_keep)::jsonb || '{"dead": 0}';
        WHEN 'completed' THEN RETURN queen._reap_segments(v_now, p_limit, true, p_keep_completed)::jsonb || '{"dead": 0}';
        WHEN 'summaries' THEN RETURN queen._summarize_step(p_limit)::jsonb || '{"dead": 0}';
        ELSE RAISE EXCEPTION 'reap_step: unknown kind %', p_kind USING ERRCODE = '22023';
    END CASE;
    RETURN json_build_object('n', v_n, 'dead', 0, 'rows', v_n);
END
$fn$;

-- reap_backlog counts what is due and not yet done, per kind, each count
-- stopping at p_cap: expired leases, dedup keys past every window, and
-- segments past either retention window (counted once each).
CREATE OR REPLACE FUNCTION queen.reap_backlog(p_now timestamptz, p_keep int, p_keep_completed int, p_cap int)
RETURNS json LANGUAGE plpgsql SET plan_cache_mode = force_generic_plan SET jit = off AS $fn$
DECLARE
    v_now timestamptz := coalesce(p_now, clock_timestamp());
BEGIN
    RETURN json_build_object(
        'leases', (SELECT count(*) FROM (
            SELECT 1 FROM queen.leases WHERE expires_at <= v_now LIMIT p_cap) l),
        'dedup', (SELECT count(*) FROM (
            SELECT 1 FROM queen.dedup d
            WHERE d.created_at <= v_now - make_interval(secs => (SELECT coalesce(max(x.dedup_window), 0) FROM queen.queues x))
            LIMIT p_cap) k),
        -- segments due by either window, each counted once: per queue, the
        -- partitions old enough for the shorter window (partitions_oldest),
        -- and in each its due prefix (_due_end)
        'retention', (SELECT count(*) FROM (
            SELECT 1
            FROM queen.queues x
            CROSS JOIN LATERAL (
                SELECT queen.retention_keep(x, false, p_keep) AS keep,
                       queen.retention_keep(x, true, p_keep_completed) AS keep_done) k
            CROSS JOIN LATERAL (
                SELECT v_now - make_interval(secs => k.keep) AS cut,
                       v_now - make_interval(secs => k.keep_done) AS cut_done) w
            CROSS JOIN LATERAL (
                SELECT p.id, p.num FROM queen.partitions p
                WHERE p.queue_id = x.id
                  AND p.oldest_at < greatest(CASE WHEN k.keep > 0 THEN w.cut END,
                                             CASE WHEN k.keep_done > 0 THEN w.cut_done END)
                ORDER BY p.oldest_at, p.num LIMIT p_cap) p
            CROSS JOIN LATERAL (
                SELECT CASE WHEN k.keep_done > 0 THEN queen.slowest_position(p.id, x.name) END AS low) l
            CROSS JOIN LATERAL (
                -- (completed: only among the consumed segments, at or below low)
                SELECT CASE WHEN k.keep > 0 THEN queen._due_end(p.num, w.cut, NULL) END AS due_end,
                       k.keep > 0 AS by_age, l.low,
                       CASE WHEN l.low IS NOT NULL THEN queen._due_end(p.num, w.cut_done, l.low) END AS done_end) d
            CROSS JOIN LATERAL (
                -- the segments before hi are all the ones that can be due
                SELECT greatest(CASE WHEN d.by_age THEN coalesce(d.due_end, 9223372036854775807) END,
                                CASE WHEN d.low IS NOT NULL THEN least(coalesce(d.done_end, 9223372036854775807),
                                                                       d.low + 1) END) AS hi) b
            CROSS JOIN LATERAL (
                SELECT 1 FROM queen.segments s
                WHERE s.partition_num = p.num AND s.base_offset < b.hi
                  AND ((d.by_age AND (d.due_end IS NULL OR s.base_offset < d.due_end))
                       OR (d.low IS NOT NULL AND (d.done_end IS NULL OR s.base_offset < d.done_end)
                           AND s.base_offset <= d.low
                           AND queen.seg_last(s.base_offset, s.txids, s.id_count) <= d.low))
                ORDER BY s.base_offset LIMIT p_cap) sg
            WHERE k.keep > 0 OR k.keep_done > 0
            LIMIT p_cap) r));
END
$fn$;

-- delete_queue drops a queue with its log, cursors and subscriptions.
-- Dead letters are kept: they survive the log. Returns false when there
-- was nothing to delete.
CREATE OR REPLACE FUNCTION queen.delete_queue(p_queue text)
RETURNS boolean LANGUAGE plpgsql SET plan_cache_mode = force_generic_plan SET jit = off AS $fn$
DECLARE
    v_id      bigint;
    v_subs    int;
    v_targets int;
BEGIN
    -- Exclusive against pushes to this queue (they hold it shared).
    PERFORM pg_advisory_xact_lock(queen.queue_lock_key(p_queue));
    -- and against the summaries' fold, whose rows go with the queue's
    PERFORM pg_advisory_xact_lock(queen.summary_lock_key());
    DELETE FROM queen.subscriptions WHERE queue_name = p_queue;
    GET DIAGNOSTICS v_subs = ROW_COUNT;
    DELETE FROM queen.subscription_targets WHERE queue_name = p_queue;
    GET DIAGNOSTICS v_targets = ROW_COUNT;
    SELECT id INTO v_id FROM queen.queues WHERE name = p_queue FOR UPDATE;
    IF v_id IS NULL THEN
        RETURN v_subs + v_targets > 0;
    END IF;
    DELETE FROM queen.segments WHERE partition_num IN (SELECT num FROM queen.partitions WHERE queue_id = v_id);
    -- Its dedup keys stay until the reaper takes them: they name its
    -- partitions, which no queue will have again.
    DELETE FROM queen.ready WHERE queue_id = v_id;
    DELETE FROM queen.ready_cursor WHERE queue_id = v_id;
    DELETE FROM queen.summary_marks WHERE queue_id = v_id;
    DELETE FROM queen.summary_parts WHERE partition_num IN (SELECT num FROM queen.partitions WHERE queue_id = v_id);
    DELETE FROM queen.queues WHERE id = v_id;  -- cascades to partitions, consumers and summaries
    RETURN true;
END
$fn$;

