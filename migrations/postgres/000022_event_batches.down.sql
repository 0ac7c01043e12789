-- Back to one job_events row per transition: every batch element becomes a row (a combined element
-- a combined row), with new ids in batch order above every existing one. The cursor goes back to
-- its old name at the same id, so the unnested rows are published again (delivery is at least once;
-- consumers de-duplicate on (job_id, seq)).
INSERT INTO job_events (job_id, seq, queue, type, from_state, to_state, reason, error, worker_id, attempt,
                        created_at, via_at, trace_context)
SELECT t.job_id, t.seq, t.queue, t.type, t.from_state, t.to_state, coalesce(t.reason, ''), coalesce(t.error, ''),
       coalesce(t.worker_id, ''), coalesce(t.attempt, 0), t.at, t.via_at, t.trace
FROM event_batches b,
     unnest(b.job_ids, b.seqs, b.queues, b.types, b.from_states, b.to_states, b.reasons, b.errors,
            b.worker_ids, b.attempts, b.ats, b.via_ats, b.traces)
         WITH ORDINALITY AS t(job_id, seq, queue, type, from_state, to_state, reason, error, worker_id,
                              attempt, at, via_at, trace, ord)
ORDER BY b.id, t.ord;
UPDATE outbox_cursors SET name = 'kafka' WHERE name = 'kafka.batches';
DROP VIEW IF EXISTS event_rows;
ALTER TABLE jobs DROP COLUMN IF EXISTS ev;
DROP TABLE IF EXISTS event_batches;
