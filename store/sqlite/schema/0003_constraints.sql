-- Constraints (docs/flow-control.md), as migrations/postgres/000019 in SQLite's types: a
-- named matcher and limit. The rules are Go's (queue.Constraint, queue.Limiter); these tables only
-- keep what the limiter reads. Rate intervals are milliseconds, times INTEGER microseconds.
CREATE TABLE constraints (
    name             TEXT    PRIMARY KEY,
    match_queue      TEXT    NOT NULL DEFAULT '',
    match_type       TEXT    NOT NULL DEFAULT '',
    match_labels     TEXT    NOT NULL DEFAULT '{}',
    key_template     TEXT    NOT NULL DEFAULT '',
    concurrency      INTEGER NOT NULL DEFAULT 0 CHECK (concurrency >= 0),
    rate_limit       INTEGER NOT NULL DEFAULT 0 CHECK (rate_limit >= 0),
    rate_interval_ms INTEGER NOT NULL DEFAULT 0 CHECK (rate_interval_ms >= 0),
    rate_burst       INTEGER NOT NULL DEFAULT 0 CHECK (rate_burst >= 0),
    created_at       INTEGER NOT NULL,
    updated_at       INTEGER NOT NULL
);

-- The constraint set's generation: every create, replace and delete increments it, in the same
-- write. A job's entries were computed at jobs.limit_gen; another generation's are computed again
-- by the next constrained claim that reads the job.
CREATE TABLE constraint_generation (
    only_row INTEGER PRIMARY KEY CHECK (only_row = 1),
    gen      INTEGER NOT NULL
);
INSERT INTO constraint_generation (only_row, gen) VALUES (1, 0);

-- Rate buckets, one per (constraint, key) that took a token; a missing row is a full bucket. The
-- store runs without foreign keys: ConstraintDelete deletes a constraint's buckets itself.
CREATE TABLE constraint_buckets (
    constraint_name TEXT    NOT NULL,
    key             TEXT    NOT NULL,
    tokens          REAL    NOT NULL,
    at              INTEGER NOT NULL,
    PRIMARY KEY (constraint_name, key)
) WITHOUT ROWID;

-- A job's entries (a JSON array of "constraint:key", queue.LimitEntry) and the generation they were
-- computed at. NULL for every job no constrained claim has read: the plain hot path never writes them.
ALTER TABLE jobs ADD COLUMN limit_keys TEXT;
ALTER TABLE jobs ADD COLUMN limit_gen INTEGER;

-- The concurrency in use: the ASSIGNED and RUNNING jobs that count against an entry. Only such jobs
-- are in the index, and it covers what the count reads (state too: SQLite checks the predicate's
-- terms on the row), so a constrained claim reads as many index entries as jobs run under
-- constraints and no table row.
CREATE INDEX jobs_limited_idx ON jobs (limit_keys, state)
    WHERE state IN ('ASSIGNED', 'RUNNING') AND limit_keys IS NOT NULL;
