ALTER TABLE jobs RESET (fillfactor);
-- Back to one row per transition: each combined row's first transition becomes a row of its own.
DROP VIEW IF EXISTS job_transitions;
INSERT INTO job_events (job_id, seq, queue, type, from_state, to_state, reason, error, worker_id, attempt, created_at)
SELECT job_id, seq - 1, queue, type, from_state, 'RUNNING', 'implicit_ack', '', worker_id, attempt, via_at
FROM job_events
WHERE via_at IS NOT NULL;
UPDATE job_events SET from_state = 'RUNNING' WHERE via_at IS NOT NULL;
ALTER TABLE job_events DROP COLUMN via_at;
