-- 0002: composite types the routines pass between statements.

CREATE TYPE queen.ack_item AS (
    idx     integer,
    pid     uuid,
    grp     text,
    txid    text,
    status  text,
    lease   uuid,
    err     text,
    off     bigint,
    problem text,
    code    text
);

CREATE TYPE queen.ack_unit AS (
    pid      uuid,
    grp      text,
    old      bigint,
    new      bigint,
    released boolean,
    stop_off bigint,
    dlq_offs bigint[]
);

CREATE TYPE queen.claim AS (
    status text,
    n      integer,
    msgs   json[]
);
