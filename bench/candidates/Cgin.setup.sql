CREATE INDEX event_batches_jobs_idx ON event_batches USING gin (job_ids);
