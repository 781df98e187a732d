-- 0023: dead letters are kept for dlqRetentionSeconds (0: the deployment's
-- default, QUEEN_DEFAULT_DLQ_RETENTION_SECONDS, 14 days unless set), by
-- when they were dead-lettered. The reaper removes them queue by queue
-- through dlq_queue (queue_name, failed_at), in time proportional to what
-- is due (queen._reap_dlq).
ALTER TABLE queen.queues ADD COLUMN dlq_retention_seconds integer NOT NULL DEFAULT 0;
