-- The two foreign keys of the hot path are replaced by cheaper equivalents (docs/performance.md):
--
-- * job_events.job_id -> jobs: a trigger call (a jobs_pkey probe and a KEY SHARE row lock) for every
--   event row, i.e. for every state change of every job — about a sixth of a job insert's time in
--   EXPLAIN ANALYZE. Events are only ever written by the statement that writes their job, and the
--   only deletes of jobs (a forced queue delete; purge and retention later) delete the events first,
--   in the same transaction.
-- * jobs.queue -> queues: a trigger call per inserted job. The insert statement now takes the KEY
--   SHARE lock on each distinct queue row once and refuses an unknown queue with the same error the
--   foreign key raised (jq_unknown_queue), so a queue delete still waits for inserts in flight and
--   inserts after it still fail.
ALTER TABLE job_events DROP CONSTRAINT IF EXISTS job_events_job_id_fkey;
ALTER TABLE jobs DROP CONSTRAINT IF EXISTS jobs_queue_fkey;

CREATE FUNCTION jq_unknown_queue(q text) RETURNS text
LANGUAGE plpgsql VOLATILE AS $$
BEGIN
    RAISE foreign_key_violation
        USING MESSAGE = format('queue %s does not exist', q),
              DETAIL  = format('Key (queue)=(%s) is not present in table "queues".', q);
END
$$;
