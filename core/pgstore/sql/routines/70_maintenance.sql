-- ---------------------------------------------------------------------------
-- maintenance

-- maintenance_state returns {push, pop}: which maintenance modes are on.
CREATE OR REPLACE FUNCTION queen.maintenance_state()
RETURNS json LANGUAGE sql STABLE AS $$
    SELECT json_build_object(
        'push', coalesce((SELECT enabled FROM queen.maintenance WHERE mode = 'push'), false),
        'pop', coalesce((SELECT enabled FROM queen.maintenance WHERE mode = 'pop'), false))
$$;

-- set_maintenance switches one maintenance mode ('push' or 'pop') and
-- returns both. p_now NULL: the database's clock (as in every routine).
CREATE OR REPLACE FUNCTION queen.set_maintenance(p_mode text, p_enabled boolean, p_now timestamptz)
RETURNS json LANGUAGE sql AS $$
    INSERT INTO queen.maintenance (mode, enabled, updated_at) VALUES (p_mode, p_enabled, coalesce(p_now, clock_timestamp()))
    ON CONFLICT (mode) DO UPDATE SET enabled = excluded.enabled, updated_at = excluded.updated_at;
    SELECT queen.maintenance_state();
$$;
