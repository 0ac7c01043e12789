-- C: one event row per transition batch (arrays), read per transition through a view.
DROP TABLE job_events;
CREATE TABLE event_batches (id bigserial, xid xid8 NOT NULL DEFAULT pg_current_xact_id(), created_at timestamptz NOT NULL DEFAULT now(),
  job_ids uuid[] NOT NULL, seqs int[] NOT NULL, queues text[] NOT NULL, types text[] NOT NULL, from_states text[] NOT NULL,
  to_states text[] NOT NULL, reasons text[] NOT NULL, workers text[] NOT NULL, attempts int[] NOT NULL, ats timestamptz[] NOT NULL);
CREATE INDEX event_batches_relay_idx ON event_batches (xid, id);
CREATE TABLE outbox_cursor (name text PRIMARY KEY, xid xid8 NOT NULL, id bigint NOT NULL);
INSERT INTO outbox_cursor VALUES ('kafka', '0', 0);
