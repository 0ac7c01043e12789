-- Events by the batch. A statement that changes the state of many jobs writes one event_batches row
-- holding all their transitions as parallel arrays, instead of one job_events row per job (a heap
-- tuple and two index entries each). Each job's row keeps the ids of the transactions that wrote
-- its transitions (jobs.ev, appended by the same UPDATE that changes its state), so a job's history
-- is its row, then its few batch rows through event_batches_xid_idx: no per-job index entry. The
-- submission is read from the job's row (seq 1 at created_at), which spares job logs the submit's
-- batch of up to thousands of ids.
--
-- Order: a batch's id comes from job_events_id_seq with job_events' default, so ids are one order
-- over both tables, drawn after the transaction has its xid (the outbox horizon of migration 000012
-- holds for both) and after the statement took its row locks (a job's batches are in its seq order).
--
-- Arrays: job_ids, seqs, queues, types, to_states and ats have one element per job. A NULL array
-- means every element is the default: from_states NULL (the submission), reasons, errors and
-- worker_ids '', attempts 0, via_ats none (as job_events.via_at: the element is two transitions),
-- traces none. n counts the transitions (via elements twice), for the relay's backlog and the stats
-- sample. xid is the writing transaction, the key jobs.ev points with.
CREATE TABLE event_batches (
    id          bigint       PRIMARY KEY
                DEFAULT CASE WHEN pg_current_xact_id() IS NOT NULL THEN nextval('job_events_id_seq') END,
    xid         xid8         NOT NULL DEFAULT pg_current_xact_id(),
    created_at  timestamptz  NOT NULL DEFAULT now(),
    n           integer      NOT NULL,
    job_ids     uuid[]       NOT NULL,
    seqs        integer[]    NOT NULL,
    queues      text[]       NOT NULL,
    types       text[]       NOT NULL,
    from_states text[],
    to_states   text[]       NOT NULL,
    reasons     text[],
    errors      text[],
    worker_ids  text[],
    attempts    integer[],
    ats         timestamptz[] NOT NULL,
    via_ats     timestamptz[],
    traces      jsonb[]
);
CREATE INDEX event_batches_xid_idx ON event_batches (xid);

-- ev[1] is the inserting transaction (the default: every insert, COPY included, sets it without
-- naming it); a job's submission is its row's (seq 1 at created_at) while a batch of that
-- transaction exists, that is until retention or a delete removes it. The later elements are the
-- transactions of its other batches. NULL on the rows of an older release (catalog only, nothing
-- rewritten); a new writer appends to {0}, a transaction that wrote no batch: their events are
-- job_events rows, which every reader still reads.
ALTER TABLE jobs ADD COLUMN ev xid8[];
ALTER TABLE jobs ALTER COLUMN ev SET DEFAULT ARRAY[pg_current_xact_id()];

-- One transition per row, both tables: job_events' combined rows as job_transitions shows them, and
-- each batch unnested. For reads that are not on the hot path (stats, tests, operators' SQL).
CREATE VIEW event_rows AS
SELECT id, 0::bigint AS ord, job_id, seq, queue, type, from_state, to_state, reason, error, worker_id,
       attempt, created_at
FROM job_transitions
UNION ALL
SELECT b.id, t.ord * 2 - 1, t.job_id, t.seq - 1, t.queue, t.type, t.from_state, 'RUNNING', 'implicit_ack', '',
       coalesce(t.worker_id, ''), coalesce(t.attempt, 0), t.via_at
FROM event_batches b,
     unnest(b.job_ids, b.seqs, b.queues, b.types, b.from_states, b.worker_ids, b.attempts, b.via_ats)
         WITH ORDINALITY AS t(job_id, seq, queue, type, from_state, worker_id, attempt, via_at, ord)
WHERE t.via_at IS NOT NULL
UNION ALL
SELECT b.id, t.ord * 2, t.job_id, t.seq, t.queue, t.type,
       CASE WHEN t.via_at IS NULL THEN t.from_state ELSE 'RUNNING' END, t.to_state,
       coalesce(t.reason, ''), coalesce(t.error, ''), coalesce(t.worker_id, ''), coalesce(t.attempt, 0), t.at
FROM event_batches b,
     unnest(b.job_ids, b.seqs, b.queues, b.types, b.from_states, b.to_states, b.reasons, b.errors,
            b.worker_ids, b.attempts, b.ats, b.via_ats)
         WITH ORDINALITY AS t(job_id, seq, queue, type, from_state, to_state, reason, error, worker_id,
                              attempt, at, via_at, ord);

-- The relay's cursor moves to a new name: an older binary's relay (a rolling upgrade) reads only
-- job_events, and with the old row it would move the cursor past the batches it cannot see. Without
-- its row it publishes nothing ("no outbox cursor") while the new relays publish both tables; its
-- queue deletes and retention passes, which read the published position by the old name, then see
-- nothing published and delete no event.
UPDATE outbox_cursors SET name = 'kafka.batches' WHERE name = 'kafka';
