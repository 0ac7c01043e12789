WITH locked AS MATERIALIZED (
  SELECT j.id AS l_id FROM jobs j WHERE j.queue = 'default' AND j.state = 'PENDING' AND j.not_before <= now()
  ORDER BY j.priority DESC, j.created_at, j.id LIMIT 100 FOR NO KEY UPDATE SKIP LOCKED),
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
-- the relay: read past the cursor what every finished transaction wrote (in (xid, id) order), then
-- advance the cursor to the last event read
SELECT '''' || xid::text || '''' AS cx, id AS ci FROM outbox_cursor WHERE name = 'kafka' \gset
WITH ev AS (SELECT e.xid, e.id, e.job_id, e.seq, e.queue, e.type, e.from_state, e.to_state, e.reason, e.error, e.worker_id, e.attempt, e.created_at
  FROM job_events e WHERE (e.xid, e.id) > (:cx::xid8, :ci) AND e.xid < pg_snapshot_xmin(pg_current_snapshot())
  ORDER BY e.xid, e.id LIMIT 1000),
last AS (SELECT xid, id FROM ev ORDER BY xid DESC, id DESC LIMIT 1)
SELECT coalesce((SELECT '''' || xid::text || '''' FROM last), '''0''') AS lx, coalesce((SELECT id FROM last), 0) AS li, (SELECT count(*) FROM ev) AS n \gset
UPDATE outbox_cursor SET xid = :lx::xid8, id = :li WHERE name = 'kafka' AND :n > 0;
