-- The trace context a job was submitted with, copied into each of its event rows, so that the outbox
-- relay reads no jobs row per event (that subquery was most of the relay's cost). SQL NULL: the job
-- has no trace context (it costs one bit of the row's null bitmap). The default, JSON null, marks a
-- row written without the column: every row from before this migration, and the rows an older
-- binary still writes during a rolling upgrade. The relay reads those rows' trace context from
-- their job, as it always did.
ALTER TABLE job_events ADD COLUMN trace_context jsonb DEFAULT 'null'::jsonb;
