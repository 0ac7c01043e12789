package postgres

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/jq-dev/jq/queue"
	"github.com/jq-dev/jq/store"
	"github.com/jq-dev/jq/store/internal/sqlstore"
)

// The reaper's statements. Each is a compare-and-set: rows are locked and their state (and attempt)
// checked on the newest row version, so a job that a worker's report, an operator or another
// replica's reaper moved on meanwhile is left alone. Durations travel as microseconds and are
// compared with the database's now(): one clock for every replica.
var (
	// The active set (ASSIGNED and RUNNING jobs, bounded by the workers' total concurrency) comes
	// from jobs_worker_active_idx, whose predicate the state filter repeats.
	// The candidates only: the reason is decided in Go (queue.Deadlines.Overdue) from the columns
	// returned. The cutoffs are the caller's values; the execution deadline is per job (its own
	// timeout), so it is the one formula this filter repeats of queue.Deadlines.RunDeadline.
	sqlJobOverdue = `-- name: job_overdue
SELECT j.id::text, j.attempt, j.worker_id, j.queue, j.state, j.updated_at, j.started_at, j.timeout_ms,
       $4 AND (w.id IS NULL OR w.status = 'OFFLINE')
FROM jobs j
LEFT JOIN workers w ON w.id = j.worker_id
WHERE j.state IN ('ASSIGNED', 'RUNNING')
  AND (($4 AND (w.id IS NULL OR w.status = 'OFFLINE'))
       OR (j.state = 'ASSIGNED' AND j.updated_at < $1)
       OR (j.state = 'RUNNING'
           AND j.started_at + j.timeout_ms * interval '1 millisecond' + $3 * interval '1 microsecond' < $2))
ORDER BY j.updated_at
LIMIT $5`

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
        ev             = coalesce(ev, '{0}') || pg_current_xact_id(),
        updated_at     = now()
    FROM locked
    WHERE id = l_id
    RETURNING l_ord, false AS u_started, l_from, l_error, event_seq, ` + jobColumns + `
),
` + evFailed + `
` + sqlLeaseOutcomes

	// The oldest FAILED jobs (jobs_failed_idx), locked with SKIP LOCKED so that concurrent sweeps
	// of several replicas share the work, with what queue.SettleFailed reads; the row versions read
	// are the locked ones. The decision is made in Go between this statement and the next, in the
	// same transaction.
	sqlJobFailedLock = `-- name: job_failed_lock
SELECT j.id::text, j.retry_count, j.max_retries, j.no_retry, j.cancel_requested,
       j.retry_after_ms, j.ttl_ms, coalesce(q.backoff_base_ms, 0), coalesce(q.backoff_max_ms, 0), j.failure_reason
FROM (
    SELECT id, queue, retry_count, max_retries, no_retry, cancel_requested, retry_after_ms, ttl_ms,
           failure_reason
    FROM jobs
    WHERE state = 'FAILED'
    ORDER BY updated_at
    LIMIT $1
    FOR NO KEY UPDATE SKIP LOCKED
) j
LEFT JOIN queues q ON q.name = j.queue`

	// Writes the decided values of locked FAILED jobs (sqlJobFailedLock, same transaction): the
	// state, reason, not_before and expires_at come from queue.SettleFailed, nothing is computed
	// here. The state check is repeated so that the statement can never write another edge.
	sqlJobSettleFailed = `-- name: job_settle_failed
WITH d AS (
    SELECT * FROM unnest($1::uuid[], $2::text[], $3::text[], $4::timestamptz[], $5::timestamptz[], $6::text[])
        AS t(d_id, d_to, d_reason, d_not_before, d_expires_at, d_failure_reason)
),
updated AS (
    UPDATE jobs SET
        state          = d_to,
        retry_count    = retry_count + CASE WHEN d_to = 'PENDING' THEN 1 ELSE 0 END,
        retry_after_ms = 0,
        not_before     = CASE WHEN d_to = 'PENDING' THEN d_not_before ELSE not_before END,
        expires_at     = CASE WHEN d_to = 'PENDING' THEN d_expires_at ELSE expires_at END,
        completed_at   = CASE WHEN d_to = 'PENDING' THEN NULL ELSE now() END,
        failure_reason = coalesce(nullif(d_failure_reason, ''), failure_reason),
        event_seq      = event_seq + 1,
        ev             = coalesce(ev, '{0}') || pg_current_xact_id(),
        updated_at     = now()
    FROM d
    WHERE id = d_id AND state = 'FAILED'
    RETURNING id, queue, type, state, event_seq, worker_id, attempt, updated_at, d_reason, last_error, trace_context
),
` + evSettled + `
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
        failure_reason = '` + queue.ReasonTTLExpired + `',
        completed_at   = now(),
        event_seq      = event_seq + 1,
        ev             = coalesce(ev, '{0}') || pg_current_xact_id(),
        updated_at     = now()
    FROM c
    WHERE id = c_id
    RETURNING id, queue, type, event_seq, worker_id, attempt, updated_at, trace_context
),
` + evExpired + `
SELECT queue, count(*)::int FROM updated GROUP BY queue`

	sqlWorkerMarkLost = `-- name: worker_mark_lost
UPDATE workers SET status = 'OFFLINE', updated_at = now()
WHERE status <> 'OFFLINE' AND last_heartbeat_at < now() - $1 * interval '1 microsecond'
RETURNING id`

	sqlJobHeldBy = `-- name: job_held_by
SELECT id::text FROM jobs WHERE worker_id = $1 AND state IN ('ASSIGNED', 'RUNNING')`
)

func init() {
	for _, e := range []struct{ from, to queue.State }{
		{queue.StateAssigned, queue.StateFailed},      // sqlJobFailMany
		{queue.StateRunning, queue.StateFailed},       // sqlJobFailMany
		{queue.StateFailed, queue.StatePending},       // sqlJobSettleFailed
		{queue.StateFailed, queue.StateDeadLettered},  // sqlJobSettleFailed
		{queue.StatePending, queue.StateDeadLettered}, // sqlJobExpireTTL
	} {
		if err := queue.CheckTransition(e.from, e.to); err != nil {
			panic(errs.Wrap("recovery SQL hard-codes an edge the transition table refuses", err))
		}
	}
}

func micros(d time.Duration) int64 { return d.Microseconds() }

// JobOverdue implements store.RecoveryStore.
func (s *Store) JobOverdue(ctx context.Context, p store.JobOverdueParams) ([]store.OverdueLease, error) {
	if p.Deadlines.Assignment <= 0 || p.Deadlines.Grace < 0 || p.Now.IsZero() || p.Limit < 1 || p.Limit > store.MaxDispatchBatch {
		return nil, fmt.Errorf("%w: overdue: assignment timeout %v, grace %v, now %v, limit %d", queue.ErrInvalidArgument,
			p.Deadlines.Assignment, p.Deadlines.Grace, p.Now, p.Limit)
	}
	rows, err := s.pool.Query(ctx, sqlJobOverdue, p.Deadlines.AssignedBefore(p.Now), p.Now, micros(p.Deadlines.Grace),
		p.WorkersLost, p.Limit)
	if err != nil {
		return nil, errs.Wrap("overdue jobs", err)
	}
	out, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (store.OverdueLease, error) {
		var (
			l         store.OverdueLease
			state     string
			started   *time.Time
			timeoutMS int64
		)
		err := r.Scan(&l.ID, &l.Attempt, &l.WorkerID, &l.Queue, &state, &l.UpdatedAt, &started, &timeoutMS, &l.WorkerLost)
		l.State = queue.State(state)
		if started != nil {
			l.StartedAt = *started
		}
		l.Timeout = time.Duration(timeoutMS) * time.Millisecond
		return l, err
	})
	if err != nil {
		return nil, errs.Wrap("overdue jobs", err)
	}
	return out, nil
}

// JobFailMany implements store.RecoveryStore.
func (s *Store) JobFailMany(ctx context.Context, fails []store.JobFailParams) ([]store.LeaseOutcome, error) {
	if err := store.ValidateDispatchBatch(len(fails)); err != nil {
		return nil, err
	}
	batch, leases := sqlstore.NewFailBatch(fails)
	b := leaseBatch{batch}
	var (
		ids      []string
		attempts []int32
		workers  []string
		reasons  []string
		errTexts []string
	)
	for _, i := range b.Sent {
		f := fails[i]
		ids = append(ids, b.Outcomes[i].ID)
		attempts = append(attempts, int32(f.Attempt)) // Validate bounds it to int32
		workers = append(workers, f.WorkerID)
		reasons = append(reasons, pgText(f.Reason))
		errTexts = append(errTexts, pgText(f.Error))
	}
	if len(ids) > 0 {
		rows, err := s.pool.Query(ctx, sqlJobFailMany, ids, attempts, workers, reasons, errTexts)
		if err != nil {
			return nil, errs.Wrap("fail jobs", err)
		}
		if err := b.collect(rows, leases, queue.StateAssigned, queue.StateRunning); err != nil {
			return nil, errs.Wrap("fail jobs", err)
		}
	}
	return b.Finish(leases, false), nil
}

// JobSettleFailed implements store.RecoveryStore.
func (s *Store) JobSettleFailed(ctx context.Context, limit int, decide func(queue.FailedJob) queue.Decision) (store.RetrySweep, error) {
	sweep := store.RetrySweep{Queues: map[string]int{}}
	if limit < 1 || limit > store.MaxDispatchBatch || decide == nil {
		return sweep, fmt.Errorf("%w: retry sweep limit %d", queue.ErrInvalidArgument, limit)
	}
	err := pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		rows, err := tx.Query(ctx, sqlJobFailedLock, limit)
		if err != nil {
			return err
		}
		var (
			ids, tos, reasons   []string
			failureReasons      []string
			notBefore, expireAt []*time.Time
		)
		var (
			id                                 string
			retries, maxRetries                int
			noRetry, cancel                    bool
			retryAfterMS, ttlMS, baseMS, maxMS int64
			lastReason                         string
		)
		_, err = pgx.ForEachRow(rows, []any{&id, &retries, &maxRetries, &noRetry, &cancel, &retryAfterMS,
			&ttlMS, &baseMS, &maxMS, &lastReason}, func() error {
			d := decide(queue.FailedJob{
				RetryCount: retries, MaxRetries: maxRetries, NoRetry: noRetry, CancelRequested: cancel,
				RetryAfter: time.Duration(retryAfterMS) * time.Millisecond, TTL: time.Duration(ttlMS) * time.Millisecond,
				Policy: queue.RetryPolicy{Base: time.Duration(baseMS) * time.Millisecond, Max: time.Duration(maxMS) * time.Millisecond},
				Reason: lastReason,
			})
			if d.From != queue.StateFailed || (d.To != queue.StatePending && d.To != queue.StateDeadLettered) {
				return &queue.TransitionError{From: d.From, To: d.To}
			}
			if d.Reason == "" || (d.To == queue.StatePending && d.NotBefore.IsZero()) {
				return fmt.Errorf("%w: settle %s: a reason (and not_before to PENDING) is required", queue.ErrInvalidArgument, id)
			}
			ids, tos, reasons = append(ids, id), append(tos, string(d.To)), append(reasons, d.Reason)
			notBefore, expireAt = append(notBefore, timePtr(d.NotBefore)), append(expireAt, timePtr(d.ExpiresAt))
			failureReasons = append(failureReasons, d.FailureReason)
			return nil
		})
		if err != nil || len(ids) == 0 {
			return err
		}
		rows, err = tx.Query(ctx, sqlJobSettleFailed, ids, tos, reasons, notBefore, expireAt, failureReasons)
		if err != nil {
			return err
		}
		var (
			q, state string
			n        int
		)
		_, err = pgx.ForEachRow(rows, []any{&q, &state, &n}, func() error {
			if queue.State(state) == queue.StatePending {
				sweep.Retried += n
				sweep.Queues[q] += n
				return nil
			}
			sweep.DeadLettered += n
			if sweep.DeadQueues == nil {
				sweep.DeadQueues = map[string]int{}
			}
			sweep.DeadQueues[q] += n
			return nil
		})
		return err
	})
	if err != nil {
		return store.RetrySweep{Queues: map[string]int{}}, errs.Wrap("settle failed jobs", err)
	}
	return sweep, nil
}

// timePtr is nil for the zero time (SQL NULL).
func timePtr(t time.Time) *time.Time {
	if t.IsZero() {
		return nil
	}
	return &t
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
		return nil, errs.Wrap("mark lost workers", err)
	}
	ids, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return nil, errs.Wrap("mark lost workers", err)
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

// The batch events of the reaper's failures, the retry sweep and the TTL expiry.
var (
	evFailed = batchEvent{
		src: "updated", job: "id", seq: "event_seq", queue: "queue", typ: "type", from: "l_from", to: "'FAILED'",
		reason: "failure_reason", err: "l_error", worker: "worker_id", attempt: "attempt", at: "updated_at",
		trace: "nullif(trace_context, '{}'::jsonb)",
	}.cte()
	evSettled = batchEvent{
		src: "updated", job: "id", seq: "event_seq", queue: "queue", typ: "type", from: "'FAILED'", to: "state",
		reason: "d_reason", err: "CASE WHEN state = 'PENDING' THEN '' ELSE last_error END", worker: "worker_id",
		attempt: "attempt", at: "updated_at", trace: "nullif(trace_context, '{}'::jsonb)",
	}.cte()
	evExpired = batchEvent{
		src: "updated", job: "id", seq: "event_seq", queue: "queue", typ: "type", from: "'PENDING'",
		to: "'DEAD_LETTERED'", reason: "'" + queue.ReasonTTLExpired + "'", worker: "worker_id", attempt: "attempt",
		at: "updated_at", trace: "nullif(trace_context, '{}'::jsonb)",
	}.cte()
)
