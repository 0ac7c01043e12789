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
	// queue.Cancel of a RUNNING job: the flag only, no event (the state does not change; the
	// failure that follows records the cancellation). Asking again keeps updated_at.
	sqlJobRequestCancel = `-- name: job_request_cancel
UPDATE jobs SET
    cancel_requested = true,
    updated_at       = CASE WHEN cancel_requested THEN updated_at ELSE now() END
WHERE id = $1 AND state = 'RUNNING' AND attempt = $2
RETURNING ` + jobColumns

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

// operatorTries bounds how often an operator action on a worker re-decides after the worker
// changed status between its statement and the read that explains a refusal.
const operatorTries = 3

// JobRequestCancel implements store.OperatorStore.
func (s *Store) JobRequestCancel(ctx context.Context, l store.JobLease) (*queue.Job, error) {
	id := l.ID
	j, err := scanJob(s.pool.QueryRow(ctx, sqlJobRequestCancel, id, clampInt32(l.Attempt)))
	if err == nil {
		return j, nil
	}
	if !errors.Is(err, pgx.ErrNoRows) {
		return nil, errs.Wrap("request cancel", err)
	}
	var state string
	err = s.pool.QueryRow(ctx, sqlJobState, id).Scan(&state)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, fmt.Errorf("%w: %s", queue.ErrJobNotFound, id)
	}
	if err != nil {
		return nil, errs.Wrap("request cancel", err)
	}
	return nil, fmt.Errorf("%w: job %s is %s, not RUNNING at attempt %d", queue.ErrStaleAttempt, id, state, l.Attempt)
}

// WorkerRequestShutdown implements store.OperatorStore.
func (s *Store) WorkerRequestShutdown(ctx context.Context, id string) (*queue.Worker, error) {
	for range operatorTries {
		w, err := scanWorker(s.pool.QueryRow(ctx, sqlWorkerRequestShutdown, id))
		if err == nil {
			return w, nil
		}
		if !errors.Is(err, pgx.ErrNoRows) {
			return nil, errs.Wrap("request worker shutdown", err)
		}
		var status string
		err = s.pool.QueryRow(ctx, sqlWorkerStatus, id).Scan(&status)
		if errors.Is(err, pgx.ErrNoRows) {
			return nil, fmt.Errorf("%w: %q", queue.ErrWorkerNotFound, id)
		}
		if err != nil {
			return nil, errs.Wrap("request worker shutdown", err)
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
		return nil, errs.Wrap("leases to cancel", err)
	}
	stale, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return nil, errs.Wrap("leases to cancel", err)
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
	var result []byte
	j, err := scanJob(leadingRow{s.pool.QueryRow(ctx, sqlJobConsumeResult, id), []any{&result}})
	if errors.Is(err, pgx.ErrNoRows) {
		j, err := s.JobGet(ctx, id)
		return j, false, err
	}
	if err != nil {
		return nil, false, fmt.Errorf("postgres: consume result of %s: %w", id, err)
	}
	j.Result = result
	return j, true, nil
}
