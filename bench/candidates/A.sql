-- A: today's statements (JobDue, JobAssignMany, JobReportMany with implied ack, the outbox relay's
-- claim and mark-published), simplified to the writes they make. Events: job_events as migrated.
SELECT '''' || array_agg(id)::text || '''' AS ids FROM (
  SELECT j.id FROM jobs j WHERE j.queue = 'default' AND j.state = 'PENDING' AND j.not_before <= now()
  ORDER BY j.priority DESC, j.created_at, j.id LIMIT 100) d \gset
WITH input AS (SELECT * FROM unnest(:ids::uuid[]) WITH ORDINALITY AS t(i_id, i_ord)),
locked AS MATERIALIZED (
  SELECT j.id AS l_id, i_ord AS l_ord FROM input CROSS JOIN LATERAL (
    SELECT id, state FROM jobs WHERE id = i_id OFFSET 0 FOR NO KEY UPDATE SKIP LOCKED) j
  WHERE j.state = 'PENDING'),
updated AS (
  UPDATE jobs SET state = 'ASSIGNED', attempt = attempt + 1, worker_id = 'w1', event_seq = event_seq + 1, updated_at = now()
  FROM locked WHERE id = l_id RETURNING id, queue, type, attempt, event_seq, worker_id, updated_at, payload),
events AS (
  INSERT INTO job_events (job_id, seq, queue, type, from_state, to_state, reason, worker_id, attempt, created_at)
  SELECT id, event_seq, queue, type, 'PENDING', 'ASSIGNED', 'assigned', worker_id, attempt, updated_at FROM updated)
SELECT '''' || array_agg(id)::text || '''' AS aids FROM updated \gset
WITH input AS (SELECT * FROM unnest(:aids::uuid[]) AS t(i_id)),
locked AS MATERIALIZED (
  SELECT j.id AS l_id FROM (SELECT * FROM input ORDER BY i_id) i CROSS JOIN LATERAL (
    SELECT id, state, attempt, worker_id FROM jobs WHERE id = i_id OFFSET 0 FOR NO KEY UPDATE) j
  WHERE j.state = 'ASSIGNED' AND j.worker_id = 'w1'),
updated AS (
  UPDATE jobs SET state = 'DONE', started_at = now(), completed_at = now(), event_seq = event_seq + 2, updated_at = now()
  FROM locked WHERE id = l_id RETURNING id, queue, type, attempt, event_seq, worker_id, started_at, completed_at, state),
events AS (
  INSERT INTO job_events (job_id, seq, queue, type, from_state, to_state, reason, worker_id, attempt, created_at)
  SELECT id, event_seq - 1, queue, type, 'ASSIGNED', 'RUNNING', 'acked', worker_id, attempt, started_at FROM updated
  UNION ALL
  SELECT id, event_seq, queue, type, 'RUNNING', 'DONE', 'completed', worker_id, attempt, completed_at FROM updated)
SELECT count(*) FROM updated;
-- the relay: claim, then mark published
WITH c AS (UPDATE job_events SET claimed_until = now() + interval '30 s'
  WHERE id IN (SELECT id FROM job_events WHERE published_at IS NULL AND (claimed_until IS NULL OR claimed_until < now())
               ORDER BY id LIMIT 300 FOR UPDATE SKIP LOCKED)
  RETURNING id, job_id, seq, queue, type, from_state, to_state, reason, error, worker_id, attempt, created_at)
SELECT '''' || array_agg(id)::text || '''' AS eids FROM c \gset
UPDATE job_events SET published_at = now(), claimed_until = NULL WHERE id = ANY(:eids::bigint[]) AND published_at IS NULL;
