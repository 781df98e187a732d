-- 0008: payload encryption at rest (queues with encryptionEnabled). The Go
-- core seals each payload with AES-256-GCM before it reaches SQL; a sealed
-- payload is stored as base64 text in the same places as a plain one, with
-- the reference of the key that sealed it ("<id>.<fingerprint>") beside it.
-- NULL: the payload is plain JSON text. A segment holds one push request's
-- messages of a partition, all sealed with one key or none; a dead letter
-- keeps its snapshot sealed as it was.
ALTER TABLE queen.segments ADD COLUMN key_id text;
ALTER TABLE queen.dlq ADD COLUMN key_id text;
