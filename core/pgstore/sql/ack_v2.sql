SELECT r.ok, r.offs, r.queues, r.partitions, r.results, r.dlqs, r.committed, r.released, r.errors, r.codes
FROM queen.ack_v2($1::json, $2::timestamptz) r
