CREATE INDEX IF NOT EXISTS jobs_created_idx ON jobs (created_at DESC, id DESC);
