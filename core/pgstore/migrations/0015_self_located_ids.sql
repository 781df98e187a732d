-- 0015: transactionIds the engine generates carry their own offset.
--
-- A push item without a transactionId gets one generated under its
-- partition's lock (queen.self_id), once its offset is known: a UUIDv7
-- whose version digit is followed by the marker "a1" and whose last 11 hex
-- digits are the offset (offsets below 2^44; the rest of the id is the
-- push's millisecond and 22 random bits). A message whose transactionId
-- names its own offset this way is "self-located": a probe finds it by
-- reading that offset (queen._self_seen), so it needs no dedup key — no
-- queen.dedup row and no segments_first_key entry — and a push that
-- generates its ids probes nothing for them (each is new: its offset is).
-- Which messages are self-located is read from the id and the offset
-- alone, so an id a client sends that happens to name its own offset is
-- found the same way, and every other id keeps its key as before.

-- self_offset is the offset a transactionId names, or NULL when it names
-- none (an id not in the generated form).
CREATE FUNCTION queen.self_offset(p_txid text)
RETURNS bigint LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
    SELECT CASE WHEN substr(p_txid, 15, 3) = '7a1' AND length(p_txid) = 36 AND substr(p_txid, 26) ~ '^[0-9a-f]{11}$'
                THEN ('x' || lpad(substr(p_txid, 26), 16, '0'))::bit(64)::bigint END
$$;

-- The first key of a segment whose first message is self-located is not a
-- key: such segments leave the index (a probe reads their offset instead).
-- The index is built again, and pushes wait for it: 3.3 s for a log of
-- 3 million segments on the 2-core development machine.
DROP INDEX queen.segments_first_key;
CREATE INDEX segments_first_key
    ON queen.segments (queen.first_key(partition_num, coalesce(txid, txids[1])), queen.minute_of(created_at))
    WHERE queen.self_offset(coalesce(txid, txids[1])) IS DISTINCT FROM base_offset;
