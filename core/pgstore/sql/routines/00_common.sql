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

-- Performance notes (see README, Benchmarks):
-- * Every lookup is by key (scalar subqueries, LATERAL, = ANY on a primary
--   key), so no statement's cost grows with the number of queues,
--   partitions, dedup keys or idle cursors. Functions run with
--   plan_cache_mode = force_generic_plan: custom plans of the push CTE cost
--   ~10 ms to plan, generic plans are reused per connection.
-- * A push in the steady state is five statements: read the items, lock
--   the queue names (shared advisory), look up and lock the partitions (by
--   key, in order), write.
--   Per message it probes and inserts one dedup key (transactionId first,
--   so UUIDv7 keys append at the index edge; BRIN on created_at for
--   pruning); per partition it inserts one segment and HOT-updates one row.
-- * Measured on 2 cores: a 1-message push costs ~0.45 ms of backend time
--   against ~0.1 ms for a bare INSERT, and a 100-message push to 100
--   partitions ~9 ms (300 row writes). That, not locking, is why the push
--   targets of SPEC §7 are missed; the next steps would be a single-item
--   fast path and fewer row writes per partition.

-- A message's id is derived from its address, so it costs no storage.
CREATE OR REPLACE FUNCTION queen.message_id(p_pid uuid, p_off bigint)
RETURNS uuid LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
    SELECT md5(p_pid::text || ':' || p_off::text)::uuid
$$;

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
RETURNS bigint LANGUAGE sql STABLE AS $$
    SELECT CASE WHEN p_from IS NULL THEN -1 ELSE coalesce(
        (SELECT s.base_offset + cardinality(s.txids) - 1
         FROM queen.segments s
         WHERE s.partition_id = p_pid AND s.created_at < p_from
         ORDER BY s.base_offset DESC LIMIT 1),
        (SELECT CASE WHEN p.last_pushed_at < p_from THEN p.last_offset
                     ELSE coalesce((SELECT min(s.base_offset) - 1 FROM queen.segments s
                                    WHERE s.partition_id = p_pid), p.last_offset) END
         FROM queen.partitions p WHERE p.id = p_pid)) END
$$;

-- group_position is a subscribed group's position on a partition, as
-- listings, lag and depth count it: its cursor (p_committed), or its
-- subscription start while it has no cursor there — and never before the
-- oldest stored message, since what retention removed cannot be read.
-- Lag is lastOffset - group_position.
CREATE OR REPLACE FUNCTION queen.group_position(p_pid uuid, p_committed bigint, p_from timestamptz)
RETURNS bigint LANGUAGE sql STABLE AS $$
    SELECT greatest(coalesce(p_committed, queen._start_offset(p_pid, p_from)),
                    coalesce((SELECT min(s.base_offset) - 1 FROM queen.segments s WHERE s.partition_id = p_pid),
                             (SELECT p.last_offset FROM queen.partitions p WHERE p.id = p_pid)))
$$;

-- slowest_position is the lowest group_position on a partition of the
-- queue's subscribed groups; NULL when no group subscribes.
CREATE OR REPLACE FUNCTION queen.slowest_position(p_pid uuid, p_queue text)
RETURNS bigint LANGUAGE sql STABLE AS $$
    SELECT min(queen.group_position(p_pid, c.committed, sb.from_ts))
    FROM queen.subscriptions sb
    LEFT JOIN queen.consumers c ON c.partition_id = p_pid AND c.group_name = sb.group_name
    WHERE sb.queue_name = p_queue
$$;

-- Unconsumed messages of a queue (what maxSize caps): per partition, the
-- stored messages after the slowest subscribed group's position; all
-- stored messages when no group subscribes. Messages removed by retention
-- do not count.
CREATE OR REPLACE FUNCTION queen.queue_depth(p_queue_id bigint)
RETURNS bigint LANGUAGE sql STABLE AS $$
    SELECT coalesce(sum(p.last_offset - coalesce(queen.slowest_position(p.id, x.name),
                                                 queen.group_position(p.id, -1, NULL))), 0)::bigint
    FROM queen.partitions p JOIN queen.queues x ON x.id = p.queue_id
    WHERE p.queue_id = p_queue_id
$$;

