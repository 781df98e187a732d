-- 0010: a push's items as arrays, read once from its JSON (_push_items)
-- and passed to the routines that plan and write it.
CREATE TYPE queen.push_items AS (
    qn       text[],
    pn       text[],
    payloads text[],
    txids    text[],
    traces   text[],
    subs     text[],
    keys     text[],
    plain    boolean[]
);
