-- 0009: wildcard pops go round a group's ready set from where its last pop
-- stopped instead of starting at the lowest order key every time. A claim
-- no longer moves its row to the end (a new index entry, and a dead one at
-- the front, on every pop); rows keep the key they were scheduled with, and
-- this row remembers the key each (queue, group) reached. The index entries
-- of partitions consumed since (dead until VACUUM) then lie behind the
-- position, not in front of every pop. Only a hint: a pop that cannot lock
-- it without waiting leaves it to the next one.
CREATE TABLE queen.ready_cursor (
    queue_id   bigint NOT NULL,
    group_name text   COLLATE "C" NOT NULL,
    pos        bigint NOT NULL,
    PRIMARY KEY (queue_id, group_name)
) WITH (fillfactor = 50);
