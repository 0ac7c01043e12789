ALTER TABLE job_events DROP COLUMN trace_context;
