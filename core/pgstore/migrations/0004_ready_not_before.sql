-- 0004: a ready row remembers when its partition can next be deliverable,
-- learned by the pop that found it waiting (delayedProcessing: its head's
-- age; windowBuffer: its newest message's age). Wildcard pops pass such rows
-- over until then, so waiting partitions never use up the scan budget and
-- cannot hide a deliverable one behind them. The time is a lower bound:
-- pushes only move the window later and acks only move the head forward;
-- a seek or a change of those options clears it.
ALTER TABLE queen.ready ADD COLUMN not_before timestamptz;
ALTER TYPE queen.claim ADD ATTRIBUTE not_before timestamptz;

-- The version column was never used.
ALTER TABLE queen.ready DROP COLUMN version;
