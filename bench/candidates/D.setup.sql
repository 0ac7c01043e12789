-- D: a narrow dispatch table; jobs keeps only indexes whose columns no transition changes.
DROP INDEX jobs_dispatch_idx, jobs_dead_lettered_idx, jobs_expires_idx, jobs_failed_idx, jobs_result_kept_idx, jobs_worker_active_idx;
ALTER TABLE jobs SET (fillfactor = 60);
CREATE TABLE job_ready (id uuid NOT NULL, queue text NOT NULL, priority smallint NOT NULL, created_at timestamptz NOT NULL, not_before timestamptz NOT NULL);
CREATE INDEX job_ready_dispatch_idx ON job_ready (queue, priority DESC, created_at, id) INCLUDE (not_before);
