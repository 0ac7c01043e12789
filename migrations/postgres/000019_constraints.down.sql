DROP INDEX IF EXISTS jobs_limited_idx;
ALTER TABLE jobs DROP COLUMN IF EXISTS limit_gen;
ALTER TABLE jobs DROP COLUMN IF EXISTS limit_keys;
DROP TABLE IF EXISTS constraint_buckets;
DROP TABLE IF EXISTS constraint_generation;
DROP TABLE IF EXISTS constraints;
