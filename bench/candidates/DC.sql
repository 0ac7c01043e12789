WITH locked AS (
  DELETE FROM job_ready WHERE id IN (
    SELECT r.id FROM job_ready r WHERE r.queue = 'default' AND r.not_before <= now()
    ORDER BY r.priority DESC, r.created_at, r.id LIMIT 100 FOR UPDATE SKIP LOCKED)
  RETURNING id AS l_id),
updated AS (
  UPDATE jobs SET state = 'ASSIGNED', attempt = attempt + 1, worker_id = 'w1', event_seq = event_seq + 1, updated_at = now()
  FROM locked WHERE id = l_id AND state = 'PENDING' RETURNING id, queue, type, attempt, event_seq, worker_id, updated_at, payload),
events AS (
  INSERT INTO event_batches (job_ids, seqs, queues, types, from_states, to_states, reasons, workers, attempts, ats)
  SELECT array_agg(id), array_agg(event_seq), array_agg(queue), array_agg(type), array_agg('PENDING'::text),
         array_agg('ASSIGNED'::text), array_agg('assigned'::text), array_agg(worker_id), array_agg(attempt), array_agg(updated_at) FROM updated)
SELECT '''' || array_agg(id)::text || '''' AS aids FROM updated \gset
WITH input AS (SELECT * FROM unnest(:aids::uuid[]) AS t(i_id)),
locked AS MATERIALIZED (
  SELECT j.id AS l_id FROM (SELECT * FROM input ORDER BY i_id) i CROSS JOIN LATERAL (
    SELECT id, state, attempt, worker_id FROM jobs WHERE id = i_id OFFSET 0 FOR NO KEY UPDATE) j
  WHERE j.state = 'ASSIGNED' AND j.worker_id = 'w1'),
updated AS (
  UPDATE jobs SET state = 'DONE', started_at = now(), completed_at = now(), event_seq = event_seq + 2, updated_at = now()
  FROM locked WHERE id = l_id RETURNING id, queue, type, attempt, event_seq, worker_id, started_at, completed_at, state),
ev AS (SELECT id, event_seq - 1 AS seq, queue, type, 'ASSIGNED'::text AS f, 'RUNNING'::text AS t, 'acked'::text AS r, worker_id, attempt, started_at AS at FROM updated
  UNION ALL SELECT id, event_seq, queue, type, 'RUNNING', 'DONE', 'completed', worker_id, attempt, completed_at FROM updated),
events AS (
  INSERT INTO event_batches (job_ids, seqs, queues, types, from_states, to_states, reasons, workers, attempts, ats)
  SELECT array_agg(id), array_agg(seq), array_agg(queue), array_agg(type), array_agg(f), array_agg(t), array_agg(r),
         array_agg(worker_id), array_agg(attempt), array_agg(at) FROM ev)
SELECT count(*) FROM updated;
SELECT '''' || xid::text || '''' AS cx, id AS ci FROM outbox_cursor WHERE name = 'kafka' \gset
WITH ev AS (SELECT e.xid, e.id, e.job_ids, e.seqs, e.queues, e.types, e.from_states, e.to_states, e.reasons, e.workers, e.attempts, e.ats
  FROM event_batches e WHERE (e.xid, e.id) > (:cx::xid8, :ci) AND e.xid < pg_snapshot_xmin(pg_current_snapshot())
  ORDER BY e.xid, e.id LIMIT 20),
last AS (SELECT xid, id FROM ev ORDER BY xid DESC, id DESC LIMIT 1)
SELECT coalesce((SELECT '''' || xid::text || '''' FROM last), '''0''') AS lx, coalesce((SELECT id FROM last), 0) AS li, (SELECT count(*) FROM ev) AS n \gset
UPDATE outbox_cursor SET xid = :lx::xid8, id = :li WHERE name = 'kafka' AND :n > 0;
