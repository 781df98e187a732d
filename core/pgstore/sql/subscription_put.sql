-- $1 queue, $2 group, $3 target function, $4 target url (one of them null),
-- $5 batch size, $6 max batch bytes, $7 batch window (ms), $8 max
-- concurrency, $9 enabled, $10 now (null: the database clock). A
-- subscription's counters and creation time survive a new definition.
INSERT INTO queen.subscription_targets AS t
    (queue_name, group_name, target_function, target_url, batch_size, max_batch_bytes, batch_window_ms,
     max_concurrency, enabled, created_at, updated_at)
VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, coalesce($10::timestamptz, now()), coalesce($10::timestamptz, now()))
ON CONFLICT (queue_name, group_name) DO UPDATE
SET target_function = EXCLUDED.target_function, target_url = EXCLUDED.target_url,
    batch_size = EXCLUDED.batch_size, max_batch_bytes = EXCLUDED.max_batch_bytes,
    batch_window_ms = EXCLUDED.batch_window_ms, max_concurrency = EXCLUDED.max_concurrency,
    enabled = EXCLUDED.enabled, updated_at = EXCLUDED.updated_at
RETURNING row_to_json(t)
