DROP INDEX IF EXISTS jobs_dead_lettered_idx;
DROP INDEX IF EXISTS jobs_failed_idx;
ALTER TABLE workers DROP COLUMN IF EXISTS shutdown_requested;
ALTER TABLE jobs DROP COLUMN IF EXISTS cancel_requested;
ALTER TABLE jobs DROP COLUMN IF EXISTS no_retry;
