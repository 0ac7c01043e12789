ALTER TABLE schedules
    DROP COLUMN IF EXISTS overlap,
    DROP COLUMN IF EXISTS ttl_ms,
    DROP COLUMN IF EXISTS keep_result;
