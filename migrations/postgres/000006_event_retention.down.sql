DROP INDEX IF EXISTS job_events_published_created_idx;
