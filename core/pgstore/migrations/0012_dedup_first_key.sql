-- 0012: the dedup key of a segment's first message is the segment itself.
--
-- A push to one partition of one message, or a push whose items are spread
-- over many partitions, writes one segment per message; each also wrote a
-- dedup row (heap tuple and index entry, ~80 bytes and two inserts). Now
-- the key of the first message of every segment is an index entry on
-- segments (the same 8-byte hash, queen.dedup_key), and queen.dedup holds
-- the keys of the others. A probe looks at both and checks a segment it
-- finds by its partition and first transactionId, so a hash collision is
-- never taken for a duplicate.
-- With the time, so a probe reads only the entries inside its window, and
-- an id that is reused again and again costs no more than one that is not.
CREATE INDEX segments_first_key ON queen.segments (queen.dedup_key(partition_id, txids[1]), created_at);

-- The index holds the first key of every segment, also of pushes made
-- while the queue's window was 0, which recorded no key. This table keeps
-- a queue's periods without dedup, [since, until), and a probe ignores a
-- segment pushed in one. Segments older than this migration had dedup rows
-- for all their keys, so their first keys are left out the same way.
CREATE TABLE queen.dedup_off (
    queue_id bigint      NOT NULL REFERENCES queen.queues (id) ON DELETE CASCADE,
    since    timestamptz NOT NULL,
    until    timestamptz
);
CREATE INDEX dedup_off_queue ON queen.dedup_off (queue_id);
INSERT INTO queen.dedup_off (queue_id, since, until)
SELECT x.id, '-infinity', CASE WHEN x.dedup_window > 0 THEN clock_timestamp() END
FROM queen.queues x;

-- The cutoff of the reaper's last pruning of key rows: no key row newer
-- than it was removed (queen._locate_beyond relies on it).
ALTER TABLE queen.reaper ADD COLUMN dedup_cutoff timestamptz;

-- When the queue's window was last changed: a change moves the floor only
-- by a reap that ran under the window it replaces (see configure).
ALTER TABLE queen.dedup_floor ADD COLUMN window_since timestamptz;
