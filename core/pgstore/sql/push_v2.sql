SELECT r.partition_ids::text[], r.part_nums, r.created_ats, r.fresh, r.offsets, r.txids
FROM queen.push_v2($1::json, $2::timestamptz, $3) r
