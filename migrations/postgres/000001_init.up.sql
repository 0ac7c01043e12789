-- jq schema v1: queues, jobs, job_events (history + Kafka outbox), workers.
-- Postgres is the system of record; every index below names the query it serves (NFR-012).

CREATE TABLE queues (
    name             text        PRIMARY KEY CHECK (name ~ '^[a-z0-9][a-z0-9_.-]{0,63}$'),
    max_retries      integer     NOT NULL DEFAULT 3      CHECK (max_retries >= 0),
    ttl_ms           bigint      NOT NULL DEFAULT 0      CHECK (ttl_ms >= 0),
    priority_weights jsonb       NOT NULL DEFAULT '{}',
    backoff_base_ms  bigint      NOT NULL DEFAULT 5000   CHECK (backoff_base_ms > 0),
    backoff_max_ms   bigint      NOT NULL DEFAULT 300000 CHECK (backoff_max_ms > 0),
    paused           boolean     NOT NULL DEFAULT false,
    created_at       timestamptz NOT NULL DEFAULT now(),
    updated_at       timestamptz NOT NULL DEFAULT now()
);

CREATE TABLE jobs (
    id              uuid        PRIMARY KEY,
    -- A forced queue delete removes its jobs (and through them their events).
    queue           text        NOT NULL REFERENCES queues (name) ON DELETE CASCADE,
    type            text        NOT NULL,
    payload         bytea       NOT NULL DEFAULT '',
    priority        smallint    NOT NULL DEFAULT 0 CHECK (priority BETWEEN 0 AND 9),
    state           text        NOT NULL DEFAULT 'PENDING'
                    CHECK (state IN ('PENDING', 'ASSIGNED', 'RUNNING', 'DONE', 'FAILED', 'DEAD_LETTERED')),
    max_retries     integer     NOT NULL CHECK (max_retries >= 0),
    retry_count     integer     NOT NULL DEFAULT 0 CHECK (retry_count >= 0),
    -- Incremented by every PENDING->ASSIGNED: the fencing token of the current dispatch.
    attempt         integer     NOT NULL DEFAULT 0 CHECK (attempt >= 0),
    ttl_ms          bigint      NOT NULL DEFAULT 0 CHECK (ttl_ms >= 0),
    timeout_ms      bigint      NOT NULL DEFAULT 0 CHECK (timeout_ms >= 0),
    -- run_at, later the retry backoff: the scheduler does not dispatch the job before it.
    not_before      timestamptz NOT NULL DEFAULT now(),
    -- not_before + ttl while PENDING; NULL without a TTL.
    expires_at      timestamptz,
    idempotency_key text        NOT NULL DEFAULT '',
    -- SHA-256 of the canonical submit spec: a repeated idempotency key must carry the same one.
    spec_hash       bytea       NOT NULL,
    labels          jsonb       NOT NULL DEFAULT '{}',
    keep_result     boolean     NOT NULL DEFAULT false,
    trace_context   jsonb       NOT NULL DEFAULT '{}',
    worker_id       text        NOT NULL DEFAULT '',
    last_error      text        NOT NULL DEFAULT '',
    failure_reason  text        NOT NULL DEFAULT '',
    result          bytea,
    result_checksum text        NOT NULL DEFAULT '',
    -- Seq of the job's latest event. The transition UPDATE increments it and the event insert in the
    -- same statement uses the new value: per-job event numbering without a read or a race.
    event_seq       integer     NOT NULL DEFAULT 1,
    created_at      timestamptz NOT NULL DEFAULT now(),
    updated_at      timestamptz NOT NULL DEFAULT now(),
    started_at      timestamptz,
    completed_at    timestamptz
);

-- Scheduler: "due PENDING jobs of queue Q by priority DESC, created_at, id" walks this partial index
-- in order and stops after the batch; only PENDING rows are in it, so its size follows the backlog,
-- not the 10 M-row history. not_before is INCLUDEd so the due filter needs no heap visit.
CREATE INDEX jobs_dispatch_idx ON jobs (queue, priority DESC, created_at, id)
    INCLUDE (not_before) WHERE state = 'PENDING';

-- Scheduler: when is the next delayed/backed-off job of a queue due (sleep until then), and which
-- PENDING jobs became due.
CREATE INDEX jobs_pending_not_before_idx ON jobs (queue, not_before) WHERE state = 'PENDING';

-- Reaper (FR-020) and worker views: the jobs a worker holds.
CREATE INDEX jobs_worker_active_idx ON jobs (worker_id) WHERE state IN ('ASSIGNED', 'RUNNING');

-- Reaper and retention: ASSIGNED past assignment_timeout, FAILED awaiting retry, DONE/DEAD_LETTERED
-- older than the retention period.
CREATE INDEX jobs_state_updated_idx ON jobs (state, updated_at);

-- TTL expiry (FR-004): PENDING jobs whose expires_at passed.
CREATE INDEX jobs_expires_idx ON jobs (expires_at) WHERE state = 'PENDING' AND expires_at IS NOT NULL;

-- Idempotent submit: one job per (queue, key); the arbiter of INSERT ... ON CONFLICT DO NOTHING.
CREATE UNIQUE INDEX jobs_idempotency_key_idx ON jobs (queue, idempotency_key) WHERE idempotency_key <> '';

-- Job list of one queue, keyset-paginated newest first; also serves the ON DELETE CASCADE from queues
-- and the per-queue statistics.
CREATE INDEX jobs_queue_created_idx ON jobs (queue, created_at DESC, id DESC);

-- Job list across all queues, keyset-paginated newest first.
CREATE INDEX jobs_created_idx ON jobs (created_at DESC, id DESC);

CREATE TABLE job_events (
    -- Global order of events: the outbox relay publishes in id order.
    id           bigserial   PRIMARY KEY,
    job_id       uuid        NOT NULL REFERENCES jobs (id) ON DELETE CASCADE,
    seq          integer     NOT NULL CHECK (seq > 0),
    queue        text        NOT NULL,
    type         text        NOT NULL,
    from_state   text,       -- NULL for the submission event
    to_state     text        NOT NULL,
    reason       text        NOT NULL DEFAULT '',
    error        text        NOT NULL DEFAULT '',
    worker_id    text        NOT NULL DEFAULT '',
    attempt      integer     NOT NULL DEFAULT 0,
    created_at   timestamptz NOT NULL DEFAULT now(),
    -- Set by the outbox relay once the event is in Kafka.
    published_at timestamptz,
    -- Also the index of "job logs" (FR-031) and of the cascade from jobs.
    CONSTRAINT job_events_job_seq_key UNIQUE (job_id, seq)
);

-- Outbox relay: unpublished events in id order; published rows leave the index.
CREATE INDEX job_events_unpublished_idx ON job_events (id) WHERE published_at IS NULL;

CREATE TABLE workers (
    id                text        PRIMARY KEY CHECK (id <> ''),
    hostname          text        NOT NULL DEFAULT '',
    status            text        NOT NULL DEFAULT 'ONLINE' CHECK (status IN ('ONLINE', 'DRAINING', 'OFFLINE')),
    concurrency       integer     NOT NULL DEFAULT 0 CHECK (concurrency >= 0),
    queues            text[]      NOT NULL DEFAULT '{}',
    version           text        NOT NULL DEFAULT '',
    started_at        timestamptz NOT NULL DEFAULT now(),
    last_heartbeat_at timestamptz NOT NULL DEFAULT now(),
    updated_at        timestamptz NOT NULL DEFAULT now()
);

-- Reaper (FR-020): live workers whose last heartbeat is too old.
CREATE INDEX workers_heartbeat_idx ON workers (last_heartbeat_at) WHERE status <> 'OFFLINE';
