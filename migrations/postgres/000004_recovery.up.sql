-- Failure paths and crash recovery : retries, cancellation, worker shutdown, the reaper.

-- A failure the handler marked permanent (seed 001 should_retry=false): the retry sweep dead-letters
-- the job at once instead of scheduling another attempt.
ALTER TABLE jobs ADD COLUMN no_retry boolean NOT NULL DEFAULT false;
-- CancelJob of a RUNNING job: the worker learns it from its next heartbeat and cancels the handler;
-- the failure that follows dead-letters the job with reason "cancelled". A success that won the race
-- keeps the flag, so the job shows that the cancel came too late.
ALTER TABLE jobs ADD COLUMN cancel_requested boolean NOT NULL DEFAULT false;

-- ShutdownWorker: the worker is DRAINING and its heartbeat answers WORKER_COMMAND_SHUTDOWN.
ALTER TABLE workers ADD COLUMN shutdown_requested boolean NOT NULL DEFAULT false;

-- Retry sweep: FAILED jobs, oldest first. FAILED is a transient state (the sweep moves every job on
-- to PENDING or DEAD_LETTERED within a reaper interval), so the index stays tiny.
CREATE INDEX jobs_failed_idx ON jobs (updated_at) WHERE state = 'FAILED';

-- Dead-letter listing and purge (FR-035).
CREATE INDEX jobs_dead_lettered_idx ON jobs (queue, completed_at) WHERE state = 'DEAD_LETTERED';
