package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"

	"github.com/jq-dev/jq/queue"
	"github.com/jq-dev/jq/store"
	"github.com/jq-dev/jq/store/internal/sqlstore"
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
	b := sqlstore.NewProgressBatch(p)
	applied := make(map[string]bool, len(b.IDs))
	if len(b.IDs) == 0 {
		return b.Outcomes, nil
	}
	err := s.write(ctx, func(tx *wtx) error {
		clear(applied)
		now := us(tx.now)
		for _, id := range b.IDs {
			u := p.Updates[b.Last[id]]
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
		return nil, errs.Wrap("set job progress", err)
	}
	return b.Finish(p, applied), nil
}

// JobProgressGet implements store.ProgressStore.
func (s *Store) JobProgressGet(ctx context.Context, id string) (*queue.JobProgress, error) {
	var pr queue.JobProgress
	err := s.queryRow(ctx, sqlJobProgressGet, id).Scan(&pr.Percent, &pr.Message, tm{&pr.UpdatedAt})
	if errors.Is(err, sql.ErrNoRows) {
		return nil, nil //nolint:nilnil // no progress is not an error
	}
	if err != nil {
		return nil, errs.Wrap("get job progress", err)
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
		return 0, errs.Wrap("prune job progress", err)
	}
	return n, nil
}
