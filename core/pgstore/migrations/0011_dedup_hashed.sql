-- 0011: dedup keys as 8-byte hashes of (partition, transactionId).
--
-- A key was its transactionId text (37 bytes for a UUID) and its partition
-- id in the row and again in the primary key: ~190 bytes per message, more
-- than the rest of the log for small payloads. Now a row holds the hash,
-- the offset and the time: ~80 bytes with its index entry. A hash is not exact by itself: a push that
-- finds a live key with its hash checks the stored message at that offset
-- carries its transactionId (queen._dedup_same), so two ids that share a
-- hash are never taken for each other. There is no unique constraint: the
-- partition's lock serializes the pushes that could write the same key, a
-- key written again after its window leaves the old row to the reaper, and
-- a probe takes the newest live row.
CREATE FUNCTION queen.dedup_key(p_pid uuid, p_txid text)
RETURNS bigint LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
    SELECT hashtextextended(p_pid::text || p_txid, 0)  -- the uuid text has a fixed length
$$;

ALTER TABLE queen.dedup RENAME TO dedup_v1;
CREATE TABLE queen.dedup (
    key        bigint      NOT NULL,  -- queen.dedup_key(partition, transactionId)
    msg_offset bigint      NOT NULL,
    created_at timestamptz NOT NULL
);
INSERT INTO queen.dedup (key, msg_offset, created_at)
SELECT queen.dedup_key(d.partition_id, d.transaction_id), d.msg_offset, d.created_at
FROM queen.dedup_v1 d
ORDER BY d.created_at;
DROP TABLE queen.dedup_v1;
CREATE INDEX dedup_key ON queen.dedup (key);
-- Keys arrive in created_at order, so a BRIN index serves the pruning.
CREATE INDEX dedup_created_at ON queen.dedup USING brin (created_at);

-- A key row does not know its queue, so the reaper removes rows only once
-- they are past every queue's window. A queue's keys past its own window
-- are out of every probe all the same (created_at > now - window), and
-- stay out if its window later grows: the reaper records when it last ran,
-- and a configure that changes the window moves the queue's floor to that
-- time minus the old window, so the keys the reaper took out under the old
-- window (as the model prunes them) never come back.
CREATE TABLE queen.reaper (
    one       boolean     PRIMARY KEY DEFAULT true CHECK (one),
    last_reap timestamptz NOT NULL
);
CREATE TABLE queen.dedup_floor (
    queue_id bigint      PRIMARY KEY REFERENCES queen.queues (id) ON DELETE CASCADE,
    floor    timestamptz NOT NULL
);
