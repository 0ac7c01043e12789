CREATE INDEX IF NOT EXISTS jobs_pending_not_before_idx ON jobs (queue, not_before) WHERE state = 'PENDING';
CREATE INDEX IF NOT EXISTS jobs_state_updated_idx ON jobs (state, updated_at);
