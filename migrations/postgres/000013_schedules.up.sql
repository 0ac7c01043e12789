-- Periodic jobs (docs/schedules.md): a named job template and a cron spec in a time zone.
-- The fire loop of every server replica reads the due rows (schedules_due_idx), submits each fire's
-- job with the idempotency key schedule:<name>:<fire time> — so replicas firing the same time create
-- one job — and advances next_fire_at with a compare-and-set on the value it read. No foreign key
-- to queues: deleting a queue does not need its schedules gone first; their fires then fail
-- (last_outcome 'failed') until the queue exists again.
CREATE TABLE IF NOT EXISTS schedules (
    name          text        PRIMARY KEY,
    queue         text        NOT NULL,
    type          text        NOT NULL,
    payload       bytea       NOT NULL DEFAULT '',
    priority      smallint    NOT NULL DEFAULT 0 CHECK (priority BETWEEN 0 AND 9),
    max_retries   integer     CHECK (max_retries >= 0), -- NULL: the queue's
    timeout_ms    bigint      NOT NULL DEFAULT 0 CHECK (timeout_ms >= 0),
    labels        jsonb       NOT NULL DEFAULT '{}',
    cron          text        NOT NULL,
    time_zone     text        NOT NULL DEFAULT 'UTC',
    missed        text        NOT NULL DEFAULT 'skip' CHECK (missed IN ('skip', 'catch_up')),
    catch_up_max  integer     NOT NULL DEFAULT 0 CHECK (catch_up_max BETWEEN 0 AND 1000),
    paused        boolean     NOT NULL DEFAULT false,
    owner         text        NOT NULL DEFAULT 'api' CHECK (owner IN ('api', 'config')),
    next_fire_at  timestamptz,                          -- NULL: the spec never fires again
    last_fire_at  timestamptz,
    last_job_id   uuid,
    last_outcome  text        NOT NULL DEFAULT '',
    last_error    text        NOT NULL DEFAULT '',
    created_at    timestamptz NOT NULL DEFAULT now(),
    updated_at    timestamptz NOT NULL DEFAULT now()
);

-- The fire loop's question, asked by every replica about once a second: the earliest unpaused fire
-- time, then the rows due by now.
CREATE INDEX IF NOT EXISTS schedules_due_idx ON schedules (next_fire_at) WHERE NOT paused;
