package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"math"

	"github.com/jq-dev/jq/queue"
	"github.com/jq-dev/jq/store"
)

var _ store.OperatorStore = (*Store)(nil)

// The operator's statements decide in one write on the row as it stands: with one writer, the state
// read to explain a refusal is the one the update found.
const (
	// queue.Cancel of a RUNNING job: the flag only, no event (the state does not change; the
	// failure that follows records the cancellation). Asking again keeps updated_at.
	sqlJobRequestCancel = `
UPDATE jobs SET
    cancel_requested = 1,
    updated_at       = CASE WHEN cancel_requested THEN updated_at ELSE ?3 END
WHERE id = ?1 AND state = 'RUNNING' AND attempt = ?2
RETURNING ` + jobColumns

	sqlJobState = `SELECT state FROM jobs WHERE id = ?1`

	// Repeating the request keeps updated_at: the worker is unchanged.
	sqlWorkerRequestShutdown = `
UPDATE workers SET
    status             = 'DRAINING',
    shutdown_requested = 1,
    updated_at         = CASE WHEN status = 'DRAINING' AND shutdown_requested THEN updated_at ELSE ?2 END
WHERE id = ?1 AND status <> 'OFFLINE'`

	sqlWorkerByID = `SELECT ` + workerColumns + ` FROM workers w WHERE w.id = ?1`

	sqlWorkerStatus = `SELECT status FROM workers WHERE id = ?1`

	// The jobs a heartbeat's leases name (?1: a JSON array of ids), each by its primary key; no
	// lock, since the answer is advice to the worker and its next heartbeat asks again.
	sqlJobLeaseStates = `
SELECT id, state, attempt, worker_id, cancel_requested FROM jobs
WHERE id IN (SELECT value FROM json_each(?1))`

	// A kept result is read and taken away in the same write: of concurrent consumers the first
	// one takes it, the others find none. keep_result stays as submitted (the job record says what
	// was asked); the checksum and size stay as for a result that was never kept.
	sqlJobKeptResult = `SELECT result FROM jobs WHERE id = ?1 AND state = 'DONE' AND result IS NOT NULL`

	sqlJobTakeResult = `
UPDATE jobs SET result = NULL, updated_at = ?2
WHERE id = ?1
RETURNING ` + jobColumns
)

// JobRequestCancel implements store.OperatorStore.
func (s *Store) JobRequestCancel(ctx context.Context, l store.JobLease) (*queue.Job, error) {
	id := l.ID
	var (
		j     *queue.Job
		state string
	)
	err := s.write(ctx, func(tx *wtx) error {
		var err error
		j, err = scanJob(tx.queryRow(sqlJobRequestCancel, id, clampInt32(l.Attempt), us(tx.now)))
		if !errors.Is(err, sql.ErrNoRows) {
			return err
		}
		j = nil
		err = tx.queryRow(sqlJobState, id).Scan(&state)
		if errors.Is(err, sql.ErrNoRows) {
			return fmt.Errorf("%w: %s", queue.ErrJobNotFound, id)
		}
		return err
	})
	switch {
	case errors.Is(err, queue.ErrJobNotFound):
		return nil, err
	case err != nil:
		return nil, errs.Wrap("request cancel", err)
	case j == nil:
		return nil, fmt.Errorf("%w: job %s is %s, not RUNNING at attempt %d", queue.ErrStaleAttempt, id, state, l.Attempt)
	}
	return j, nil
}

// WorkerRequestShutdown implements store.OperatorStore.
func (s *Store) WorkerRequestShutdown(ctx context.Context, id string) (*queue.Worker, error) {
	var (
		w      *queue.Worker
		status string
	)
	err := s.write(ctx, func(tx *wtx) error {
		res, err := tx.exec(sqlWorkerRequestShutdown, id, us(tx.now))
		if err != nil {
			return err
		}
		if n, err := res.RowsAffected(); err != nil || n == 1 {
			if err == nil {
				w, err = scanWorker(tx.queryRow(sqlWorkerByID, id))
			}
			return err
		}
		err = tx.queryRow(sqlWorkerStatus, id).Scan(&status)
		if errors.Is(err, sql.ErrNoRows) {
			return fmt.Errorf("%w: %q", queue.ErrWorkerNotFound, id)
		}
		return err
	})
	switch {
	case errors.Is(err, queue.ErrWorkerNotFound):
		return nil, err
	case err != nil:
		return nil, errs.Wrap("request worker shutdown", err)
	case w == nil:
		return nil, fmt.Errorf("%w: worker %q is %s", queue.ErrIllegalTransition, id, status)
	}
	return w, nil
}

// JobLeasesToCancel implements store.RecoveryStore. Leases with a malformed id are skipped; an id
// listed twice is returned once, in the order of its first lease.
//
// Per job id, not per lease (the heartbeat's cancel list names jobs): a worker still running a
// stale attempt next to the current one of the same job (it was re-dispatched to it) must not have
// the current one cancelled with it. So an id is cancelled when none of its leases is current, or
// when its current lease was cancel-requested.
func (s *Store) JobLeasesToCancel(ctx context.Context, workerID string, leases []store.JobLease) ([]string, error) {
	if err := store.ValidateDispatchBatch(len(leases)); err != nil {
		return nil, err
	}
	var order []string             // distinct ids, first lease first
	attempts := map[string][]int{} // id → the attempts listed
	for _, l := range leases {
		id, err := store.ParseJobID(l.ID)
		if err != nil {
			continue
		}
		if _, ok := attempts[id]; !ok {
			order = append(order, id)
		}
		attempts[id] = append(attempts[id], l.Attempt)
	}
	if len(order) == 0 {
		return nil, nil
	}
	type held struct {
		state, worker string
		attempt       int
		cancel        bool
	}
	jobs := make(map[string]held, len(order))
	rows, err := s.query(ctx, sqlJobLeaseStates, listText(order))
	if err != nil {
		return nil, errs.Wrap("leases to cancel", err)
	}
	defer rows.Close()
	for rows.Next() {
		var (
			id string
			h  held
		)
		if err := rows.Scan(&id, &h.state, &h.attempt, &h.worker, &h.cancel); err != nil {
			return nil, errs.Wrap("leases to cancel", err)
		}
		jobs[id] = h
	}
	if err := rows.Err(); err != nil {
		return nil, errs.Wrap("leases to cancel", err)
	}
	var out []string
	for _, id := range order {
		h, ok := jobs[id]
		current := false
		if ok && h.worker == workerID && (h.state == string(queue.StateAssigned) || h.state == string(queue.StateRunning)) {
			for _, a := range attempts[id] {
				current = current || a == h.attempt
			}
		}
		if !current || h.cancel {
			out = append(out, id)
		}
	}
	return out, nil
}

// clampInt32 bounds an attempt to the column's range, as the Postgres store does: an out-of-range
// attempt matches no job, so its lease is reported stale, as it should be.
func clampInt32(v int) int32 {
	return int32(min(max(v, math.MinInt32), math.MaxInt32))
}

// JobConsumeResult implements store.OperatorStore.
func (s *Store) JobConsumeResult(ctx context.Context, id string) (*queue.Job, bool, error) {
	var j *queue.Job
	err := s.write(ctx, func(tx *wtx) error {
		j = nil
		var result []byte
		err := tx.queryRow(sqlJobKeptResult, id).Scan(&result)
		if errors.Is(err, sql.ErrNoRows) {
			return nil
		}
		if err != nil {
			return err
		}
		if result == nil {
			result = []byte{} // a kept empty result is a result
		}
		j, err = scanJob(tx.queryRow(sqlJobTakeResult, id, us(tx.now)))
		if err == nil {
			j.Result = result
		}
		return err
	})
	if err != nil {
		return nil, false, fmt.Errorf("sqlite: consume result of %s: %w", id, err)
	}
	if j == nil {
		j, err := s.JobGet(ctx, id)
		return j, false, err
	}
	return j, true, nil
}
