SELECT r.ok, r.offs, r.queues, r.partitions, r.results, r.dlqs, r.committed, r.released, r.errors, r.codes
FROM queen.ack_v3($1::uuid[], $2::text[], $3::text[], $4::text[], $5::uuid[], $6::text[], $7::timestamptz) r
