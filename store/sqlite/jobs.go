package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"

	"github.com/jq-dev/jq/queue"
	"github.com/jq-dev/jq/store"
)

const (
	sqlJobGet = `SELECT ` + jobColumns + ` FROM jobs WHERE id = ?1`

	// job_transitions: one row per transition, a combined row's first one included.
	sqlJobEvents = `SELECT ` + eventColumns + ` FROM job_transitions
WHERE job_n = (SELECT n FROM jobs WHERE id = ?1)
ORDER BY seq`

	sqlJobExists = `SELECT EXISTS (SELECT 1 FROM jobs WHERE id = ?1)`

	sqlJobStateAttempt = `SELECT state, attempt FROM jobs WHERE id = ?1`

	// The compare-and-set of a state change, as the Postgres store's job_transition; its event is
	// written by the same write. ?1 id, ?2 from, ?3 to, ?4 attempt (< 0: any), ?5 worker,
	// ?6 reason, ?7 error, ?8 not_before (NULL: now), ?9 result, ?10 checksum, ?11 reset retries,
	// ?12 expires_at, ?13 now.
	sqlJobTransition = `
UPDATE jobs SET
    state           = ?3,
    attempt         = attempt + CASE WHEN ?3 = 'ASSIGNED' THEN 1 ELSE 0 END,
    worker_id       = CASE WHEN ?3 = 'ASSIGNED' THEN ?5 ELSE worker_id END,
    started_at      = CASE WHEN ?3 = 'RUNNING' THEN ?13 ELSE started_at END,
    completed_at    = CASE WHEN ?3 IN ('DONE', 'DEAD_LETTERED') THEN ?13
                           WHEN ?3 = 'PENDING' THEN NULL
                           ELSE completed_at END,
    result          = CASE WHEN ?3 <> 'DONE' THEN result
                           WHEN keep_result THEN coalesce(?9, x'') END,
    result_checksum = CASE WHEN ?3 = 'DONE' THEN ?10 ELSE result_checksum END,
    result_size     = CASE WHEN ?3 = 'DONE' THEN coalesce(length(?9), 0) ELSE result_size END,
    failure_reason  = CASE WHEN ?3 IN ('FAILED', 'DEAD_LETTERED') THEN ?6 ELSE failure_reason END,
    last_error      = CASE WHEN ?3 IN ('FAILED', 'DEAD_LETTERED') AND ?7 <> '' THEN ?7
                           ELSE last_error END,
    retry_count     = CASE WHEN ?3 = 'PENDING' AND ?11 THEN 0
                           WHEN ?3 = 'PENDING' AND ?2 = 'FAILED' THEN retry_count + 1
                           ELSE retry_count END,
    not_before      = CASE WHEN ?3 = 'PENDING' THEN coalesce(?8, ?13) ELSE not_before END,
    retry_after_ms  = CASE WHEN ?3 = 'PENDING' THEN 0 ELSE retry_after_ms END,
    expires_at      = CASE WHEN ?3 = 'PENDING' THEN ?12 ELSE expires_at END,
    no_retry        = CASE WHEN ?3 = 'PENDING' AND ?11 THEN 0 ELSE no_retry END,
    cancel_requested = CASE WHEN ?3 = 'PENDING' AND ?11 THEN 0 ELSE cancel_requested END,
    event_seq       = event_seq + 1,
    updated_at      = ?13
WHERE id = ?1 AND state = ?2 AND (?4 < 0 OR attempt = ?4)
RETURNING ` + jobColumns + `, event_seq`

	sqlTransitionEvent = `
INSERT INTO job_events (job_id, job_n, seq, queue, type, from_state, to_state, reason, error, worker_id,
                        attempt, created_at)
VALUES (?1, (SELECT n FROM jobs WHERE id = ?1), ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11)`
)

// JobGet implements store.JobStore.
func (s *Store) JobGet(ctx context.Context, id string) (*queue.Job, error) {
	j, err := scanJob(s.queryRow(ctx, sqlJobGet, id))
	if errors.Is(err, sql.ErrNoRows) {
		return nil, fmt.Errorf("%w: %s", queue.ErrJobNotFound, id)
	}
	if err != nil {
		return nil, errs.Wrap("get job", err)
	}
	return j, nil
}

// JobTransition implements store.JobStore.
func (s *Store) JobTransition(ctx context.Context, p store.JobTransitionParams) (*queue.Job, error) {
	id := p.ID
	var checksum string
	if p.To == queue.StateDone {
		checksum = storedChecksum(p.Result)
	}
	var result any
	if p.Result != nil {
		result = p.Result
	}
	var j *queue.Job
	err := s.write(ctx, func(tx *wtx) error {
		var seq int
		var err error
		j, err = scanJob(tx.queryRow(sqlJobTransition, id, string(p.From), string(p.To), p.Attempt,
			p.WorkerID, p.Reason, p.Error, usPtr(p.NotBefore), result, checksum, p.ResetRetries,
			usPtr(p.ExpiresAt), us(tx.now)), &seq)
		if err != nil {
			return err
		}
		worker := p.WorkerID
		if worker == "" {
			worker = j.WorkerID
		}
		_, err = tx.exec(sqlTransitionEvent, j.ID, seq, j.Queue, j.Type, string(p.From), string(p.To),
			p.Reason, p.Error, worker, j.Attempt, us(tx.now))
		return err
	})
	if err == nil {
		return j, nil
	}
	if !errors.Is(err, sql.ErrNoRows) {
		return nil, errs.Wrap("transition job", err)
	}
	// Nothing matched: tell a missing job from a lost compare-and-set.
	return nil, errs.TransitionMiss("transition job", p, id, s.queryRow(ctx, sqlJobStateAttempt, id).Scan)
}

// JobEvents implements store.JobStore.
func (s *Store) JobEvents(ctx context.Context, id string) ([]queue.Event, error) {
	rows, err := s.query(ctx, sqlJobEvents, id)
	if err != nil {
		return nil, errs.Wrap("job events", err)
	}
	events, err := collect(rows, scanEvent)
	if err != nil {
		return nil, errs.Wrap("job events", err)
	}
	if len(events) == 0 {
		var exists bool
		if err := s.queryRow(ctx, sqlJobExists, id).Scan(&exists); err != nil {
			return nil, errs.Wrap("job events", err)
		}
		if !exists {
			return nil, fmt.Errorf("%w: %s", queue.ErrJobNotFound, id)
		}
		return []queue.Event{}, nil
	}
	return events, nil
}
