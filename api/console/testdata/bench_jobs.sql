-- BenchmarkPages' history ($1 jobs, docs/performance.md): three queues (bulk, mail, default), 86 %
-- DONE, 3 % DEAD_LETTERED, 10 % PENDING (half of them delayed by an hour), 1 % FAILED, a "tenant"
-- label of 100 values, types email.send / report.build / image.resize, created 10 ms apart up to
-- now; then their events (submission, and the finishing attempt of every job that ran) in time
-- order; event_seq names the latest of them, so that the server's own next event of a job (a retry
-- of a FAILED one) takes the next number. Run both in one transaction. A test fixture.
INSERT INTO jobs (id, queue, type, payload, priority, state, max_retries, spec_hash, labels, created_at, updated_at,
                  not_before, started_at, completed_at, worker_id, attempt, failure_reason, last_error, event_seq)
SELECT gen_random_uuid(), (ARRAY['bulk','mail','default'])[1 + i % 3],
       (ARRAY['email.send','report.build','image.resize'])[1 + (i / 3) % 3],
       convert_to('{"to":"user' || i || '@example.com"}', 'UTF8'), i % 10, st, 3, '\x00'::bytea,
       jsonb_build_object('tenant', 't' || (i % 100)), ts, ts,
       CASE WHEN st = 'PENDING' AND i % 2 = 0 THEN now() + interval '1 hour' ELSE ts END,
       CASE WHEN st IN ('DONE', 'FAILED', 'DEAD_LETTERED') THEN ts END,
       CASE WHEN st IN ('DONE', 'DEAD_LETTERED') THEN ts + interval '20 ms' END,
       CASE WHEN st = 'PENDING' THEN '' ELSE 'w-' || (i % 8) END,
       CASE WHEN st = 'PENDING' THEN 0 ELSE 1 END,
       CASE WHEN st IN ('FAILED', 'DEAD_LETTERED') THEN 'error' ELSE '' END,
       CASE WHEN st IN ('FAILED', 'DEAD_LETTERED') THEN 'smtp: 550 mailbox unavailable' ELSE '' END,
       CASE WHEN st = 'PENDING' THEN 1 ELSE 2 END
FROM (SELECT i, now() - make_interval(secs => ($1::int - i) / 100.0) AS ts,
             CASE WHEN i % 100 < 86 THEN 'DONE' WHEN i % 100 < 89 THEN 'DEAD_LETTERED'
                  WHEN i % 100 < 99 THEN 'PENDING' ELSE 'FAILED' END AS st
      FROM generate_series(1, $1::int) AS i) g;

INSERT INTO job_events (job_id, seq, queue, type, from_state, to_state, reason, worker_id, attempt, created_at)
SELECT id, seq, queue, type, from_state, to_state, reason, worker_id, attempt, at
FROM (
    SELECT id, 1 AS seq, queue, type, NULL AS from_state, 'PENDING' AS to_state, 'submitted' AS reason,
           '' AS worker_id, 0 AS attempt, created_at AS at
    FROM jobs
    UNION ALL
    SELECT id, 2, queue, type, 'RUNNING', CASE WHEN state = 'DONE' THEN 'DONE' ELSE 'FAILED' END,
           CASE WHEN state = 'DONE' THEN 'succeeded' ELSE 'error' END, worker_id, 1,
           coalesce(completed_at, started_at + interval '20 ms')
    FROM jobs WHERE state <> 'PENDING'
) e
ORDER BY at;
