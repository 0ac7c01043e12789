package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"

	"github.com/jq-dev/jq/queue"
	"github.com/jq-dev/jq/store"
)

var _ store.ProgressStore = (*Store)(nil)

// Progress lives in job_progress, one small row per job, as in Postgres: an update
// reads the jobs row to fence it and never writes it.
const (
	// One update, fenced like a report: written only while its job is ASSIGNED or RUNNING at that
	// attempt on that worker (no row selected: nothing written, RowsAffected 0). The WHERE before
	// ON CONFLICT is required by SQLite's parser for an upsert from a SELECT.
	sqlJobProgressSet = `
INSERT INTO job_progress (job_id, attempt, percent, message, updated_at)
SELECT id, attempt, ?3, ?4, ?6 FROM jobs
WHERE id = ?1 AND attempt = ?2 AND worker_id = ?5 AND state IN ('ASSIGNED', 'RUNNING')
ON CONFLICT (job_id) DO UPDATE
SET attempt = excluded.attempt, percent = excluded.percent, message = excluded.message,
    updated_at = excluded.updated_at`

	// A job's progress while its attempt is live.
	sqlJobProgressGet = `
SELECT p.percent, p.message, p.updated_at
FROM job_progress p
JOIN jobs j ON j.id = p.job_id AND j.attempt = p.attempt AND j.state IN ('ASSIGNED', 'RUNNING')
WHERE p.job_id = ?1`

	// Progress rows whose attempt is over: the job finished, moved to a newer attempt or was
	// deleted. The table holds a row per job that reported progress recently: a small scan.
	sqlJobProgressPrune = `
DELETE FROM job_progress
WHERE job_id IN (
    SELECT p.job_id FROM job_progress p
    WHERE NOT EXISTS (SELECT 1 FROM jobs j
                      WHERE j.id = p.job_id AND j.attempt = p.attempt AND j.state IN ('ASSIGNED', 'RUNNING'))
    LIMIT ?1)`
)

// JobProgressSet implements store.ProgressStore: one write for the batch, the last update of each
// job applied.
func (s *Store) JobProgressSet(ctx context.Context, p store.JobProgressSetParams) ([]store.LeaseOutcome, error) {
	outs := make([]store.LeaseOutcome, len(p.Updates))
	last := make(map[string]int, len(p.Updates)) // canonical id → index of its last valid update
	var order []string                           // the ids of last, in batch order
	for i, u := range p.Updates {
		id, err := store.ParseJobID(u.ID)
		outs[i].ID = id
		if err != nil {
			outs[i].ID, outs[i].Err = u.ID, err
			continue
		}
		if err := u.ValidateUpdate(); err != nil {
			outs[i].Err = err
			continue
		}
		if _, ok := last[id]; !ok {
			order = append(order, id)
		}
		last[id] = i
	}
	if len(order) == 0 {
		return outs, nil
	}
	applied := make(map[string]bool, len(order))
	err := s.write(ctx, func(tx *wtx) error {
		clear(applied)
		now := us(tx.now)
		for _, id := range order {
			u := p.Updates[last[id]]
			res, err := tx.exec(sqlJobProgressSet, id, u.Attempt, u.Percent, u.Message, p.WorkerID, now)
			if err != nil {
				return err
			}
			n, err := res.RowsAffected()
			if err != nil {
				return err
			}
			applied[id] = n > 0
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("sqlite: set job progress: %w", err)
	}
	for i := range outs {
		if outs[i].Err == nil && !applied[outs[i].ID] {
			outs[i].Err = fmt.Errorf("%w: job %s is not held by worker %s at attempt %d",
				queue.ErrStaleAttempt, outs[i].ID, p.WorkerID, p.Updates[i].Attempt)
		}
	}
	return outs, nil
}

// JobProgressGet implements store.ProgressStore.
func (s *Store) JobProgressGet(ctx context.Context, id string) (*queue.JobProgress, error) {
	var pr queue.JobProgress
	err := s.queryRow(ctx, sqlJobProgressGet, id).Scan(&pr.Percent, &pr.Message, tm{&pr.UpdatedAt})
	if errors.Is(err, sql.ErrNoRows) {
		return nil, nil //nolint:nilnil // no progress is not an error
	}
	if err != nil {
		return nil, fmt.Errorf("sqlite: get job progress: %w", err)
	}
	return &pr, nil
}

// JobProgressPrune implements store.ProgressStore.
func (s *Store) JobProgressPrune(ctx context.Context, limit int) (int64, error) {
	if limit < 1 || limit > store.MaxEventsPruneBatch {
		return 0, fmt.Errorf("%w: progress prune limit must be 1..%d, got %d", queue.ErrInvalidArgument,
			store.MaxEventsPruneBatch, limit)
	}
	var n int64
	err := s.write(ctx, func(tx *wtx) error {
		res, err := tx.exec(sqlJobProgressPrune, limit)
		if err != nil {
			return err
		}
		n, err = res.RowsAffected()
		return err
	})
	if err != nil {
		return 0, fmt.Errorf("sqlite: prune job progress: %w", err)
	}
	return n, nil
}
