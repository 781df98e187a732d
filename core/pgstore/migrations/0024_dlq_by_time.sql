-- 0024: the DLQ listing pages newest first; without a queue filter it had
-- no index in that order, and sorted every dead letter for each page.
CREATE INDEX dlq_failed ON queen.dlq (failed_at, id);
