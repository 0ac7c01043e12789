ALTER TABLE job_events DROP COLUMN IF EXISTS claimed_until;
