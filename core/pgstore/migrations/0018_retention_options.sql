-- 0018: Queen's retention options kept as they were given, so configure
-- echoes each as sent. ttl and maxWaitTimeSeconds delete messages older
-- than that, as retentionSeconds does (0: not set; the smallest set one
-- applies); retention_enabled false keeps the windows but applies none
-- (NULL: never given, they apply). The reaper reads the effective windows
-- from queen.retention_keep.
ALTER TABLE queen.queues
    ADD COLUMN ttl                   integer NOT NULL DEFAULT 0,
    ADD COLUMN max_wait_time_seconds integer NOT NULL DEFAULT 0,
    ADD COLUMN retention_enabled     boolean;
