-- 0020: subscriptions that deliver a (queue, consumer group) to a target by
-- themselves (docs/subscriptions.md): a Lambda function or an HTTP
-- endpoint, exactly one. The group's cursors stay in queen.consumers, as
-- for a pulling group; this row holds the target, the delivery options and
-- the counters the API and the console show. wake_pending is the wake-up
-- handshake: a push sets it, and only a push that finds it clear wakes a
-- dispatcher, which clears it before its last read of the backlog.
CREATE TABLE queen.subscription_targets (
    queue_name       text        NOT NULL,
    group_name       text        NOT NULL,
    target_function  text,
    target_url       text,
    batch_size       integer     NOT NULL,
    max_batch_bytes  integer     NOT NULL,
    batch_window_ms  integer     NOT NULL,
    max_concurrency  integer     NOT NULL,
    enabled          boolean     NOT NULL,
    created_at       timestamptz NOT NULL,
    updated_at       timestamptz NOT NULL,
    delivered        bigint      NOT NULL DEFAULT 0,
    last_delivery_at timestamptz,
    last_error       text,
    last_error_at    timestamptz,
    wake_pending     boolean     NOT NULL DEFAULT false,
    PRIMARY KEY (queue_name, group_name),
    CHECK ((target_function IS NULL) <> (target_url IS NULL))
);
