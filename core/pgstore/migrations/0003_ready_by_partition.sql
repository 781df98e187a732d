-- 0003: look a ready row up by its partition. The primary key leads with
-- queue_id, like the scan index (queue_id, group_name, order_key), and the
-- planner may take the scan index for a key lookup — a walk over every
-- ready row of the group. Lookups by (partition_id, group_name) use this
-- index, which nothing else matches.
CREATE UNIQUE INDEX ready_partition ON queen.ready (partition_id, group_name);

-- Every rotation and every removal leaves a dead index entry at the low end
-- of ready_scan, where each wildcard pop starts; vacuum the table as soon as
-- a few hundred have gathered instead of after 20 % of it.
ALTER TABLE queen.ready SET (autovacuum_vacuum_scale_factor = 0, autovacuum_vacuum_threshold = 500,
                             autovacuum_vacuum_cost_delay = 0);
