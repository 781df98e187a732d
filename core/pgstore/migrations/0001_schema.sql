-- 0001: the log, the cursors and the dead-letter table.
--
-- There is no per-message row: a push writes one segment row per partition,
-- and consumption state is one consumers row per (partition, group).

CREATE SCHEMA IF NOT EXISTS queen;

-- Names and keys are compared byte-wise (COLLATE "C") whatever the
-- database's locale: exact matching is all the model needs, and it is the
-- fastest comparison.

CREATE TABLE queen.queues (
    id                          bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    name                        text        COLLATE "C" NOT NULL UNIQUE,
    namespace                   text,
    task                        text,
    lease_time                  integer     NOT NULL DEFAULT 300,
    retry_limit                 integer     NOT NULL DEFAULT 3,
    dedup_window                integer     NOT NULL DEFAULT 3600,
    delayed_processing          integer     NOT NULL DEFAULT 0,
    window_buffer               integer     NOT NULL DEFAULT 0,
    max_size                    bigint      NOT NULL DEFAULT 0,
    retention_seconds           integer     NOT NULL DEFAULT 0,
    completed_retention_seconds integer     NOT NULL DEFAULT 0,
    encryption_enabled          boolean     NOT NULL DEFAULT false,
    priority                    integer     NOT NULL DEFAULT 0,
    created_at                  timestamptz NOT NULL,
    updated_at                  timestamptz NOT NULL
);

-- One row per partition. last_offset is bumped under this row's FOR UPDATE
-- lock, so offset order is commit order (invariant 1).
CREATE TABLE queen.partitions (
    id             uuid        PRIMARY KEY,
    queue_id       bigint      NOT NULL REFERENCES queen.queues (id) ON DELETE CASCADE,
    name           text        COLLATE "C" NOT NULL,
    last_offset    bigint      NOT NULL DEFAULT -1,
    last_pushed_at timestamptz,
    created_at     timestamptz NOT NULL,
    UNIQUE (queue_id, name)
) WITH (fillfactor = 50);  -- room for HOT updates of last_offset

-- One row per push per partition: offsets base_offset .. base_offset+n-1.
-- payloads holds each message's JSON text exactly as pushed.
-- The hot tables (segments, dedup, ready) carry no foreign keys: a push
-- writes them under the partition's lock, and deletes remove them explicitly.
CREATE TABLE queen.segments (
    partition_id uuid        NOT NULL,
    base_offset  bigint      NOT NULL,
    created_at   timestamptz NOT NULL,
    txids        text[]      NOT NULL,
    payloads     text[]      NOT NULL,
    trace_ids    text[],
    PRIMARY KEY (partition_id, base_offset)
);

-- Exact, windowed dedup keys (invariant 4). Pruned by the reaper.
CREATE TABLE queen.dedup (
    partition_id   uuid        NOT NULL,
    transaction_id text        COLLATE "C" NOT NULL,
    msg_offset     bigint      NOT NULL,
    created_at     timestamptz NOT NULL,
    -- transactionId first: generated ids are UUIDv7, time-ordered, so
    -- inserts land at the right edge of the index instead of all over it.
    PRIMARY KEY (transaction_id, partition_id)
);
-- Keys arrive in created_at order, so a BRIN index serves the pruning at
-- almost no cost per push.
CREATE INDEX dedup_created_at ON queen.dedup USING brin (created_at);

-- A consumer group's subscription to a queue, remembered on its first pop.
-- Keyed by queue name so a consumer may subscribe before the queue exists.
CREATE TABLE queen.subscriptions (
    queue_name text        COLLATE "C" NOT NULL,
    group_name text        COLLATE "C" NOT NULL,
    mode       text        NOT NULL,
    from_ts    timestamptz,
    created_at timestamptz NOT NULL,
    PRIMARY KEY (queue_name, group_name)
);
CREATE INDEX subscriptions_group ON queen.subscriptions (group_name);

-- The cursor: one row per (partition, group) (invariants 2 and 3).
-- committed: last completed offset (-1 = none). delivered: highest offset
-- ever handed out (acks beyond it are rejected). attempts: failed attempts
-- of the head message (committed + 1). head_only: after a lease expiry the
-- head is delivered alone until it is resolved.
CREATE TABLE queen.consumers (
    partition_id     uuid        NOT NULL REFERENCES queen.partitions (id) ON DELETE CASCADE,
    group_name       text        COLLATE "C" NOT NULL,
    queue_id         bigint      NOT NULL,
    committed        bigint      NOT NULL,
    delivered        bigint      NOT NULL,
    attempts         integer     NOT NULL DEFAULT 0,
    head_only        boolean     NOT NULL DEFAULT false,
    batch_end        bigint,
    lease_id         uuid,
    lease_expires_at timestamptz,
    worker_id        text,
    updated_at       timestamptz NOT NULL,
    PRIMARY KEY (partition_id, group_name)
) WITH (fillfactor = 50);
CREATE INDEX consumers_lease_id ON queen.consumers (lease_id) WHERE lease_id IS NOT NULL;
CREATE INDEX consumers_lease_expiry ON queen.consumers (lease_expires_at) WHERE lease_id IS NOT NULL;
CREATE INDEX consumers_group ON queen.consumers (group_name, queue_id);

-- Scheduling: a row exists while a partition may hold messages a group has
-- not consumed. Pushes upsert it, pops take it in round-robin order
-- (order_key) and delete it once the partition is consumed, so a wildcard
-- pop never looks at idle or fully consumed partitions.
CREATE SEQUENCE queen.ready_order;
CREATE TABLE queen.ready (
    queue_id     bigint NOT NULL,
    group_name   text   COLLATE "C" NOT NULL,
    partition_id uuid   NOT NULL,
    order_key    bigint NOT NULL,
    version      bigint NOT NULL DEFAULT 0,
    PRIMARY KEY (queue_id, group_name, partition_id)
) WITH (fillfactor = 70);
CREATE INDEX ready_scan ON queen.ready (queue_id, group_name, order_key);

-- The dead-letter table: a real copy that survives retention of the log.
CREATE TABLE queen.dlq (
    id             bigint      GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    queue_name     text        NOT NULL,
    partition_name text        NOT NULL,
    partition_id   uuid        NOT NULL,
    msg_offset     bigint      NOT NULL,
    message_id     uuid        NOT NULL,
    transaction_id text        NOT NULL,
    payload        text        NOT NULL,
    trace_id       text,
    consumer_group text        NOT NULL,
    error          text,
    attempts       integer     NOT NULL,
    created_at     timestamptz NOT NULL,
    failed_at      timestamptz NOT NULL
);
CREATE INDEX dlq_address ON queen.dlq (partition_id, transaction_id);
CREATE INDEX dlq_queue ON queen.dlq (queue_name, failed_at);
