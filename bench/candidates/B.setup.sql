-- B: job_events append-only (no published_at/claimed_until, never updated); the relay keeps a cursor
-- (xid, id): it reads events of transactions older than every running one, in that order.
ALTER TABLE job_events DROP COLUMN published_at, DROP COLUMN claimed_until;
ALTER TABLE job_events ADD COLUMN xid xid8 NOT NULL DEFAULT pg_current_xact_id();
ALTER TABLE job_events DROP CONSTRAINT job_events_pkey;
CREATE INDEX job_events_relay_idx ON job_events (xid, id);
CREATE TABLE outbox_cursor (name text PRIMARY KEY, xid xid8 NOT NULL, id bigint NOT NULL);
INSERT INTO outbox_cursor VALUES ('kafka', '0', 0);
