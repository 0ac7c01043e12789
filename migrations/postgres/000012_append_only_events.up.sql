-- Append-only events : job_events rows are written once and never updated. The outbox
-- relay no longer marks each published event (an UPDATE of every event, with new entries in every
-- index, was most of the relay's cost and half of the WAL of a job); it keeps a cursor instead: the
-- id of the last published event, in outbox_cursors.
--
-- Transactions commit out of id order, so the relay must not move its cursor past an id that a
-- running transaction may still commit. The cursor row therefore also holds a horizon
-- (horizon_id, horizon_xid): horizon_id is the newest event id visible when the horizon was taken,
-- horizon_xid the xmax of that snapshot. Every id up to horizon_id was drawn by a transaction that
-- held an xid when it drew it (see the id default below), so that xid is below horizon_xid; once
-- the oldest running xid is at or past horizon_xid, every event up to horizon_id is final
-- (committed, or rolled back and never to appear) and the relay may publish up to it in id order.
-- A job's events are numbered under the job's row lock, so id order is seq order for every job.
--
-- Both properties are kept by the schema, not by the statements:
-- * the id default takes the transaction's xid before it draws the id (pg_current_xact_id()
--   assigns one if the transaction has none yet), whatever statement inserts the event;
-- * the sequence hands out ids one at a time (CACHE 1): with a per-backend cache, a backend could
--   draw an id below the horizon after the horizon was taken.
ALTER SEQUENCE job_events_id_seq CACHE 1;
ALTER TABLE job_events ALTER COLUMN id
    SET DEFAULT CASE WHEN pg_current_xact_id() IS NOT NULL THEN nextval('job_events_id_seq') END;

CREATE TABLE outbox_cursors (
    name          text PRIMARY KEY,
    id            bigint NOT NULL,             -- every event up to this id is published
    horizon_id    bigint NOT NULL,             -- events up to this id are final once...
    horizon_xid   xid8 NOT NULL,               -- ...no transaction older than this runs
    lease         bigint NOT NULL DEFAULT 0,   -- fencing token of the latest claim
    leased_until  timestamptz,                 -- a relay holds the cursor until then
    updated_at    timestamptz NOT NULL DEFAULT now()
);

-- Every event before the first unpublished one is published: the cursor starts there (events
-- published after it are published again: delivery is at least once, consumers de-duplicate on
-- (job_id, seq)). The horizon starts at the cursor, so the first claim takes a fresh one.
INSERT INTO outbox_cursors (name, id, horizon_id, horizon_xid)
SELECT 'kafka', c, c, '0'
FROM (SELECT coalesce((SELECT min(id) - 1 FROM job_events WHERE published_at IS NULL),
                      (SELECT max(id) FROM job_events), 0) AS c) s;

-- Published-ness is now a comparison with the cursor; its columns and indexes go (dropping a column
-- rewrites nothing).
DROP INDEX IF EXISTS job_events_published_created_idx;
DROP INDEX IF EXISTS job_events_unpublished_idx;
ALTER TABLE job_events DROP COLUMN published_at, DROP COLUMN claimed_until;
