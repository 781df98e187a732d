-- 0016: a segment says itself whether its first message is self-located.
--
-- The first-key index left out segments whose first message is
-- self-located (0015) by a predicate that read the id back
-- (queen.self_offset): Postgres copies and sets up an index's predicate for
-- every insert statement and evaluates it for every row. For one segment
-- that took ~23 µs of a ~100 µs one-message push (a bare insert into a copy
-- of the table: 35 µs against 12 µs with the predicate below), and a
-- 100-row insert 632 µs against 380 µs, inside the partition locks. The
-- pushes know which ids they made, so they now say it: located is true
-- when the first message's transactionId names this partition and base
-- offset (queen.self_located), and NULL otherwise, which costs no byte.
--
-- Segments stored before this migration have no value and are in the
-- index, including the self-located ones since 0015: an entry too many is
-- never a wrong duplicate (a probe checks the segment it finds), and they
-- leave with retention. Adding the column writes nothing; the index is
-- built again, and pushes wait for it (3.3 s for 3 million segments in
-- 0015, on the 2-core development machine).
ALTER TABLE queen.segments ADD COLUMN located boolean;

DROP INDEX queen.segments_first_key;
CREATE INDEX segments_first_key
    ON queen.segments (queen.first_key(partition_num, coalesce(txid, txids[1])), queen.minute_of(created_at))
    WHERE located IS NULL;
