package postgres

import (
	"context"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"

	"github.com/jq-dev/jq/queue"
	"github.com/jq-dev/jq/store"
	"github.com/jq-dev/jq/store/internal/sqlstore"
)

var _ store.ProgressStore = (*Store)(nil)

// sqlJobProgressSet upserts one batch of progress (migration 000015), fenced like a report: an
// update is written only while its job is ASSIGNED or RUNNING at that attempt on that worker. The
// jobs row is read, never written (no jobs row version per update); the job_progress row is
// updated in place (heap-only: only its primary key is indexed). The batch holds each job once
// (the Go side keeps the last update of a job), as ON CONFLICT DO UPDATE requires. It returns the
// ids written.
const sqlJobProgressSet = `-- name: job_progress_set
INSERT INTO job_progress AS p (job_id, attempt, percent, message, updated_at)
SELECT j.id, j.attempt, u.percent, u.message, now()
FROM unnest($1::uuid[], $2::int[], $3::smallint[], $4::text[]) AS u(id, attempt, percent, message)
JOIN jobs j ON j.id = u.id AND j.attempt = u.attempt AND j.worker_id = $5
           AND j.state IN ('ASSIGNED', 'RUNNING')
ON CONFLICT (job_id) DO UPDATE
SET attempt = excluded.attempt, percent = excluded.percent, message = excluded.message,
    updated_at = excluded.updated_at
RETURNING p.job_id::text`

// sqlJobProgressGet reads a job's progress while its attempt is live.
const sqlJobProgressGet = `-- name: job_progress_get
SELECT p.percent, p.message, p.updated_at
FROM job_progress p
JOIN jobs j ON j.id = p.job_id AND j.attempt = p.attempt AND j.state IN ('ASSIGNED', 'RUNNING')
WHERE p.job_id = $1`

// sqlJobProgressPrune deletes progress rows whose attempt is over: the job finished, moved to a
// newer attempt or was deleted. The table holds a row per job that reported progress recently, so
// a pass reads a small table; SKIP LOCKED lets replicas share the work and leaves a row being
// upserted right now alone.
const sqlJobProgressPrune = `-- name: job_progress_prune
WITH c AS (
    SELECT p.job_id FROM job_progress p
    WHERE NOT EXISTS (SELECT 1 FROM jobs j
                      WHERE j.id = p.job_id AND j.attempt = p.attempt AND j.state IN ('ASSIGNED', 'RUNNING'))
    LIMIT $1
    FOR UPDATE OF p SKIP LOCKED
)
DELETE FROM job_progress p USING c WHERE p.job_id = c.job_id`

// JobProgressSet implements store.ProgressStore.
func (s *Store) JobProgressSet(ctx context.Context, p store.JobProgressSetParams) ([]store.LeaseOutcome, error) {
	b := sqlstore.NewProgressBatch(p)
	applied := make(map[string]bool, len(b.IDs))
	if len(b.IDs) > 0 {
		var (
			attempts = make([]int32, 0, len(b.IDs))
			percents = make([]int16, 0, len(b.IDs))
			messages = make([]string, 0, len(b.IDs))
		)
		for _, id := range b.IDs {
			u := p.Updates[b.Last[id]]
			attempts = append(attempts, int32(u.Attempt)) // 1..MaxInt32 (ValidateUpdate)
			percents = append(percents, int16(u.Percent)) // 0..100 (ValidateUpdate)
			messages = append(messages, u.Message)
		}
		rows, err := s.pool.Query(ctx, sqlJobProgressSet, b.IDs, attempts, percents, messages, p.WorkerID)
		if err != nil {
			return nil, errs.Wrap("set job progress", err)
		}
		written, err := pgx.CollectRows(rows, pgx.RowTo[string])
		if err != nil {
			return nil, errs.Wrap("set job progress", err)
		}
		for _, id := range written {
			applied[id] = true
		}
	}
	return b.Finish(p, applied), nil
}

// JobProgressGet implements store.ProgressStore.
func (s *Store) JobProgressGet(ctx context.Context, id string) (*queue.JobProgress, error) {
	var (
		pr  queue.JobProgress
		pct int16
	)
	err := s.pool.QueryRow(ctx, sqlJobProgressGet, id).Scan(&pct, &pr.Message, &pr.UpdatedAt)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, nil //nolint:nilnil // no progress is not an error
	}
	if err != nil {
		return nil, errs.Wrap("get job progress", err)
	}
	pr.Percent = int(pct)
	pr.UpdatedAt = pr.UpdatedAt.UTC()
	return &pr, nil
}

// JobProgressPrune implements store.ProgressStore.
func (s *Store) JobProgressPrune(ctx context.Context, limit int) (int64, error) {
	if limit < 1 || limit > store.MaxEventsPruneBatch {
		return 0, fmt.Errorf("%w: progress prune limit must be 1..%d, got %d", queue.ErrInvalidArgument,
			store.MaxEventsPruneBatch, limit)
	}
	tag, err := s.pool.Exec(ctx, sqlJobProgressPrune, limit)
	if err != nil {
		return 0, errs.Wrap("prune job progress", err)
	}
	return tag.RowsAffected(), nil
}
