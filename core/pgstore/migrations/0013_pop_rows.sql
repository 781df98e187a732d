-- 0013: a claim carries its messages as rows, not JSON. pop_v2 returns them
-- as arrays (the Go core renders the reply, as it does for push_partition),
-- so a pop neither parses its payloads nor renders them; pop still answers
-- the previous release with JSON built from the rows.
CREATE TYPE queen.popped AS (
    off          bigint,
    txid         text,
    payload      text,   -- as stored: compact JSON, or a sealed payload's base64 text
    trace_id     text,
    created_at   timestamptz,
    producer_sub text,
    key_id       text,
    retry        integer,
    pid          uuid,
    pname        text
);
ALTER TYPE queen.claim ADD ATTRIBUTE items queen.popped[];
