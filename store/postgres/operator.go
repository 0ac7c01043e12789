package postgres

import (
	"context"
	"errors"
	"fmt"
	"math"

	"github.com/jackc/pgx/v5"

	"github.com/jq-dev/jq/queue"
	"github.com/jq-dev/jq/store"
)

// The operator's statements decide on the job as the locked CTE reads it, as the batch statements
// of dispatch_lease.go do: FOR NO KEY UPDATE returns the newest row version (re-read after waiting
// for a concurrent writer), so l_from is the state actually being left, and the UPDATE, which
// matches the locked id alone, cannot apply to a job that moved on. Each returns no row when it
// did nothing; the caller then reads the state to say why.
const (
	// PENDING, ASSIGNED, FAILED → DEAD_LETTERED with an event; RUNNING → cancel_requested, without
	// an event (the state does not change; the failure that follows records the cancellation).
	// A RUNNING job already cancel-requested is rewritten unchanged (updated_at kept), so that the
	// statement returns it as it stands.
	sqlJobCancel = `-- name: job_cancel
WITH locked AS MATERIALIZED (
    SELECT id AS l_id, state AS l_from FROM jobs WHERE id = $1::uuid FOR NO KEY UPDATE
),
updated AS (
    UPDATE jobs SET
        state            = CASE WHEN l_from = 'RUNNING' THEN state ELSE 'DEAD_LETTERED' END,
        cancel_requested = cancel_requested OR l_from = 'RUNNING',
        completed_at     = CASE WHEN l_from = 'RUNNING' THEN completed_at ELSE now() END,
        failure_reason   = CASE WHEN l_from = 'RUNNING' THEN failure_reason
                                ELSE '` + store.ReasonCancelled + `' END,
        event_seq        = event_seq + CASE WHEN l_from = 'RUNNING' THEN 0 ELSE 1 END,
        updated_at       = CASE WHEN l_from = 'RUNNING' AND cancel_requested THEN updated_at ELSE now() END
    FROM locked
    WHERE id = l_id AND l_from IN ('PENDING', 'ASSIGNED', 'FAILED', 'RUNNING')
    RETURNING l_from, event_seq, ` + jobColumns + `
),
event AS (
    INSERT INTO job_events (job_id, seq, queue, type, from_state, to_state, reason, error, worker_id,
                            attempt, created_at)
    SELECT id::uuid, event_seq, queue, type, l_from, state, '` + store.ReasonCancelled + `', '',
           worker_id, attempt, updated_at
    FROM updated
    WHERE l_from <> 'RUNNING'
)
SELECT ` + jobColumns + ` FROM updated`

	// FAILED, DEAD_LETTERED → PENDING, due now, with the retry budget and both flags reset.
	// worker_id keeps the last holder, as for every →PENDING.
	sqlJobRetry = `-- name: job_retry
WITH locked AS MATERIALIZED (
    SELECT id AS l_id, state AS l_from FROM jobs WHERE id = $1::uuid FOR NO KEY UPDATE
),
updated AS (
    UPDATE jobs SET
        state            = 'PENDING',
        retry_count      = 0,
        not_before       = now(),
        expires_at       = CASE WHEN ttl_ms > 0 THEN now() + ttl_ms * interval '1 millisecond' END,
        completed_at     = NULL,
        no_retry         = false,
        cancel_requested = false,
        retry_after_ms   = 0,
        event_seq        = event_seq + 1,
        updated_at       = now()
    FROM locked
    WHERE id = l_id AND l_from IN ('FAILED', 'DEAD_LETTERED')
    RETURNING l_from, event_seq, ` + jobColumns + `
),
event AS (
    INSERT INTO job_events (job_id, seq, queue, type, from_state, to_state, reason, error, worker_id,
                            attempt, created_at)
    SELECT id::uuid, event_seq, queue, type, l_from, 'PENDING', '` + store.ReasonManualRetry + `', '',
           worker_id, attempt, updated_at
    FROM updated
)
SELECT ` + jobColumns + ` FROM updated`

	sqlJobState = `-- name: job_state
SELECT state FROM jobs WHERE id = $1`

	// Repeating the request keeps updated_at: the worker is unchanged.
	sqlWorkerRequestShutdown = `-- name: worker_request_shutdown
UPDATE workers AS w SET
    status             = 'DRAINING',
    shutdown_requested = true,
    updated_at         = CASE WHEN status = 'DRAINING' AND shutdown_requested THEN updated_at ELSE now() END
WHERE id = $1 AND status <> 'OFFLINE'
RETURNING ` + workerColumns

	sqlWorkerStatus = `-- name: worker_status
SELECT status FROM workers WHERE id = $1`

	// Each job is read by its id alone (see dispatch_lease.go on plans over unnest); no lock, since
	// the answer is advice to the worker and its next heartbeat asks again. The result keeps the
	// input order.
	// Per job id, not per lease (the heartbeat's cancel list names jobs): a worker still running a
	// stale attempt next to the current one of the same job (it was re-dispatched to it) must not
	// have the current one cancelled with it. So an id is cancelled when none of its leases is
	// current, or when its current lease was cancel-requested.
	sqlJobLeasesToCancel = `-- name: job_leases_to_cancel
WITH l AS (
    SELECT i_id, i_ord,
           coalesce(j.state IN ('ASSIGNED', 'RUNNING') AND j.attempt = i_attempt AND j.worker_id = $3, false) AS cur,
           coalesce(j.cancel_requested, false) AS creq
    FROM unnest($1::uuid[], $2::integer[]) WITH ORDINALITY AS t(i_id, i_attempt, i_ord)
    LEFT JOIN LATERAL (
        SELECT state, attempt, worker_id, cancel_requested FROM jobs WHERE id = i_id OFFSET 0
    ) j ON true
)
SELECT i_id::text
FROM l
GROUP BY i_id
HAVING NOT bool_or(cur) OR bool_or(cur AND creq)
ORDER BY min(i_ord)`
)

// operatorTries bounds how often an operator action re-decides after the job changed state between
// its statement and the read that explains a refusal: only a job that keeps moving (retried and
// dead-lettered again meanwhile) exhausts it.
const operatorTries = 3

// JobCancel implements store.OperatorStore. Setting cancel_requested on a RUNNING job writes no
// event: its state does not change.
func (s *Store) JobCancel(ctx context.Context, id string) (*queue.Job, error) {
	id, err := store.ParseJobID(id)
	if err != nil {
		return nil, err
	}
	return s.operatorJob(ctx, "cancel job", sqlJobCancel, id, func(st queue.State) error {
		if st.Terminal() {
			return fmt.Errorf("%w: job %s is %s: nothing to cancel", queue.ErrIllegalTransition, id, st)
		}
		return nil
	})
}

// JobRetry implements store.OperatorStore.
func (s *Store) JobRetry(ctx context.Context, id string) (*queue.Job, error) {
	id, err := store.ParseJobID(id)
	if err != nil {
		return nil, err
	}
	return s.operatorJob(ctx, "retry job", sqlJobRetry, id, func(st queue.State) error {
		if st != queue.StateFailed && st != queue.StateDeadLettered {
			return fmt.Errorf("%w: job %s is %s: only FAILED or DEAD_LETTERED jobs can be retried",
				queue.ErrIllegalTransition, id, st)
		}
		return nil
	})
}

// operatorJob runs an operator statement on job id. When it changes nothing, refused explains the
// job's current state; a nil explanation means the job moved into a state the statement acts on
// meanwhile, and the statement runs again.
func (s *Store) operatorJob(ctx context.Context, op, sql, id string, refused func(queue.State) error) (*queue.Job, error) {
	var last queue.State
	for range operatorTries {
		j, err := scanJob(s.pool.QueryRow(ctx, sql, id))
		if err == nil {
			return j, nil
		}
		if !errors.Is(err, pgx.ErrNoRows) {
			return nil, fmt.Errorf("postgres: %s: %w", op, err)
		}
		var state string
		err = s.pool.QueryRow(ctx, sqlJobState, id).Scan(&state)
		if errors.Is(err, pgx.ErrNoRows) {
			return nil, fmt.Errorf("%w: %s", queue.ErrJobNotFound, id)
		}
		if err != nil {
			return nil, fmt.Errorf("postgres: %s: %w", op, err)
		}
		last = queue.State(state)
		if err := refused(last); err != nil {
			return nil, err
		}
	}
	return nil, fmt.Errorf("%w: job %s keeps changing state (last seen %s); try again", queue.ErrStaleAttempt, id, last)
}

// WorkerRequestShutdown implements store.OperatorStore.
func (s *Store) WorkerRequestShutdown(ctx context.Context, id string) (*queue.Worker, error) {
	for range operatorTries {
		w, err := scanWorker(s.pool.QueryRow(ctx, sqlWorkerRequestShutdown, id))
		if err == nil {
			return w, nil
		}
		if !errors.Is(err, pgx.ErrNoRows) {
			return nil, fmt.Errorf("postgres: request worker shutdown: %w", err)
		}
		var status string
		err = s.pool.QueryRow(ctx, sqlWorkerStatus, id).Scan(&status)
		if errors.Is(err, pgx.ErrNoRows) {
			return nil, fmt.Errorf("%w: %q", queue.ErrWorkerNotFound, id)
		}
		if err != nil {
			return nil, fmt.Errorf("postgres: request worker shutdown: %w", err)
		}
		if queue.WorkerStatus(status) == queue.WorkerOffline {
			return nil, fmt.Errorf("%w: worker %q is OFFLINE", queue.ErrIllegalTransition, id)
		}
		// It registered again meanwhile: ask again.
	}
	return nil, fmt.Errorf("%w: worker %q keeps changing status; try again", queue.ErrStaleAttempt, id)
}

// JobLeasesToCancel implements store.RecoveryStore. Leases with a malformed id are skipped; an id
// listed twice is returned once.
func (s *Store) JobLeasesToCancel(ctx context.Context, workerID string, leases []store.JobLease) ([]string, error) {
	if err := store.ValidateDispatchBatch(len(leases)); err != nil {
		return nil, err
	}
	ids := make([]string, 0, len(leases))
	attempts := make([]int32, 0, len(leases))
	for _, l := range leases {
		id, err := store.ParseJobID(l.ID)
		if err != nil {
			continue
		}
		ids = append(ids, id)
		attempts = append(attempts, clampInt32(l.Attempt))
	}
	if len(ids) == 0 {
		return nil, nil
	}
	rows, err := s.pool.Query(ctx, sqlJobLeasesToCancel, ids, attempts, workerID)
	if err != nil {
		return nil, fmt.Errorf("postgres: leases to cancel: %w", err)
	}
	stale, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return nil, fmt.Errorf("postgres: leases to cancel: %w", err)
	}
	seen := make(map[string]bool, len(stale))
	out := stale[:0]
	for _, id := range stale {
		if !seen[id] {
			seen[id] = true
			out = append(out, id)
		}
	}
	return out, nil
}

// clampInt32 bounds an attempt to the column's range; an out-of-range attempt matches no job, so
// its lease is reported stale, as it should be.
func clampInt32(v int) int32 {
	return int32(min(max(v, math.MinInt32), math.MaxInt32))
}

// sqlJobConsumeResult takes a kept result away in the same statement that returns it: the row lock
// makes concurrent consumers queue up, and the ones behind the first re-check the WHERE on the
// row the first one wrote and find no result. keep_result stays as submitted (the job record says
// what was asked); the checksum and size stay as for a result that was never kept.
const sqlJobConsumeResult = `-- name: job_consume_result
WITH old AS (
    SELECT id AS o_id, result AS o_result
    FROM jobs
    WHERE id = $1 AND state = 'DONE' AND result IS NOT NULL
    FOR NO KEY UPDATE
),
taken AS (
    UPDATE jobs SET result = NULL, updated_at = now()
    FROM old
    WHERE id = o_id
    RETURNING o_result, ` + jobColumns + `
)
SELECT * FROM taken`

// JobConsumeResult implements store.OperatorStore.
func (s *Store) JobConsumeResult(ctx context.Context, id string) (*queue.Job, bool, error) {
	canon, err := store.ParseJobID(id)
	if err != nil {
		return nil, false, err
	}
	var result []byte
	j, err := scanJob(leadingRow{s.pool.QueryRow(ctx, sqlJobConsumeResult, canon), []any{&result}})
	if errors.Is(err, pgx.ErrNoRows) {
		j, err := s.JobGet(ctx, canon)
		return j, false, err
	}
	if err != nil {
		return nil, false, fmt.Errorf("postgres: consume result of %s: %w", canon, err)
	}
	j.Result = result
	return j, true, nil
}
