-- Result retention (seed 001): a job submitted with keep_result keeps its result bytes
-- until a consuming fetch takes them or the queue's result_retention (24 h by default) passes;
-- one without keep_result never stores them. Constant defaults are catalog-only: no table rewrite.
ALTER TABLE queues ADD COLUMN IF NOT EXISTS result_retention_ms bigint NOT NULL DEFAULT 86400000
    CHECK (result_retention_ms > 0);

-- The size of the reported result, kept with its checksum when the bytes are not (or no longer)
-- stored, so an operator can still tell what the worker returned.
ALTER TABLE jobs ADD COLUMN IF NOT EXISTS result_size bigint NOT NULL DEFAULT 0;

-- The maintenance pass drops the results whose retention passed: per queue, "kept results of queue
-- Q completed before now() - Q's retention, oldest first, up to the batch". Only rows that still
-- hold result bytes are in this index, so its size follows the results awaiting a fetch, not the
-- 10 M-row history, and the pass walks each queue's range from the oldest and stops at the cutoff
-- or the batch: it costs the rows it drops plus one probe per queue. A result leaves the index when
-- it is consumed or dropped (the update that sets it to NULL writes the index anyway). Rows written
-- before this release with keep_result false still hold their bytes: they are in the index too and
-- go like the others once their retention passes, over as many passes as the backlog takes.
--
-- Not CONCURRENTLY, for the reason given in 000006: the build is one scan of jobs.
CREATE INDEX IF NOT EXISTS jobs_result_kept_idx ON jobs (queue, completed_at) WHERE result IS NOT NULL;
