-- 0014: a smaller log row.
--
-- When a push spreads its items over many partitions, most segments hold
-- one message, and such a segment cost ~210 bytes beyond its payload and
-- transactionId (D with random partitions): the partition's 16-byte uuid
-- in the row and again in the primary key, two one-element arrays (~25
-- bytes of array header each), and a 16-byte first-key index entry. Now:
-- * a segment names its partition by partitions.num, a bigint;
-- * a segment of one message keeps it in scalar columns (txid, payload),
--   a segment of several in arrays (txids, payloads) as before;
--   queen.seg_all reads either as an array;
-- * its first-key index entry (migration 0012) is a 4-byte hash of the
--   partition and first transactionId and the 4-byte minute of the push.
--   The hash is narrower than queen.dedup's 8 bytes, which costs nothing
--   but a rare extra look at a segment: a probe checks the segment it
--   finds by its partition and first transactionId.
-- The table is rewritten: pushes and pops wait for this migration.

ALTER TABLE queen.partitions ADD COLUMN num bigint GENERATED ALWAYS AS IDENTITY;
CREATE UNIQUE INDEX partitions_num ON queen.partitions (num);

-- first_key is the hash a segment's first message is found by.
CREATE FUNCTION queen.first_key(p_num bigint, p_txid text)
RETURNS int LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
    SELECT hashtext(p_num::text || ':' || p_txid)
$$;

-- minute_of is a push's minute since 1970 (a push's time is finite and
-- before the year 6000), which bounds a first-key probe to its window. It
-- is kept small: an index expression is set up again for every insert
-- statement. queen._minute_bound takes any time.
CREATE FUNCTION queen.minute_of(p_at timestamptz)
RETURNS int LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
    SELECT floor(date_part('epoch', p_at - timestamptz '1970-01-01 00:00:00+00') / 60)::int
$$;

ALTER TABLE queen.segments RENAME TO segments_v1;
ALTER INDEX queen.segments_pkey RENAME TO segments_v1_pkey;
DROP INDEX queen.segments_first_key;

-- One row per push per partition: offsets base_offset .. base_offset+n-1.
-- A payload is its JSON text exactly as pushed (a sealed one: its base64
-- text, key_id naming the key).
CREATE TABLE queen.segments (
    partition_num bigint      NOT NULL,  -- queen.partitions.num
    base_offset   bigint      NOT NULL,
    created_at    timestamptz NOT NULL,
    txid          text,    -- one message: its transactionId and payload
    payload       text,
    txids         text[],  -- several: theirs, in offset order
    payloads      text[],
    trace_ids     text[],  -- NULL, or one per message (NULL elements allowed)
    producer_sub  text,
    key_id        text     -- (either txid and payload or txids and payloads: no CHECK, which
                           -- Postgres would parse and plan again for every push)
);
INSERT INTO queen.segments (partition_num, base_offset, created_at, txid, payload, txids, payloads, trace_ids,
                            producer_sub, key_id)
SELECT p.num, s.base_offset, s.created_at,
       CASE WHEN cardinality(s.txids) = 1 THEN s.txids[1] END,
       CASE WHEN cardinality(s.txids) = 1 THEN s.payloads[1] END,
       CASE WHEN cardinality(s.txids) > 1 THEN s.txids END,
       CASE WHEN cardinality(s.txids) > 1 THEN s.payloads END,
       s.trace_ids, s.producer_sub, s.key_id
FROM queen.segments_v1 s
JOIN queen.partitions p ON p.id = s.partition_id;  -- a segment of a deleted queue has no partition left
DROP TABLE queen.segments_v1;
ALTER TABLE queen.segments ADD PRIMARY KEY (partition_num, base_offset);
CREATE INDEX segments_first_key
    ON queen.segments (queen.first_key(partition_num, coalesce(txid, txids[1])), queen.minute_of(created_at));
