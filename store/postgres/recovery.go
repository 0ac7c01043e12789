package postgres

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/jq-dev/jq/queue"
	"github.com/jq-dev/jq/store"
)

// The reaper's statements. Each is a compare-and-set: rows are locked and their state (and attempt)
// checked on the newest row version, so a job that a worker's report, an operator or another
// replica's reaper moved on meanwhile is left alone. Durations travel as microseconds and are
// compared with the database's now(): one clock for every replica.
const (
	// The active set (ASSIGNED and RUNNING jobs, bounded by the workers' total concurrency) comes
	// from jobs_worker_active_idx, whose predicate the state filter repeats.
	sqlJobOverdue = `-- name: job_overdue
SELECT j.id::text, j.attempt, j.worker_id, j.queue, j.state,
       CASE WHEN $3 AND (w.id IS NULL OR w.status = 'OFFLINE') THEN '` + store.ReasonWorkerLost + `'
            WHEN j.state = 'ASSIGNED' THEN '` + store.ReasonAssignmentTimeout + `'
            ELSE '` + store.ReasonTimeout + `' END
FROM jobs j
LEFT JOIN workers w ON w.id = j.worker_id
WHERE j.state IN ('ASSIGNED', 'RUNNING')
  AND (($3 AND (w.id IS NULL OR w.status = 'OFFLINE'))
       OR (j.state = 'ASSIGNED' AND j.updated_at < now() - $1 * interval '1 microsecond')
       OR (j.state = 'RUNNING'
           AND j.started_at + j.timeout_ms * interval '1 millisecond' + $2 * interval '1 microsecond' < now()))
ORDER BY j.updated_at
LIMIT $4`

	// Shaped like the ack statement (dispatch_lease.go): each job locked by id, the lease checked on
	// the locked version. The worker is not compared — the reaper fails whoever holds the attempt —
	// and the event names the state actually left.
	sqlJobFailMany = `-- name: job_fail_many
WITH input AS (
    SELECT * FROM unnest($1::uuid[], $2::integer[], $3::text[], $4::text[], $5::text[])
        WITH ORDINALITY AS t(i_id, i_attempt, i_worker, i_reason, i_error, i_ord)
),
locked AS MATERIALIZED (
    SELECT i_id AS l_input, i_ord AS l_ord,
           CASE WHEN j.state IN ('ASSIGNED', 'RUNNING') AND j.attempt = i_attempt THEN j.id END AS l_id,
           j.state AS l_from, i_reason AS l_reason, i_error AS l_error,
           false AS l_again
    FROM (SELECT * FROM input ORDER BY i_id) i
    LEFT JOIN LATERAL (
        SELECT id, state, attempt FROM jobs WHERE id = i_id
        OFFSET 0 FOR NO KEY UPDATE
    ) j ON true
),
updated AS (
    UPDATE jobs SET
        state          = 'FAILED',
        failure_reason = l_reason,
        last_error     = CASE WHEN l_error <> '' THEN l_error ELSE last_error END,
        event_seq      = event_seq + 1,
        updated_at     = now()
    FROM locked
    WHERE id = l_id
    RETURNING l_ord, false AS u_started, l_from, l_error, event_seq, ` + jobColumns + `
),
events AS (
    INSERT INTO job_events (job_id, seq, queue, type, from_state, to_state, reason, error, worker_id,
                            attempt, created_at)
    SELECT id::uuid, event_seq, queue, type, l_from, 'FAILED', failure_reason, l_error, worker_id,
           attempt, updated_at
    FROM updated
)
` + sqlLeaseOutcomes

	// The oldest FAILED jobs (jobs_failed_idx), locked with SKIP LOCKED so that concurrent sweeps
	// of several replicas share the work; the columns the decision needs are read from the locked
	// row version. The backoff is queue.RetryPolicy.Backoff: min(base·2^retry_count, max) plus a
	// jitter of up to queue.JitterFraction (0.1, checked by init) of it; a report's Retry-After
	// (retry_after_ms, migration 000008) pushes it later, never earlier, and is used up by the retry.
	// expires_at restarts from the new not_before, as for any return to PENDING. A dead-lettered
	// job's failure_reason is why it was dead-lettered when the failure said no more than "error"
	// (cancelled, or permanent_failure: the handler said do not retry), so `peek --dead` and GetJob
	// show it; a specific cause (timeout, output_too_large, worker_lost) is kept, as is the last
	// failure's reason of a job out of retries.
	sqlJobRetryFailed = `-- name: job_retry_failed
WITH c AS MATERIALIZED (
    SELECT id AS c_id, queue AS c_queue, retry_count AS c_retries, max_retries AS c_max,
           no_retry AS c_no_retry, cancel_requested AS c_cancel, retry_after_ms AS c_retry_after_ms
    FROM jobs
    WHERE state = 'FAILED'
    ORDER BY updated_at
    LIMIT $1
    FOR NO KEY UPDATE SKIP LOCKED
),
d AS (
    SELECT c_id AS d_id,
           CASE WHEN c_cancel THEN '` + store.ReasonCancelled + `'
                WHEN c_no_retry THEN '` + store.ReasonPermanent + `'
                WHEN c_retries >= c_max THEN '` + store.ReasonMaxRetries + `' END AS d_dead,
           now() + greatest(least(coalesce(q.backoff_base_ms, 5000) * power(2::float8, least(c_retries, 62)),
                                  coalesce(q.backoff_max_ms, 300000)) * (1 + random() * 0.1),
                            c_retry_after_ms) * interval '1 millisecond' AS d_not_before
    FROM c LEFT JOIN queues q ON q.name = c_queue
),
updated AS (
    UPDATE jobs SET
        state          = CASE WHEN d_dead IS NULL THEN 'PENDING' ELSE 'DEAD_LETTERED' END,
        retry_count    = retry_count + CASE WHEN d_dead IS NULL THEN 1 ELSE 0 END,
        retry_after_ms = 0,
        not_before     = CASE WHEN d_dead IS NULL THEN d_not_before ELSE not_before END,
        expires_at     = CASE WHEN d_dead IS NULL AND ttl_ms > 0 THEN d_not_before + ttl_ms * interval '1 millisecond'
                              WHEN d_dead IS NULL THEN NULL ELSE expires_at END,
        completed_at   = CASE WHEN d_dead IS NULL THEN NULL ELSE now() END,
        failure_reason = CASE WHEN d_dead = '` + store.ReasonCancelled + `' THEN d_dead
                              WHEN d_dead = '` + store.ReasonPermanent + `' AND failure_reason = '` + store.DefaultFailureReason + `' THEN d_dead
                              ELSE failure_reason END,
        event_seq      = event_seq + 1,
        updated_at     = now()
    FROM d
    WHERE id = d_id
    RETURNING id, queue, type, state, event_seq, worker_id, attempt, updated_at, d_dead, last_error
),
events AS (
    INSERT INTO job_events (job_id, seq, queue, type, from_state, to_state, reason, error, worker_id,
                            attempt, created_at)
    SELECT id, event_seq, queue, type, 'FAILED', state, coalesce(d_dead, '` + store.ReasonRetry + `'),
           CASE WHEN d_dead IS NULL THEN '' ELSE last_error END, worker_id, attempt, updated_at
    FROM updated
)
SELECT queue, state, count(*) FROM updated GROUP BY queue, state`

	// jobs_expires_idx holds exactly the PENDING jobs with a TTL.
	sqlJobExpireTTL = `-- name: job_expire_ttl
WITH c AS MATERIALIZED (
    SELECT id AS c_id FROM jobs
    WHERE state = 'PENDING' AND expires_at IS NOT NULL AND expires_at < now()
    ORDER BY expires_at
    LIMIT $1
    FOR NO KEY UPDATE SKIP LOCKED
),
updated AS (
    UPDATE jobs SET
        state          = 'DEAD_LETTERED',
        failure_reason = '` + store.ReasonTTLExpired + `',
        completed_at   = now(),
        event_seq      = event_seq + 1,
        updated_at     = now()
    FROM c
    WHERE id = c_id
    RETURNING id, queue, type, event_seq, worker_id, attempt, updated_at
),
events AS (
    INSERT INTO job_events (job_id, seq, queue, type, from_state, to_state, reason, worker_id, attempt,
                            created_at)
    SELECT id, event_seq, queue, type, 'PENDING', 'DEAD_LETTERED', '` + store.ReasonTTLExpired + `',
           worker_id, attempt, updated_at
    FROM updated
)
SELECT queue, count(*)::int FROM updated GROUP BY queue`

	sqlWorkerMarkLost = `-- name: worker_mark_lost
UPDATE workers SET status = 'OFFLINE', updated_at = now()
WHERE status <> 'OFFLINE' AND last_heartbeat_at < now() - $1 * interval '1 microsecond'
RETURNING id`

	sqlJobHeldBy = `-- name: job_held_by
SELECT id::text FROM jobs WHERE worker_id = $1 AND state IN ('ASSIGNED', 'RUNNING')`
)

func init() {
	if queue.JitterFraction != 0.1 {
		panic("postgres: sqlJobRetryFailed hard-codes a jitter of 0.1; queue.JitterFraction changed")
	}
	for _, e := range []struct{ from, to queue.State }{
		{queue.StateAssigned, queue.StateFailed},      // sqlJobFailMany
		{queue.StateRunning, queue.StateFailed},       // sqlJobFailMany
		{queue.StateFailed, queue.StatePending},       // sqlJobRetryFailed
		{queue.StateFailed, queue.StateDeadLettered},  // sqlJobRetryFailed
		{queue.StatePending, queue.StateDeadLettered}, // sqlJobExpireTTL
	} {
		if err := queue.CheckTransition(e.from, e.to); err != nil {
			panic(fmt.Errorf("postgres: recovery SQL hard-codes an edge the transition table refuses: %w", err))
		}
	}
}

func micros(d time.Duration) int64 { return d.Microseconds() }

// JobOverdue implements store.RecoveryStore.
func (s *Store) JobOverdue(ctx context.Context, p store.JobOverdueParams) ([]store.OverdueLease, error) {
	if p.AssignmentTimeout <= 0 || p.Grace < 0 || p.Limit < 1 || p.Limit > store.MaxDispatchBatch {
		return nil, fmt.Errorf("%w: overdue: assignment timeout %v, grace %v, limit %d", queue.ErrInvalidArgument,
			p.AssignmentTimeout, p.Grace, p.Limit)
	}
	rows, err := s.pool.Query(ctx, sqlJobOverdue, micros(p.AssignmentTimeout), micros(p.Grace), p.WorkersLost, p.Limit)
	if err != nil {
		return nil, fmt.Errorf("postgres: overdue jobs: %w", err)
	}
	out, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (store.OverdueLease, error) {
		var (
			l     store.OverdueLease
			state string
		)
		err := r.Scan(&l.ID, &l.Attempt, &l.WorkerID, &l.Queue, &state, &l.Reason)
		l.State = queue.State(state)
		return l, err
	})
	if err != nil {
		return nil, fmt.Errorf("postgres: overdue jobs: %w", err)
	}
	return out, nil
}

// JobFailMany implements store.RecoveryStore.
func (s *Store) JobFailMany(ctx context.Context, fails []store.JobFailParams) ([]store.LeaseOutcome, error) {
	if err := store.ValidateDispatchBatch(len(fails)); err != nil {
		return nil, err
	}
	b := newLeaseBatch(len(fails))
	leases := make([]store.JobLease, len(fails))
	var (
		ids      []string
		attempts []int32
		workers  []string
		reasons  []string
		errs     []string
	)
	for i, f := range fails {
		leases[i] = f.JobLease
		if f.Reason == "" {
			b.outcomes[i] = store.LeaseOutcome{ID: f.ID, Err: fmt.Errorf("%w: fail %s: a reason is required",
				queue.ErrInvalidArgument, f.ID)}
			continue
		}
		if !b.add(i, f.JobLease) {
			continue
		}
		ids = append(ids, b.outcomes[i].ID)
		attempts = append(attempts, int32(f.Attempt)) // Validate bounds it to int32
		workers = append(workers, f.WorkerID)
		reasons = append(reasons, pgText(f.Reason))
		errs = append(errs, pgText(f.Error))
	}
	if len(ids) > 0 {
		rows, err := s.pool.Query(ctx, sqlJobFailMany, ids, attempts, workers, reasons, errs)
		if err != nil {
			return nil, fmt.Errorf("postgres: fail jobs: %w", err)
		}
		if err := b.collect(rows, leases, queue.StateAssigned, queue.StateRunning); err != nil {
			return nil, fmt.Errorf("postgres: fail jobs: %w", err)
		}
	}
	return b.finish(leases, false), nil
}

// JobRetryFailed implements store.RecoveryStore.
func (s *Store) JobRetryFailed(ctx context.Context, limit int) (store.RetrySweep, error) {
	sweep := store.RetrySweep{Queues: map[string]int{}}
	if limit < 1 || limit > store.MaxDispatchBatch {
		return sweep, fmt.Errorf("%w: retry sweep limit %d", queue.ErrInvalidArgument, limit)
	}
	rows, err := s.pool.Query(ctx, sqlJobRetryFailed, limit)
	if err != nil {
		return sweep, fmt.Errorf("postgres: retry failed jobs: %w", err)
	}
	defer rows.Close()
	for rows.Next() {
		var (
			q, state string
			n        int
		)
		if err := rows.Scan(&q, &state, &n); err != nil {
			return sweep, fmt.Errorf("postgres: retry failed jobs: %w", err)
		}
		if queue.State(state) == queue.StatePending {
			sweep.Retried += n
			sweep.Queues[q] += n
		} else {
			sweep.DeadLettered += n
			if sweep.DeadQueues == nil {
				sweep.DeadQueues = map[string]int{}
			}
			sweep.DeadQueues[q] += n
		}
	}
	if err := rows.Err(); err != nil {
		return sweep, fmt.Errorf("postgres: retry failed jobs: %w", err)
	}
	return sweep, nil
}

// JobExpireTTL implements store.RecoveryStore.
func (s *Store) JobExpireTTL(ctx context.Context, limit int) (map[string]int, error) {
	if limit < 1 || limit > store.MaxDispatchBatch {
		return nil, fmt.Errorf("%w: ttl sweep limit %d", queue.ErrInvalidArgument, limit)
	}
	return countByQueue(ctx, s.pool, sqlJobExpireTTL, limit, "expire jobs")
}

// WorkerMarkLost implements store.RecoveryStore.
func (s *Store) WorkerMarkLost(ctx context.Context, timeout time.Duration) ([]string, error) {
	if timeout <= 0 {
		return nil, fmt.Errorf("%w: heartbeat timeout %v", queue.ErrInvalidArgument, timeout)
	}
	rows, err := s.pool.Query(ctx, sqlWorkerMarkLost, micros(timeout))
	if err != nil {
		return nil, fmt.Errorf("postgres: mark lost workers: %w", err)
	}
	ids, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return nil, fmt.Errorf("postgres: mark lost workers: %w", err)
	}
	return ids, nil
}

// JobHeldBy implements store.RecoveryStore.
func (s *Store) JobHeldBy(ctx context.Context, workerID string) ([]string, error) {
	rows, err := s.pool.Query(ctx, sqlJobHeldBy, workerID)
	if err != nil {
		return nil, fmt.Errorf("postgres: jobs held by %q: %w", workerID, err)
	}
	ids, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return nil, fmt.Errorf("postgres: jobs held by %q: %w", workerID, err)
	}
	return ids, nil
}

// countByQueue runs a bounded sweep whose rows are (queue, jobs) and adds them up by queue.
func countByQueue(ctx context.Context, db querier, sql string, limit int, what string) (map[string]int, error) {
	rows, err := db.Query(ctx, sql, limit)
	if err != nil {
		return nil, fmt.Errorf("postgres: %s: %w", what, err)
	}
	byQueue := map[string]int{}
	var (
		q string
		n int
	)
	if _, err := pgx.ForEachRow(rows, []any{&q, &n}, func() error {
		byQueue[q] += n
		return nil
	}); err != nil {
		return nil, fmt.Errorf("postgres: %s: %w", what, err)
	}
	return byQueue, nil
}
