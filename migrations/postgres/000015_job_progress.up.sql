-- Job progress : what a running handler last reported with queue.Progress.
-- Not a column of jobs: a progress update must never add a jobs row version (the widest row, with
-- the most indexes), so short jobs that report nothing cost nothing and a long job reporting every
-- second churns only this small table. One row per job, upserted by the worker's progress batch
-- (fenced in the same statement by the job's state, attempt and worker_id); only the primary key
-- is indexed and fillfactor leaves room on the page, so an update is heap-only. A read shows the
-- row only while the job is ASSIGNED or RUNNING at that attempt; the maintenance pass deletes rows
-- of attempts that are over. No foreign key to jobs (as 000003): a purged job's row is pruned too.
CREATE TABLE IF NOT EXISTS job_progress (
    job_id     uuid        PRIMARY KEY,
    attempt    integer     NOT NULL CHECK (attempt > 0),
    percent    smallint    NOT NULL CHECK (percent BETWEEN 0 AND 100),
    message    text        NOT NULL DEFAULT '',
    updated_at timestamptz NOT NULL DEFAULT now()
) WITH (fillfactor = 50);
