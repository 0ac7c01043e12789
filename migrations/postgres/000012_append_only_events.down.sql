-- Back to per-event publication marks: every event up to the cursor is marked published.
ALTER TABLE job_events ADD COLUMN published_at timestamptz, ADD COLUMN claimed_until timestamptz;
UPDATE job_events SET published_at = now()
WHERE id <= (SELECT id FROM outbox_cursors WHERE name = 'kafka');
CREATE INDEX job_events_unpublished_idx ON job_events (id) WHERE published_at IS NULL;
CREATE INDEX job_events_published_created_idx ON job_events (created_at) WHERE published_at IS NOT NULL;
DROP TABLE outbox_cursors;
ALTER TABLE job_events ALTER COLUMN id SET DEFAULT nextval('job_events_id_seq');
