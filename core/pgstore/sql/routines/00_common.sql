-- Queen routines. Every operation is one call of one of these functions:
-- one statement, one round trip, one transaction, no session state.
--
-- The files of sql/routines/ (one per operation: push, cursors, pop, ack,
-- admin, reaper, maintenance; this one holds what they share) are applied
-- as one script, in file-name order, by the migrator whenever their
-- checksum changes, after the numbered migrations (CREATE OR REPLACE).
--
-- Lock order, everywhere: consumers rows (sorted by partition id, group) →
-- queue-name advisory locks (sorted) → queues rows (sorted by name) →
-- partitions rows (sorted by id) → ready rows.
-- Pops take row locks only with SKIP LOCKED, so they never wait on them.
-- Pushes lock queues and partitions FOR NO KEY UPDATE, which does not
-- conflict with the FOR KEY SHARE that foreign-key checks take (a pop
-- creating a consumers row checks its partition), so those never wait either.

-- Errors: a routine that cannot do what it was asked raises one of our
-- SQLSTATEs (class QN: QN404 not found, QN409 conflict, QN429 queue full,
-- QN503 maintenance, QNENC/QNKEY encryption), its message written for the
-- caller; pgstore's interpretError maps each to a domain error, and a test
-- holds its list to the codes raised here. Results that are data — the
-- per-item outcome of an ack batch or a push — stay in the reply. A routine
-- whose reply must change gets a new name (seek_v2, extend_lease_v2) and
-- the old name answers the previous release's callers for one release.

-- Design notes (docs/internals.md §10 explains them; what they buy,
-- measured, is in docs/benchmarks.md, "Design measurements"):
-- * Every lookup is by key (scalar subqueries, LATERAL, = ANY on a primary
--   key), so no statement's cost grows with the number of queues,
--   partitions, dedup keys or idle cursors.
-- * Routines run with plan_cache_mode = force_generic_plan: a custom plan
--   of a large statement (the push's CTEs) costs more to make than to run,
--   and a generic plan is made once per connection and reused.
-- * Every PL/pgSQL routine runs with jit = off. Postgres compiles a plan to
--   machine code on every execution once its estimated cost passes
--   jit_above_cost, and a generic plan estimates its probes by the size of
--   the log, so on a large database every push would be compiled
--   (TestRoutinesNeverCompileJIT holds the setting).
-- * A generic plan is made once per connection, often while a table is
--   still small, and kept: a join against a hot table (dedup keys,
--   partitions) may then be planned as a scan of it and stay one. Probes
--   of such tables are scalar subqueries (one index probe per row, which
--   no plan can turn into a scan), and a CTE that must run once per
--   cursor rather than once per item is MATERIALIZED.
-- * A push to one partition (the common case) is push_partition_v2: its
--   items come as arrays and its reply goes back as offsets, so the
--   database neither parses nor renders JSON. When the server makes every
--   id (nothing to probe), the statement that writes takes the partition's
--   lock itself, as the bare append of the benchmark does. A push that spans
--   partitions (and transactions, and dead-letter retries) is _push: it
--   reads its items once, finds its partitions, then locks them; only the
--   offsets, the dedup probes and the writes happen under the locks.
--   Per message it probes one dedup key, checked against the stored
--   message on a match, in two places: the segments_first_key index (a
--   4-byte hash of partition number and first transactionId and the
--   minute of the push, for each segment's first message; migrations 0012,
--   0014) and queen.dedup (an 8-byte hash of partition id and
--   transactionId for the others; BRIN on created_at for pruning). Per
--   partition it inserts one segment and HOT-updates one row, and a dedup
--   row per message after the first.
-- * The log's row is small (migration 0014): a segment names its partition
--   by number, not uuid, and a segment of one message (every message of a
--   push spread over many partitions) keeps it in scalar columns, not in
--   one-element arrays.
-- * An SQL function whose body holds a subquery (or writes) is not inlined,
--   and Postgres plans its body again on every call (and for every row
--   when it is nested in another SQL function). Such helpers
--   (_start_offset, group_position) are PL/pgSQL, whose plans are kept per
--   connection; SQL functions stay for bodies that inline (one
--   expression, or one SELECT in FROM with fenced subqueries). With
--   track_functions = 'all', pg_stat_user_functions lists every SQL
--   function that was called rather than inlined.
-- * An index's expressions and predicate are copied and set up again for
--   every insert statement, and the predicate is evaluated for every row:
--   keep them to bare arithmetic and columns. segments_first_key's
--   predicate is a column the pushes write (segments.located, migration
--   0016), not a function that reads each first id back.
-- * Work under a partition's lock is paid once per push queued behind it:
--   with several pushes to one partition, throughput is what one push does
--   under the lock. So a segment of generated ids keeps one seed, not the
--   ids (migration 0017), and the Go core renders the ids and the reply
--   after the commit.
-- * Pops and acks return arrays (pop_v2, ack_v3) that the Go core renders,
--   so a pop never parses its payloads (a claim carries queen.popped rows);
--   the Go core sends an ack's items as arrays (ack_v3; the JSON routines
--   read theirs once, _ack_args), and each cursor is read once, not once
--   per item.
-- * Ordered input: several arrays built in one order from one input
--   (a reply's columns) are aggregated without ORDER BY from a subquery
--   sorted in that order, with nothing between them (no join, no grouping)
--   that could reorder the rows, as the array_agg documentation allows:
--   each array_agg(... ORDER BY) would sort its input again.
-- * A push of generated ids that spans partitions locks them in the UPDATE
--   that numbers them (_push_append), rather than in a statement of its
--   own followed by the update: one row operation each instead of two.
--   The UPDATE takes them in id order, the one order every push takes
--   them: its function disables the joins and scans that could visit them
--   in another order.
-- * A push to many partitions holds their locks for its writes plus its
--   commit (invariant 1 holds the lock to the commit), so with several
--   such pushes in flight each waits for another's commit: P100 is bound
--   by that convoy, not by the writes.

-- A message's id is derived from its address, so it costs no storage.
CREATE OR REPLACE FUNCTION queen.message_id(p_pid uuid, p_off bigint)
RETURNS uuid LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
    SELECT md5(p_pid::text || ':' || p_off::text)::uuid
$$;

-- A segment of one message keeps it in scalar columns (txid, payload), a
-- segment of several in arrays (txids, payloads), migration 0014. seg_all
-- reads either as an array. A segment whose ids were all generated stores
-- none (migration 0017): id_seed makes them (queen.gen_id) and id_count
-- says how many messages a segment of several holds; seg_all gives such a
-- segment's ids as one NULL, so unnest(seg_all(txid, txids),
-- seg_all(payload, payloads)) pads them with NULLs, each read as
-- queen.seg_txid. seg_count is a segment's number of messages, seg_last its
-- last offset.
CREATE OR REPLACE FUNCTION queen.seg_all(p_one text, p_many text[])
RETURNS text[] LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
    SELECT coalesce(p_many, ARRAY[p_one])
$$;

CREATE OR REPLACE FUNCTION queen.seg_count(p_many text[], p_count int)
RETURNS int LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
    SELECT coalesce(cardinality(p_many), p_count, 1)
$$;

DROP FUNCTION IF EXISTS queen.seg_last(bigint, text[]);
CREATE OR REPLACE FUNCTION queen.seg_last(p_base bigint, p_many text[], p_count int)
RETURNS bigint LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
    SELECT p_base + queen.seg_count(p_many, p_count) - 1
$$;

-- gen_id is the transactionId a push generated for the message at offset
-- p_off of partition number p_num, pushed at p_at, in a segment with
-- id_seed p_seed (migration 0017): queen.self_id's form (a UUIDv7 of that
-- millisecond naming the partition and the offset, which queen.self_offset
-- reads back), its variant and filling digits taken from the seed instead
-- of at random. For an offset that fits the form (queen.self_fits); the Go
-- core makes the same (pgstore.GeneratedID, a test holds the two
-- together). STABLE, not IMMUTABLE, so that it is inlined (extract is
-- STABLE).
-- _id_time is the first 13 characters of a generated id: the millisecond
-- p_at falls in, as a UUIDv7's time (before 1970: 0).
CREATE OR REPLACE FUNCTION queen._id_time(p_at timestamptz)
RETURNS text LANGUAGE sql STABLE PARALLEL SAFE AS $$
    SELECT overlay(lpad(to_hex(greatest(floor(extract(epoch FROM p_at) * 1000), 0)::bigint), 12, '0') PLACING '-' FROM 9 FOR 0)
$$;

CREATE OR REPLACE FUNCTION queen.gen_id(p_at timestamptz, p_num bigint, p_off bigint, p_seed bigint)
RETURNS text LANGUAGE sql STABLE PARALLEL SAFE AS $$
    SELECT queen._id_time(p_at)
           || '-7a' || to_hex(length(to_hex(p_off))) || to_hex(length(to_hex(p_num))) || '-' || to_hex(8 + (p_seed & 3))
           || overlay(lpad(to_hex((p_seed >> 2) & ((1::bigint << (4 * (15 - length(to_hex(p_num)) - length(to_hex(p_off))))) - 1)),
                           15 - length(to_hex(p_num)) - length(to_hex(p_off)), '0')
                      || to_hex(p_num) || to_hex(p_off)
                      PLACING '-' FROM 4 FOR 0)
$$;

-- new_lease is a lease id: a UUIDv7 of p_at, its other bits random, so
-- queen.leases' primary key (lease first) grows at its right edge and the
-- pages its released leases empty are reused, as in an index on a time.
CREATE OR REPLACE FUNCTION queen.new_lease(p_at timestamptz)
RETURNS uuid LANGUAGE sql VOLATILE AS $$
    SELECT (queen._id_time(p_at) || '-7' || substr(r, 16, 3) || '-' || substr(r, 20))::uuid
    FROM (SELECT gen_random_uuid()::text AS r) g
$$;

-- seg_txid is the transactionId of the message at offset p_off of a
-- segment (partition number p_num, pushed at p_at, id_seed p_seed), given
-- what the segment stores for it (NULL when its ids are derived).
CREATE OR REPLACE FUNCTION queen.seg_txid(p_stored text, p_at timestamptz, p_num bigint, p_off bigint, p_seed bigint)
RETURNS text LANGUAGE sql STABLE PARALLEL SAFE AS $$
    SELECT coalesce(p_stored, queen.gen_id(p_at, p_num, p_off, p_seed))
$$;

DROP FUNCTION IF EXISTS queen.seg_ids(text, text[], bigint, int, timestamptz, bigint, bigint);

-- new_seed is a seed for the ids of a push (migration 0017), for the
-- routines that make it themselves: 54 bits at random (queen.gen_id reads
-- at most 54); like self_id's digits they guard nothing.
CREATE OR REPLACE FUNCTION queen.new_seed()
RETURNS bigint LANGUAGE sql VOLATILE AS $$
    SELECT (floor(random() * 4503599627370496)::bigint << 2) + floor(random() * 4)::bigint
$$;

-- _message_at is the message stored at offset p_off of partition number
-- p_num, read from the one segment that would hold it: its transactionId
-- and push time. No row when none is (not pushed yet, removed by
-- retention, or p_off NULL). Inlined into its callers.
CREATE OR REPLACE FUNCTION queen._message_at(p_num bigint, p_off bigint)
RETURNS TABLE (txid text, created_at timestamptz) LANGUAGE sql STABLE AS $$
    SELECT CASE WHEN p_off - c.base_offset < queen.seg_count(c.txids, c.id_count)  -- inside the segment
                THEN queen.seg_txid((queen.seg_all(c.txid, c.txids))[(p_off - c.base_offset + 1)::int],
                                    c.created_at, p_num, p_off, c.id_seed) END,
           c.created_at
    FROM (SELECT s.base_offset, s.created_at, s.txid, s.txids, s.id_seed, s.id_count FROM queen.segments s
          WHERE s.partition_num = p_num AND s.base_offset <= p_off
          ORDER BY s.base_offset DESC LIMIT 1) c
    WHERE p_off - c.base_offset < queen.seg_count(c.txids, c.id_count)
$$;

-- _txid_at is the transactionId of the message stored at offset p_off of
-- partition number p_num; NULL when none is (queen._message_at).
-- PL/pgSQL, like every helper here whose body holds a subquery: Postgres
-- does not inline such an SQL function, and plans its body again on every
-- call, where PL/pgSQL keeps the plan for the connection.
CREATE OR REPLACE FUNCTION queen._txid_at(p_num bigint, p_off bigint)
RETURNS text LANGUAGE plpgsql STABLE SET plan_cache_mode = force_generic_plan SET jit = off AS $fn$
DECLARE
    v text;
BEGIN
    SELECT m.txid INTO v FROM queen._message_at(p_num, p_off) m;
    RETURN v;
END
$fn$;

-- _dedup_same says whether the message stored at offset p_off of partition
-- number p_num has transactionId p_txid, for a dedup key whose hash
-- matched: true when it has, and when retention removed it (then the hash
-- is all there is left to go by).
DROP FUNCTION IF EXISTS queen._dedup_same(uuid, bigint, text);
CREATE OR REPLACE FUNCTION queen._dedup_same(p_num bigint, p_off bigint, p_txid text)
RETURNS boolean LANGUAGE sql STABLE AS $$
    SELECT coalesce(queen._txid_at(p_num, p_off) = p_txid, true)
$$;

-- _dedup_off says whether a push to queue p_qid at p_at was made while the
-- queue's dedup window was 0 (or before migration 0012): the first key of
-- such a segment is in the segments_first_key index but was never a key.
CREATE OR REPLACE FUNCTION queen._dedup_off(p_qid bigint, p_at timestamptz)
RETURNS boolean LANGUAGE plpgsql STABLE SET plan_cache_mode = force_generic_plan SET jit = off AS $fn$
BEGIN
    RETURN EXISTS (SELECT 1 FROM queen.dedup_off o
                   WHERE o.queue_id = p_qid AND p_at >= o.since AND (o.until IS NULL OR p_at < o.until));
END
$fn$;

-- _minute_bound is the lowest queen.minute_of of the times after p_at, for
-- any p_at (infinite, or before 1970).
CREATE OR REPLACE FUNCTION queen._minute_bound(p_at timestamptz)
RETURNS int LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
    SELECT CASE WHEN p_at < timestamptz '1970-01-01 00:00:00+00' THEN -2147483648
                ELSE queen.minute_of(least(p_at, timestamptz '5000-01-01 00:00:00+00')) END
$$;

-- _first_keys lists the segments of partition number p_num whose first
-- message has transactionId p_txid and that were pushed after p_since,
-- in no order: the dedup keys kept as segments_first_key entries
-- (migrations 0012, 0014). Inlined into its callers; found by the key index
-- only (the fence keeps a plan from walking the partition instead), the
-- time bounded in the index (to the minute), so an id stored many times
-- costs only its entries in range.
DROP FUNCTION IF EXISTS queen._first_keys(uuid, text, timestamptz);
CREATE OR REPLACE FUNCTION queen._first_keys(p_num bigint, p_txid text, p_since timestamptz)
RETURNS TABLE (base_offset bigint, created_at timestamptz) LANGUAGE sql STABLE AS $$
    SELECT c.base_offset, c.created_at
    FROM (SELECT s.partition_num, s.base_offset, s.created_at, coalesce(s.txid, s.txids[1]) AS txid
          FROM queen.segments s
          WHERE queen.first_key(s.partition_num, coalesce(s.txid, s.txids[1])) = queen.first_key(p_num, p_txid)
            AND queen.minute_of(s.created_at) >= queen._minute_bound(p_since)
            AND s.located IS NULL  -- the index's predicate (migration 0016)
          OFFSET 0) c
    WHERE c.partition_num = p_num AND c.txid = p_txid AND c.created_at > p_since
$$;

-- _first_key_newest is the newest of them at any time, read newest first
-- from the index, so it costs one minute's entries, not the id's history
-- (a push's probes need no order, and _first_keys spares them the sort).
CREATE OR REPLACE FUNCTION queen._first_key_newest(p_num bigint, p_txid text)
RETURNS TABLE (base_offset bigint, created_at timestamptz) LANGUAGE sql STABLE AS $$
    SELECT c.base_offset, c.created_at
    FROM (SELECT s.partition_num, s.base_offset, s.created_at, coalesce(s.txid, s.txids[1]) AS txid
          FROM queen.segments s
          WHERE queen.first_key(s.partition_num, coalesce(s.txid, s.txids[1])) = queen.first_key(p_num, p_txid)
            AND s.located IS NULL
          ORDER BY queen.minute_of(s.created_at) DESC, s.created_at DESC, s.base_offset DESC
          OFFSET 0) c
    WHERE c.partition_num = p_num AND c.txid = p_txid
    LIMIT 1
$$;

-- self_fits says whether the id generated for offset p_off of partition
-- number p_num names them (queen.self_id): a push needs no dedup key for
-- such an id, and writes none (a test holds it to queen.self_offset).
CREATE OR REPLACE FUNCTION queen.self_fits(p_num bigint, p_off bigint)
RETURNS boolean LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
    SELECT p_num > 0 AND p_off >= 0 AND length(to_hex(p_num)) + length(to_hex(p_off)) <= 15
$$;

-- self_located says whether the message at offset p_off of partition
-- number p_num with transactionId p_txid is found by the offset its id
-- names, and so needs no dedup key: for an id the push generated
-- (p_generated), whether it fits the form; for a client's, whether it
-- names that place.
CREATE OR REPLACE FUNCTION queen.self_located(p_txid text, p_generated boolean, p_num bigint, p_off bigint)
RETURNS boolean LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
    SELECT CASE WHEN p_generated THEN queen.self_fits(p_num, p_off)
                ELSE coalesce(queen.self_offset(p_txid, p_num) = p_off, false) END
$$;

-- self_id is the transactionId generated for the message at offset p_off
-- of partition number p_num, pushed at p_at (migration 0015): a UUIDv7 of
-- that millisecond that names the partition and the offset
-- (queen.self_offset reads it back), the digits they leave filled at
-- random: queen.gen_id with a seed of its own. No two messages get the
-- same one. When the two take more than 15 hex digits together (a
-- partition past 16^15 / 16^(partition's digits) messages), the id is a
-- random UUIDv7 instead: not self-located, it gets its dedup key as a
-- client's id does. The random digits come from random() (seeded per
-- connection from the system's strong source): they guard nothing, so
-- the cheaper source will do (gen_random_uuid() per digit is not). The
-- pushes make only the random ones here (queen.stored_txid); the others
-- are derived from the push's seed (migration 0017).
DROP FUNCTION IF EXISTS queen._self_tail(text, text);
DROP FUNCTION IF EXISTS queen.self_id(timestamptz, bigint);
CREATE OR REPLACE FUNCTION queen.self_id(p_at timestamptz, p_num bigint, p_off bigint)
RETURNS text LANGUAGE sql VOLATILE AS $$
    SELECT CASE WHEN queen.self_fits(p_num, p_off) THEN queen.gen_id(p_at, p_num, p_off, queen.new_seed())
                ELSE queen._id_time(p_at)
                     || '-7' || lpad(to_hex(floor(random() * 4096)::int), 3, '0')
                     || '-' || to_hex(8 + floor(random() * 4)::int) || lpad(to_hex(floor(random() * 4096)::int), 3, '0')
                     || '-' || lpad(to_hex(floor(random() * 281474976710656)::bigint), 12, '0') END
$$;

-- stored_txid is what a segment that keeps its ids stores as the
-- transactionId of the message at offset p_off of partition number p_num,
-- pushed at p_at, with the id p_txid the client gave (NULL: none): the
-- client's id; for a generated one NULL, derived from the push's seed
-- (queen.seg_txid), when its place fits the form, else a random one
-- (queen.self_id). The one rule every push writer follows (migration 0017).
CREATE OR REPLACE FUNCTION queen.stored_txid(p_txid text, p_at timestamptz, p_num bigint, p_off bigint)
RETURNS text LANGUAGE sql VOLATILE AS $$
    SELECT CASE WHEN p_txid IS NOT NULL THEN p_txid
                WHEN NOT queen.self_fits(p_num, p_off) THEN queen.self_id(p_at, p_num, p_off) END
$$;

-- _self_seen is the offset p_txid names in partition number p_num when the
-- message stored there has that id and counts as a dedup key for a push at
-- the window start p_since, queue p_qid's floor p_floor (as a key row
-- would); NULL otherwise. One index lookup for an id in the generated
-- form, none for any other. Inlined into _dedup_seen.
CREATE OR REPLACE FUNCTION queen._self_seen(p_num bigint, p_qid bigint, p_txid text,
                                            p_since timestamptz, p_floor timestamptz)
RETURNS TABLE (seen bigint) LANGUAGE sql STABLE AS $$
    SELECT queen.self_offset(p_txid, p_num)
    FROM queen._message_at(p_num, queen.self_offset(p_txid, p_num)) m
    WHERE m.txid = p_txid
      AND m.created_at > p_since AND m.created_at > p_floor AND NOT queen._dedup_off(p_qid, m.created_at)
$$;

-- _dedup_seen is a push's dedup probe of one item: the offset of the newest
-- live copy of p_txid in partition p_num (id p_pid) of queue p_qid, pushed
-- after p_since and after the queue's floor p_floor; NULL when there is none.
-- A segment's first message is found by the segments_first_key index, the
-- others by their queen.dedup row, a self-located one (migration 0015) at
-- the offset its id names; a hash match counts only when the stored
-- message has the id. One row, inlined into its callers: each probe is two
-- index lookups (three for an id in the generated form), not a function
-- call.
CREATE OR REPLACE FUNCTION queen._dedup_seen(p_num bigint, p_pid uuid, p_qid bigint, p_txid text,
                                             p_since timestamptz, p_floor timestamptz)
RETURNS TABLE (seen bigint) LANGUAGE sql STABLE AS $$
    SELECT greatest(
        (SELECT ss.seen FROM queen._self_seen(p_num, p_qid, p_txid, p_since, p_floor) ss),
        (SELECT max(fk.base_offset)
         FROM queen._first_keys(p_num, p_txid, p_since) fk
         WHERE fk.created_at > p_floor AND NOT queen._dedup_off(p_qid, fk.created_at)),
        (SELECT d.msg_offset FROM queen.dedup d
         WHERE d.key = queen.dedup_key(p_pid, p_txid)
           AND d.created_at > p_since AND d.created_at > p_floor
           AND queen._dedup_same(p_num, d.msg_offset, p_txid)
         ORDER BY d.msg_offset DESC LIMIT 1))
$$;

DROP FUNCTION IF EXISTS queen._pushed_since(bigint, bigint, bigint, timestamptz, timestamptz);

-- payload_json renders a stored payload for a reply: plain JSON text as
-- itself, a sealed payload (p_key set) as a JSON string of its base64 text,
-- which the Go core opens.
CREATE OR REPLACE FUNCTION queen.payload_json(p_payload text, p_key text)
RETURNS json LANGUAGE sql IMMUTABLE AS $$
    SELECT CASE WHEN p_key IS NULL THEN p_payload::json ELSE to_json(p_payload) END
$$;

-- The advisory key that serializes subscription creation (exclusive) with
-- pushes (shared) on one queue name.
CREATE OR REPLACE FUNCTION queen.queue_lock_key(p_queue text)
RETURNS bigint LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
    SELECT ('x' || substr(md5('queen.queue:' || p_queue), 1, 16))::bit(64)::bigint
$$;

-- _start_offset is the cursor a subscription starts at on one partition:
-- -1 (from the beginning), or just before the first message with
-- created_at >= p_from among the stored ones (just before the oldest stored
-- message when all of them are that young; the head when none is).
CREATE OR REPLACE FUNCTION queen._start_offset(p_pid uuid, p_from timestamptz)
RETURNS bigint LANGUAGE plpgsql STABLE SET plan_cache_mode = force_generic_plan SET jit = off AS $fn$
DECLARE
    v_num    bigint;
    v_last   bigint;
    v_pushed timestamptz;
    v        bigint;
BEGIN
    IF p_from IS NULL THEN
        RETURN -1;
    END IF;
    SELECT num, last_offset, last_pushed_at INTO v_num, v_last, v_pushed FROM queen.partitions WHERE id = p_pid;
    IF NOT FOUND THEN
        RETURN NULL;
    END IF;
    SELECT queen.seg_last(s.base_offset, s.txids, s.id_count) INTO v
    FROM queen.segments s
    WHERE s.partition_num = v_num AND s.created_at < p_from
    ORDER BY s.base_offset DESC LIMIT 1;
    IF FOUND THEN
        RETURN v;
    END IF;
    IF v_pushed < p_from THEN
        RETURN v_last;
    END IF;
    SELECT coalesce(min(s.base_offset) - 1, v_last) INTO v FROM queen.segments s WHERE s.partition_num = v_num;
    RETURN v;
END
$fn$;

-- group_position is a subscribed group's position on a partition, as
-- listings, lag and depth count it: its cursor (p_committed), or its
-- subscription start while it has no cursor there — and never before the
-- oldest stored message, since what retention removed cannot be read.
-- Lag is lastOffset - group_position.
CREATE OR REPLACE FUNCTION queen.group_position(p_pid uuid, p_committed bigint, p_from timestamptz)
RETURNS bigint LANGUAGE plpgsql STABLE SET plan_cache_mode = force_generic_plan SET jit = off AS $fn$
DECLARE
    v_low bigint;  -- just before the oldest stored message
BEGIN
    SELECT coalesce((SELECT min(s.base_offset) - 1 FROM queen.segments s WHERE s.partition_num = p.num),
                    p.last_offset) INTO v_low
    FROM queen.partitions p WHERE p.id = p_pid;
    RETURN greatest(coalesce(p_committed, queen._start_offset(p_pid, p_from)), v_low);
END
$fn$;

-- slowest_position is the lowest group_position on a partition of the
-- queue's subscribed groups; NULL when no group subscribes.
CREATE OR REPLACE FUNCTION queen.slowest_position(p_pid uuid, p_queue text)
RETURNS bigint LANGUAGE plpgsql STABLE SET plan_cache_mode = force_generic_plan SET jit = off AS $fn$
BEGIN
    RETURN (SELECT min(queen.group_position(p_pid, c.committed, sb.from_ts))
            FROM queen.subscriptions sb
            LEFT JOIN queen.consumers c ON c.partition_id = p_pid AND c.group_name = sb.group_name
            WHERE sb.queue_name = p_queue);
END
$fn$;

