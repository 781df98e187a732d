SELECT r.lease_id::text, r.lease_expires_at, r.pids::text[], r.pnames, r.offs, r.txids, r.payloads, r.key_ids,
       r.trace_ids, r.producer_subs, r.created_ats, r.retries
FROM queen.pop_v2($1::json, $2::timestamptz) r
