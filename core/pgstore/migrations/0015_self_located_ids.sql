-- 0015: transactionIds the engine generates say where their message is.
--
-- A push item without a transactionId gets one generated under its
-- partition's lock (queen.self_id), once its offset is known: a UUIDv7 of
-- the push's millisecond whose last 15 hex digits end with the partition's
-- number and the message's offset, and whose digits after the version
-- digit 7 are the marker "a" and how many digits each of the two takes
-- (random digits fill the rest). Two messages never get the same one: no
-- two share partition and offset. A message whose transactionId names its
-- own partition and offset this way is "self-located": a probe finds it by
-- reading that offset (queen._self_seen), so it needs no dedup key — no
-- queen.dedup row and no segments_first_key entry — and a push that
-- generates its ids probes nothing for them (each is new: its offset is).
-- Which messages are self-located is read from the id, the partition and
-- the offset alone, so an id a client sends that happens to name its own
-- place is found the same way, and every other id keeps its key as before.

-- _self_offset reads the offset from the id's last 15 digits p_digits, of
-- which the last p_k are the offset and the p_j before them the partition
-- number (p_k and p_j 0: the id's digits for them were not 1-f). No
-- regular expression and no cast before the digits are known to be hex:
-- it runs for every segment a push writes (the index's predicate).
CREATE FUNCTION queen._self_offset(p_digits text, p_k int, p_j int, p_num bigint)
RETURNS bigint LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
    SELECT CASE WHEN p_k > 0 AND p_j > 0 AND p_k + p_j <= 15
                     AND substr(p_digits, 16 - p_k - p_j, p_j) = to_hex(p_num)
                     AND ltrim(right(p_digits, p_k), '0123456789abcdef') = ''
                THEN ('x' || lpad(right(p_digits, p_k), 16, '0'))::bit(64)::bigint END
$$;

-- self_offset is the offset a transactionId names in partition number
-- p_num, or NULL when it names none there (an id not in the generated
-- form, or generated for another partition). The form:
--   xxxxxxxx-xxxx-7aKJ-Vrrr-rrrrrrrrrrrr
-- K and J (1-f): how many of the last 15 hex digits (the r, the dash left
-- out) the offset and the partition number take, the offset last (at most
-- 15 together); V: the variant. The rest is not checked: a message is
-- self-located when its id names its own place, read this one way by the
-- pushes (no key), the index (no entry) and the probes (found there).
CREATE FUNCTION queen.self_offset(p_txid text, p_num bigint)
RETURNS bigint LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
    SELECT CASE WHEN substr(p_txid, 15, 2) = '7a' AND length(p_txid) = 36 THEN
        queen._self_offset(right(replace(p_txid, '-', ''), 15), strpos('123456789abcdef', substr(p_txid, 17, 1)),
                           strpos('123456789abcdef', substr(p_txid, 18, 1)), p_num)
    END
$$;

-- The first key of a segment whose first message is self-located is not a
-- key: such segments leave the index (a probe reads their offset instead).
-- The index is built again, and pushes wait for it: 3.3 s for a log of
-- 3 million segments on the 2-core development machine.
DROP INDEX queen.segments_first_key;
CREATE INDEX segments_first_key
    ON queen.segments (queen.first_key(partition_num, coalesce(txid, txids[1])), queen.minute_of(created_at))
    WHERE queen.self_offset(coalesce(txid, txids[1]), partition_num) IS DISTINCT FROM base_offset;
