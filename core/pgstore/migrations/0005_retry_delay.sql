-- 0005: retryDelay (Queen's option, in milliseconds). After a failed or
-- retry ack ends a batch, or an expired lease charges an attempt, the
-- partition is not delivered to that group again before retry_at.
ALTER TABLE queen.queues ADD COLUMN retry_delay_ms integer NOT NULL DEFAULT 0;
ALTER TABLE queen.consumers ADD COLUMN retry_at timestamptz;
