DROP INDEX IF EXISTS jobs_result_kept_idx;
ALTER TABLE jobs DROP COLUMN IF EXISTS result_size;
ALTER TABLE queues DROP COLUMN IF EXISTS result_retention_ms;
