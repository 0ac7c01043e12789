-- No created index: jobs_created_idx (created_at DESC, id DESC) took two entries per job in a drain (every
-- update of a row that is not heap-only inserts into every index) and one at the insert, only to
-- serve the job list across all queues. That list now merges each queue's newest jobs from
-- jobs_queue_created_idx (store/postgres JobList). Measured with bench/compare's drain on a quiet
-- machine: ~8 % more jobs/s, 168 bytes less WAL per job (1,986 → 1,818).
DROP INDEX IF EXISTS jobs_created_idx;
