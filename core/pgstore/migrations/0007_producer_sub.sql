-- 0007: who pushed a segment (one push request's messages of a partition):
-- the authenticated caller (JWT sub or IAM principal), NULL when unknown.
ALTER TABLE queen.segments ADD COLUMN producer_sub text;
