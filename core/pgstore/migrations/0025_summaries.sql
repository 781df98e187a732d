-- 0025: summaries that cost what changed, not what is stored (depth, lag,
-- partition and message counts, dead letters per queue). See
-- docs/internals.md, "Summaries".
--
-- queen.summary_parts holds, per partition, what it adds to its queue's
-- summary: one row for the partition itself (group '', its depth) and one
-- per subscribed group (its lag there). queen.summaries holds their sums
-- per (queue, group). A partition whose state may have moved since its
-- rows were written is unfolded: a push moved its last offset or
-- retention deleted from it (partitions.dirty), or a cursor was made or its commit
-- moved (a row in queen.summary_marks); triggers set both, so every path
-- that writes those rows does. Reads add, to the stored sums, the
-- difference the unfolded partitions make now; the reaper folds them in
-- (queen._summarize_step) and clears the flags and marks of rows that did
-- not change meanwhile. Cursors carry no flag of their own: clearing it
-- would lock the cursor row, and a pop passes over a locked cursor.
--
-- The new column defaults to dirty, so every partition that exists here,
-- or that the previous release writes while this runs, is folded in by
-- the reaper's first passes (with every group's cursor on it).
ALTER TABLE queen.partitions ADD COLUMN dirty boolean NOT NULL DEFAULT true;
CREATE INDEX partitions_dirty ON queen.partitions (queue_id, num) WHERE dirty;
CREATE INDEX partitions_queue_num ON queen.partitions (queue_id, num);

-- n counts the changes, so that the fold deletes a mark only when no
-- change came after the one it read.
CREATE TABLE queen.summary_marks (
    partition_id uuid   NOT NULL,
    group_name   text   COLLATE "C" NOT NULL,
    queue_id     bigint NOT NULL,
    n            bigint NOT NULL DEFAULT 1,
    PRIMARY KEY (partition_id, group_name)
);
CREATE INDEX summary_marks_queue ON queen.summary_marks (queue_id);
ALTER TABLE queen.summary_marks SET (autovacuum_vacuum_scale_factor = 0, autovacuum_vacuum_threshold = 500,
                                     autovacuum_vacuum_cost_delay = 0);

-- (no foreign key: a check per row would lock the partition's row; a
-- queue's deletion deletes its partitions' rows)
CREATE TABLE queen.summary_parts (
    partition_num bigint NOT NULL,
    group_name    text   COLLATE "C" NOT NULL,  -- '' is the partition itself
    counted       int    NOT NULL,  -- 1 per partition (''), 1 per cursor row (group)
    messages      bigint NOT NULL,  -- messages ever pushed ('' only)
    lag           bigint NOT NULL,  -- depth (''), the group's lag (group)
    PRIMARY KEY (partition_num, group_name)
);
CREATE TABLE queen.summaries (
    queue_id   bigint NOT NULL REFERENCES queen.queues (id) ON DELETE CASCADE,
    group_name text   COLLATE "C" NOT NULL,
    partitions bigint NOT NULL DEFAULT 0,
    messages   bigint NOT NULL DEFAULT 0,
    lag        bigint NOT NULL DEFAULT 0,
    -- ('' only) partitions after this one (by num) are not folded in since
    -- the queue's groups changed; null when all are
    init_num   bigint,
    PRIMARY KEY (queue_id, group_name)
);

CREATE OR REPLACE FUNCTION queen._partition_dirty() RETURNS trigger LANGUAGE plpgsql AS $fn$
BEGIN
    NEW.dirty := true;
    RETURN NEW;
END
$fn$;
-- (retention sets the flag itself when it deletes: its first look at a
-- partition moves oldest_at without changing what the partition adds)
CREATE TRIGGER partitions_dirty BEFORE UPDATE OF last_offset ON queen.partitions
    FOR EACH ROW WHEN (NOT OLD.dirty AND OLD.last_offset IS DISTINCT FROM NEW.last_offset)
    EXECUTE FUNCTION queen._partition_dirty();
CREATE OR REPLACE FUNCTION queen._cursor_moved() RETURNS trigger LANGUAGE plpgsql AS $fn$
BEGIN
    INSERT INTO queen.summary_marks (partition_id, group_name, queue_id)
    VALUES (NEW.partition_id, NEW.group_name, NEW.queue_id)
    ON CONFLICT (partition_id, group_name) DO UPDATE SET n = queen.summary_marks.n + 1;
    RETURN NULL;
END
$fn$;
CREATE TRIGGER consumers_made AFTER INSERT ON queen.consumers
    FOR EACH ROW EXECUTE FUNCTION queen._cursor_moved();
CREATE TRIGGER consumers_moved AFTER UPDATE OF committed ON queen.consumers
    FOR EACH ROW WHEN (OLD.committed IS DISTINCT FROM NEW.committed)
    EXECUTE FUNCTION queen._cursor_moved();

-- Dead letters per queue, kept by statement triggers in one of eight
-- stripes (by backend), so that dead-lettering sessions rarely wait for
-- each other on a counter row.
CREATE TABLE queen.dlq_counts (
    queue_name text   NOT NULL,
    stripe     int    NOT NULL,
    n          bigint NOT NULL,
    PRIMARY KEY (queue_name, stripe)
);
INSERT INTO queen.dlq_counts (queue_name, stripe, n)
SELECT queue_name, 0, count(*) FROM queen.dlq GROUP BY queue_name;

CREATE OR REPLACE FUNCTION queen._dlq_counted() RETURNS trigger LANGUAGE plpgsql AS $fn$
BEGIN
    IF TG_OP = 'INSERT' THEN
        INSERT INTO queen.dlq_counts (queue_name, stripe, n)
        SELECT queue_name, pg_backend_pid() % 8, count(*) FROM dlq_new GROUP BY queue_name
        ON CONFLICT (queue_name, stripe) DO UPDATE SET n = queen.dlq_counts.n + excluded.n;
    ELSE
        INSERT INTO queen.dlq_counts (queue_name, stripe, n)
        SELECT queue_name, pg_backend_pid() % 8, -count(*) FROM dlq_old GROUP BY queue_name
        ON CONFLICT (queue_name, stripe) DO UPDATE SET n = queen.dlq_counts.n + excluded.n;
    END IF;
    RETURN NULL;
END
$fn$;
CREATE TRIGGER dlq_counted_insert AFTER INSERT ON queen.dlq REFERENCING NEW TABLE AS dlq_new
    FOR EACH STATEMENT EXECUTE FUNCTION queen._dlq_counted();
CREATE TRIGGER dlq_counted_delete AFTER DELETE ON queen.dlq REFERENCING OLD TABLE AS dlq_old
    FOR EACH STATEMENT EXECUTE FUNCTION queen._dlq_counted();
