-- Constraints (docs/flow-control.md): a named matcher and limit. The rules are Go's
-- (queue.Constraint, queue.Limiter); these tables only keep what the limiter reads.
CREATE TABLE IF NOT EXISTS constraints (
    name           text        PRIMARY KEY,
    match_queue    text        NOT NULL DEFAULT '',
    match_type     text        NOT NULL DEFAULT '',
    match_labels   jsonb       NOT NULL DEFAULT '{}',
    key_template   text        NOT NULL DEFAULT '',
    concurrency    integer     NOT NULL DEFAULT 0 CHECK (concurrency >= 0),
    rate_limit     integer     NOT NULL DEFAULT 0 CHECK (rate_limit >= 0),
    rate_interval_ms bigint    NOT NULL DEFAULT 0 CHECK (rate_interval_ms >= 0),
    rate_burst     integer     NOT NULL DEFAULT 0 CHECK (rate_burst >= 0),
    created_at     timestamptz NOT NULL DEFAULT now(),
    updated_at     timestamptz NOT NULL DEFAULT now()
);

-- The constraint set's generation: every create, replace and delete increments it, in the same
-- transaction. A job's entries were computed at jobs.limit_gen; another generation's are computed
-- again by the next constrained claim that reads the job.
CREATE TABLE IF NOT EXISTS constraint_generation (
    only_row boolean PRIMARY KEY DEFAULT true CHECK (only_row),
    gen      bigint  NOT NULL
);
INSERT INTO constraint_generation (gen) VALUES (0) ON CONFLICT DO NOTHING;

-- Rate buckets, one per (constraint, key) that took a token; a missing row is a full bucket.
CREATE TABLE IF NOT EXISTS constraint_buckets (
    constraint_name text             NOT NULL REFERENCES constraints (name) ON DELETE CASCADE,
    key             text             NOT NULL,
    tokens          double precision NOT NULL,
    at              timestamptz      NOT NULL,
    PRIMARY KEY (constraint_name, key)
);

-- A job's entries ("constraint:key", queue.LimitEntry) and the generation they were computed at.
-- NULL for every job no constrained claim has read: the plain hot path never writes them. Nullable
-- columns without a default: catalog-only, no table rewrite.
ALTER TABLE jobs ADD COLUMN IF NOT EXISTS limit_keys text[];
ALTER TABLE jobs ADD COLUMN IF NOT EXISTS limit_gen bigint;

-- The concurrency in use: the ASSIGNED and RUNNING jobs that count against an entry. Only such
-- jobs are in the index, so a constrained claim reads as many rows as run under constraints, and
-- the jobs of unconstrained queues (limit_keys NULL) never enter it.
CREATE INDEX IF NOT EXISTS jobs_limited_idx ON jobs (id)
    WHERE state IN ('ASSIGNED', 'RUNNING') AND limit_keys IS NOT NULL;
