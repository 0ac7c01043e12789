package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"

	"github.com/jq-dev/jq/queue"
	"github.com/jq-dev/jq/store"
	"github.com/jq-dev/jq/store/internal/sqlstore"
)

var _ store.RecoveryStore = (*Store)(nil)

// The reaper's statements. Each write is a compare-and-set on state (and attempt) inside one write
// of the single writer, so a job that a worker's report or an operator moved on before it is left
// alone. Liveness is judged by the store's clock (Config.Now), never by the caller's, as Postgres
// judges it by now().
const (
	// The candidates only: the reason is decided in Go (queue.Deadlines.Overdue) from the columns
	// returned. The cutoffs are the caller's values; the execution deadline is per job (its own
	// timeout), so it is the one formula this filter repeats of queue.Deadlines.RunDeadline.
	sqlJobOverdue = `
SELECT j.id, j.attempt, j.worker_id, j.queue, j.state, j.updated_at, j.started_at, j.timeout_ms,
       ?4 AND (w.id IS NULL OR w.status = 'OFFLINE')
FROM jobs j
LEFT JOIN workers w ON w.id = j.worker_id
WHERE j.state IN ('ASSIGNED', 'RUNNING')
  AND ((?4 AND (w.id IS NULL OR w.status = 'OFFLINE'))
       OR (j.state = 'ASSIGNED' AND j.updated_at < ?1)
       OR (j.state = 'RUNNING' AND j.started_at + j.timeout_ms * 1000 + ?3 < ?2))
ORDER BY j.updated_at
LIMIT ?5`

	sqlJobFailRead = `SELECT state, attempt, worker_id FROM jobs WHERE id = ?1`

	// The worker is not compared: the reaper fails whoever holds the attempt.
	sqlJobFail = `
UPDATE jobs SET
    state          = 'FAILED',
    failure_reason = ?2,
    last_error     = CASE WHEN ?3 <> '' THEN ?3 ELSE last_error END,
    event_seq      = event_seq + 1,
    updated_at     = ?4
WHERE id = ?1 AND state = ?5 AND attempt = ?6
RETURNING ` + leanJobColumns + `, event_seq`

	// The oldest FAILED jobs (jobs_failed_idx), with what queue.SettleFailed reads. The decision is
	// made in Go between this read and the updates, in the same write.
	sqlJobFailedRead = `
SELECT j.id, j.retry_count, j.max_retries, j.no_retry, j.cancel_requested, j.retry_after_ms, j.ttl_ms,
       coalesce(q.backoff_base_ms, 0), coalesce(q.backoff_max_ms, 0), j.failure_reason
FROM jobs j
LEFT JOIN queues q ON q.name = j.queue
WHERE j.state = 'FAILED'
ORDER BY j.updated_at
LIMIT ?1`

	// Writes the decided values: the state, reason, not_before and expires_at come from
	// queue.SettleFailed, nothing is computed here. The state check is repeated so that the
	// statement can never write another edge.
	sqlJobSettle = `
UPDATE jobs SET
    state          = ?2,
    retry_count    = retry_count + CASE WHEN ?2 = 'PENDING' THEN 1 ELSE 0 END,
    retry_after_ms = 0,
    not_before     = CASE WHEN ?2 = 'PENDING' THEN ?3 ELSE not_before END,
    expires_at     = CASE WHEN ?2 = 'PENDING' THEN ?4 ELSE expires_at END,
    completed_at   = CASE WHEN ?2 = 'PENDING' THEN NULL ELSE ?6 END,
    failure_reason = coalesce(nullif(?5, ''), failure_reason),
    event_seq      = event_seq + 1,
    updated_at     = ?6
WHERE id = ?1 AND state = 'FAILED'
RETURNING queue, type, event_seq, worker_id, attempt, last_error`

	// jobs_expires_idx holds exactly the PENDING jobs with a TTL.
	sqlJobExpireTTL = `
UPDATE jobs SET
    state          = 'DEAD_LETTERED',
    failure_reason = '` + queue.ReasonTTLExpired + `',
    completed_at   = ?1,
    event_seq      = event_seq + 1,
    updated_at     = ?1
WHERE id IN (SELECT id FROM jobs
             WHERE state = 'PENDING' AND expires_at IS NOT NULL AND expires_at < ?1
             ORDER BY expires_at
             LIMIT ?2)
  AND state = 'PENDING'
RETURNING id, queue, type, event_seq, worker_id, attempt`

	sqlWorkerMarkLost = `
UPDATE workers SET status = 'OFFLINE', updated_at = ?1
WHERE status <> 'OFFLINE' AND last_heartbeat_at < ?1 - ?2
RETURNING id`

	sqlJobHeldBy = `SELECT id FROM jobs WHERE worker_id = ?1 AND state IN ('ASSIGNED', 'RUNNING')`
)

// JobOverdue implements store.RecoveryStore.
func (s *Store) JobOverdue(ctx context.Context, p store.JobOverdueParams) ([]store.OverdueLease, error) {
	if p.Deadlines.Assignment <= 0 || p.Deadlines.Grace < 0 || p.Now.IsZero() || p.Limit < 1 || p.Limit > store.MaxDispatchBatch {
		return nil, fmt.Errorf("%w: overdue: assignment timeout %v, grace %v, now %v, limit %d", queue.ErrInvalidArgument,
			p.Deadlines.Assignment, p.Deadlines.Grace, p.Now, p.Limit)
	}
	rows, err := s.query(ctx, sqlJobOverdue, us(p.Deadlines.AssignedBefore(p.Now)), us(p.Now),
		p.Deadlines.Grace.Microseconds(), p.WorkersLost, p.Limit)
	if err != nil {
		return nil, errs.Wrap("overdue jobs", err)
	}
	defer rows.Close()
	var out []store.OverdueLease
	for rows.Next() {
		var (
			l         store.OverdueLease
			state     string
			timeoutMS int64
		)
		if err := rows.Scan(&l.ID, &l.Attempt, &l.WorkerID, &l.Queue, &state, tm{&l.UpdatedAt}, tm{&l.StartedAt},
			&timeoutMS, &l.WorkerLost); err != nil {
			return nil, errs.Wrap("overdue jobs", err)
		}
		l.State = queue.State(state)
		l.Timeout = fromMillis(timeoutMS)
		out = append(out, l)
	}
	if err := rows.Err(); err != nil {
		return nil, errs.Wrap("overdue jobs", err)
	}
	return out, nil
}

// JobFailMany implements store.RecoveryStore.
func (s *Store) JobFailMany(ctx context.Context, fails []store.JobFailParams) ([]store.LeaseOutcome, error) {
	if err := store.ValidateDispatchBatch(len(fails)); err != nil {
		return nil, err
	}
	b, leases := sqlstore.NewFailBatch(fails)
	if len(b.Sent) > 0 {
		err := s.write(ctx, func(tx *wtx) error {
			now := us(tx.now)
			for _, i := range b.Sent {
				if err := failLease(tx, &b.Outcomes[i], fails[i], now); err != nil {
					return err
				}
			}
			return nil
		})
		if err != nil {
			return nil, errs.Wrap("fail jobs", err)
		}
	}
	return b.Finish(leases, false), nil
}

// failLease moves one job ASSIGNED|RUNNING→FAILED when it is in that state at the lease's attempt;
// the event names the state actually left.
func failLease(tx *wtx, o *store.LeaseOutcome, f store.JobFailParams, now int64) error {
	var (
		state, worker string
		attempt       int
	)
	err := tx.queryRow(sqlJobFailRead, o.ID).Scan(&state, &attempt, &worker)
	if errors.Is(err, sql.ErrNoRows) {
		o.Err = fmt.Errorf("%w: %s", queue.ErrJobNotFound, o.ID)
		return nil
	}
	if err != nil {
		return err
	}
	from := queue.State(state)
	if attempt != f.Attempt || (from != queue.StateAssigned && from != queue.StateRunning) {
		o.Err = staleLease(o.ID, state, attempt, worker, f.JobLease, queue.StateAssigned, queue.StateRunning)
		return nil
	}
	reason, errMsg := storableText(f.Reason), storableText(f.Error)
	var seq int64
	j, err := scanJob(tx.queryRow(sqlJobFail, o.ID, reason, errMsg, now, state, attempt), &seq)
	if err != nil {
		return err
	}
	o.Job = j
	return leaseEvent(tx, j, seq, from, reason, errMsg, now, nil)
}

// JobSettleFailed implements store.RecoveryStore. decide runs in the write, between the read of
// the FAILED jobs and their updates.
func (s *Store) JobSettleFailed(ctx context.Context, limit int, decide func(queue.FailedJob) queue.Decision) (store.RetrySweep, error) {
	sweep := store.RetrySweep{Queues: map[string]int{}}
	if limit < 1 || limit > store.MaxDispatchBatch || decide == nil {
		return sweep, fmt.Errorf("%w: retry sweep limit %d", queue.ErrInvalidArgument, limit)
	}
	err := s.write(ctx, func(tx *wtx) error {
		sweep = store.RetrySweep{Queues: map[string]int{}}
		decided, err := decideFailed(tx, limit, decide)
		if err != nil {
			return err
		}
		now := us(tx.now)
		for _, d := range decided {
			var (
				q, typ, worker, lastError string
				seq                       int64
				attempt                   int
			)
			err := tx.queryRow(sqlJobSettle, d.id, string(d.To), usPtr(d.NotBefore), usPtr(d.ExpiresAt),
				d.FailureReason, now).Scan(&q, &typ, &seq, &worker, &attempt, &lastError)
			if errors.Is(err, sql.ErrNoRows) {
				continue // not FAILED any more: impossible with one writer, and never overwritten
			}
			if err != nil {
				return err
			}
			errText := lastError
			if d.To == queue.StatePending {
				errText = ""
			}
			if _, err := tx.exec(sqlLeaseEvent, d.id, seq, q, typ, string(queue.StateFailed), string(d.To), d.Reason,
				errText, worker, attempt, now, nil); err != nil {
				return err
			}
			if d.To == queue.StatePending {
				sweep.Retried++
				sweep.Queues[q]++
				continue
			}
			sweep.DeadLettered++
			if sweep.DeadQueues == nil {
				sweep.DeadQueues = map[string]int{}
			}
			sweep.DeadQueues[q]++
		}
		return nil
	})
	if err != nil {
		return store.RetrySweep{Queues: map[string]int{}}, errs.Wrap("settle failed jobs", err)
	}
	return sweep, nil
}

type settleDecision struct {
	id string
	queue.Decision
}

// decideFailed reads up to limit FAILED jobs, oldest first, and asks decide for each. A decision
// for another edge than FAILED→PENDING|DEAD_LETTERED fails the sweep (ErrIllegalTransition).
func decideFailed(tx *wtx, limit int, decide func(queue.FailedJob) queue.Decision) ([]settleDecision, error) {
	rows, err := tx.query(sqlJobFailedRead, limit)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []settleDecision
	for rows.Next() {
		var (
			id                                 string
			f                                  queue.FailedJob
			retryAfterMS, ttlMS, baseMS, maxMS int64
		)
		if err := rows.Scan(&id, &f.RetryCount, &f.MaxRetries, &f.NoRetry, &f.CancelRequested, &retryAfterMS,
			&ttlMS, &baseMS, &maxMS, &f.Reason); err != nil {
			return nil, err
		}
		f.RetryAfter, f.TTL = fromMillis(retryAfterMS), fromMillis(ttlMS)
		f.Policy = queue.RetryPolicy{Base: fromMillis(baseMS), Max: fromMillis(maxMS)}
		d := decide(f)
		if d.From != queue.StateFailed || (d.To != queue.StatePending && d.To != queue.StateDeadLettered) {
			return nil, &queue.TransitionError{From: d.From, To: d.To}
		}
		if d.Reason == "" || (d.To == queue.StatePending && d.NotBefore.IsZero()) {
			return nil, fmt.Errorf("%w: settle %s: a reason (and not_before to PENDING) is required", queue.ErrInvalidArgument, id)
		}
		out = append(out, settleDecision{id: id, Decision: d})
	}
	return out, rows.Err()
}

// JobExpireTTL implements store.RecoveryStore.
func (s *Store) JobExpireTTL(ctx context.Context, limit int) (map[string]int, error) {
	if limit < 1 || limit > store.MaxDispatchBatch {
		return nil, fmt.Errorf("%w: ttl sweep limit %d", queue.ErrInvalidArgument, limit)
	}
	byQueue := map[string]int{}
	err := s.write(ctx, func(tx *wtx) error {
		clear(byQueue)
		now := us(tx.now)
		rows, err := tx.query(sqlJobExpireTTL, now, limit)
		if err != nil {
			return err
		}
		all, err := scanExpired(rows)
		if err != nil {
			return err
		}
		for _, e := range all {
			if _, err := tx.exec(sqlLeaseEvent, e.id, e.seq, e.queue, e.typ, string(queue.StatePending),
				string(queue.StateDeadLettered), queue.ReasonTTLExpired, "", e.worker, e.attempt, now, nil); err != nil {
				return err
			}
			byQueue[e.queue]++
		}
		return nil
	})
	if err != nil {
		return nil, errs.Wrap("expire jobs", err)
	}
	return byQueue, nil
}

// expiredJob is a row sqlJobExpireTTL returns.
type expiredJob struct {
	id, queue, typ, worker string
	seq                    int64
	attempt                int
}

// scanExpired reads sqlJobExpireTTL's rows (all of them before the events are written) and closes
// rows.
func scanExpired(rows *sql.Rows) ([]expiredJob, error) {
	defer rows.Close()
	var all []expiredJob
	for rows.Next() {
		var e expiredJob
		if err := rows.Scan(&e.id, &e.queue, &e.typ, &e.seq, &e.worker, &e.attempt); err != nil {
			return nil, err
		}
		all = append(all, e)
	}
	return all, rows.Err()
}

// WorkerMarkLost implements store.RecoveryStore.
func (s *Store) WorkerMarkLost(ctx context.Context, timeout time.Duration) ([]string, error) {
	if timeout <= 0 {
		return nil, fmt.Errorf("%w: heartbeat timeout %v", queue.ErrInvalidArgument, timeout)
	}
	var ids []string
	err := s.write(ctx, func(tx *wtx) error {
		rows, err := tx.query(sqlWorkerMarkLost, us(tx.now), timeout.Microseconds())
		if err != nil {
			return err
		}
		ids, err = scanIDs(rows)
		return err
	})
	if err != nil {
		return nil, errs.Wrap("mark lost workers", err)
	}
	return ids, nil
}

// JobHeldBy implements store.RecoveryStore.
func (s *Store) JobHeldBy(ctx context.Context, workerID string) ([]string, error) {
	rows, err := s.query(ctx, sqlJobHeldBy, workerID)
	if err != nil {
		return nil, fmt.Errorf("sqlite: jobs held by %q: %w", workerID, err)
	}
	ids, err := scanIDs(rows)
	if err != nil {
		return nil, fmt.Errorf("sqlite: jobs held by %q: %w", workerID, err)
	}
	return ids, nil
}
