-- Every state change of a job is an update that cannot be HOT (state appears in partial-index
-- predicates), so it inserts a new entry into every index whose predicate the new row satisfies.
-- These two indexes were paid for on every transition and read by no query:
-- * jobs_pending_not_before_idx duplicates jobs_dispatch_idx, which INCLUDEs not_before;
-- * jobs_state_updated_idx (all rows) was meant for a reaper; jobs_worker_active_idx already covers
--   the ASSIGNED/RUNNING rows a reaper scans, and the reaper's own migration adds what it needs.
DROP INDEX IF EXISTS jobs_pending_not_before_idx;
DROP INDEX IF EXISTS jobs_state_updated_idx;
