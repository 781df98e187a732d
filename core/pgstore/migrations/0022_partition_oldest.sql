-- 0022: retention in time proportional to what is due (docs/internals.md,
-- the reaper). oldest_at is when a partition's oldest stored segment was
-- written, as far as retention knows: null when the partition stores
-- nothing, '-infinity' when a push wrote to it since retention last looked
-- (retention then reads its first segment and keeps the exact time). Since
-- a partition's segments are written in time order, its due segments are
-- a prefix, and partitions_oldest finds the partitions with anything due
-- without visiting the others. Pushes set it only when it is null, in the
-- row update they already make, so their updates stay HOT.
-- Every partition that was ever pushed to is marked for a first look; a
-- partition first pushed to by the previous release while this runs is
-- marked by its next push.
ALTER TABLE queen.partitions ADD COLUMN oldest_at timestamptz;
UPDATE queen.partitions SET oldest_at = '-infinity' WHERE last_offset >= 0;
CREATE INDEX partitions_oldest ON queen.partitions (queue_id, oldest_at, num) WHERE oldest_at IS NOT NULL;
-- Where completed retention's visits stopped (it goes round the partitions
-- old enough to be due, a batch at a time): see queen._reap_segments.
ALTER TABLE queen.reaper ADD COLUMN completed_at timestamptz, ADD COLUMN completed_num bigint;
