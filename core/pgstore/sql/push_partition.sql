SELECT r.partition_id::text, r.created_at, r.part_num, r.first_offset, r.fresh, r.offsets, r.txids
FROM queen.push_partition_v2($1, $2, $3::text[], $4::text[], $5::text[], $6, $7, $8::timestamptz, $9) r
