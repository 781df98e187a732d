-- 0019: updates of a cursor row touch no index, so PostgreSQL makes them
-- HOT: the new version goes on the row's own page and the old one is
-- pruned there, without waiting for VACUUM. A pop and its ack each update
-- the cursor; while lease_id and lease_expires_at were indexed, every one
-- of those updates added entries to all four indexes and a row version
-- wherever the free space map pointed, and the table grew with every
-- minute VACUUM could not run (a long transaction is enough).
--
-- queen.leases now indexes the live leases instead: a pop inserts a row
-- per partition it leases, the release of the lease deletes it. The
-- cursor row stays the truth (lease_id, lease_expires_at, batch_end);
-- a leases row whose cursor no longer holds its lease is stale, and the
-- reaper deletes it once it is due. Every live lease has its row, so the
-- reaper finds expired leases by expires_at, and extending a lease or a
-- transaction's requiredLeases find a lease by its id.
CREATE TABLE queen.leases (
    lease_id     uuid        NOT NULL,
    partition_id uuid        NOT NULL,
    group_name   text        COLLATE "C" NOT NULL,
    expires_at   timestamptz NOT NULL,
    PRIMARY KEY (lease_id, partition_id, group_name)
);
CREATE INDEX leases_expiry ON queen.leases (expires_at);

INSERT INTO queen.leases (lease_id, partition_id, group_name, expires_at)
SELECT lease_id, partition_id, group_name, lease_expires_at
FROM queen.consumers WHERE lease_id IS NOT NULL;

DROP INDEX queen.consumers_lease_id;
DROP INDEX queen.consumers_lease_expiry;

-- The lease a pop takes gets its row in the same transaction as this
-- migration, so no lease taken between this migration and the routines
-- that follow it goes without one (the routines re-create this function
-- as it is here).
CREATE OR REPLACE FUNCTION queen._claim_take(q queen.queues, p_pid uuid, p_group text, p_end bigint,
                                              p_auto boolean, p_lease uuid, p_worker text, p_now timestamptz)
RETURNS void LANGUAGE plpgsql SET plan_cache_mode = force_generic_plan SET jit = off AS $fn$
BEGIN
    IF p_auto THEN
        UPDATE queen.consumers
        SET committed = p_end, delivered = greatest(delivered, p_end), attempts = 0,
            head_only = false, retry_at = NULL, updated_at = p_now
        WHERE partition_id = p_pid AND group_name = p_group;
    ELSE
        UPDATE queen.consumers
        SET batch_end = p_end, delivered = greatest(delivered, p_end), lease_id = p_lease,
            lease_expires_at = p_now + make_interval(secs => q.lease_time),
            worker_id = p_worker, updated_at = p_now
        WHERE partition_id = p_pid AND group_name = p_group;
        INSERT INTO queen.leases (lease_id, partition_id, group_name, expires_at)
        VALUES (p_lease, p_pid, p_group, p_now + make_interval(secs => q.lease_time));
    END IF;
END
$fn$;

-- The small, busy tables are vacuumed after every 500 dead rows rather
-- than a fifth of the table, without the cost-based pauses, as
-- queen.ready is (0003).
ALTER TABLE queen.consumers SET (autovacuum_vacuum_scale_factor = 0, autovacuum_vacuum_threshold = 500,
                                 autovacuum_vacuum_cost_delay = 0);
ALTER TABLE queen.leases SET (autovacuum_vacuum_scale_factor = 0, autovacuum_vacuum_threshold = 500,
                              autovacuum_vacuum_cost_delay = 0);

-- A ready row is one (partition, group): ready_partition says so alone,
-- and becomes the primary key in place of a second index of the same
-- rows that every insert into the ready set also had to write.
ALTER TABLE queen.ready DROP CONSTRAINT ready_pkey,
    ADD CONSTRAINT ready_pkey PRIMARY KEY USING INDEX ready_partition;
