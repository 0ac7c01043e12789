-- Event retention : the maintenance pass deletes published events older than
-- server.event_retention_h, oldest first, in bounded batches. This index serves exactly that
-- statement: it walks created_at upwards from the oldest published event and stops at the cutoff,
-- whatever the size of the table. Unpublished events are outside the predicate, so the hot path's
-- event inserts never touch it; a row enters it once, when the relay marks it published (an update
-- that already writes every index, since published_at is in job_events_unpublished_idx's predicate).
--
-- Not CONCURRENTLY: that build waits for every other transaction, including servers starting at
-- the same time that wait in golang-migrate's advisory lock, so it deadlocks with them. Before this
-- release nothing was published, so the build is one scan of job_events that finds no row to index.
CREATE INDEX IF NOT EXISTS job_events_published_created_idx
    ON job_events (created_at) WHERE published_at IS NOT NULL;
