SELECT r.partition_ids::text[], r.part_nums, r.created_ats, r.fresh, r.offsets, r.txids
FROM queen.push_v3($1::text[], $2::text[], $3::text[], $4::text[], $5::text[], $6::text[], $7::text[], $8::timestamptz, $9) r
