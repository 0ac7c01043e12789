-- Type-aware dispatch : the job types a worker registered, the claim's filter for its
-- sessions on any replica and the reason `status` and `job status` give for a job nobody takes.
-- '{}' = every type (a worker that registers none, as every worker did before). A constant
-- default is catalog-only: no table rewrite.
ALTER TABLE workers ADD COLUMN IF NOT EXISTS types text[] NOT NULL DEFAULT '{}';
