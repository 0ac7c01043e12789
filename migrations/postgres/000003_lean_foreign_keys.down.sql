DROP FUNCTION IF EXISTS jq_unknown_queue(text);
ALTER TABLE jobs ADD CONSTRAINT jobs_queue_fkey FOREIGN KEY (queue) REFERENCES queues (name) ON DELETE CASCADE;
ALTER TABLE job_events ADD CONSTRAINT job_events_job_id_fkey FOREIGN KEY (job_id) REFERENCES jobs (id) ON DELETE CASCADE;
