-- 0006: maintenance switches, in the database so every function and
-- process sees them at once: 'push' pauses pushes (503 with Retry-After),
-- 'pop' makes pops return nothing.
CREATE TABLE queen.maintenance (
    mode       text        PRIMARY KEY CHECK (mode IN ('push', 'pop')),
    enabled    boolean     NOT NULL,
    updated_at timestamptz NOT NULL
);
