package postgres

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/jq-dev/jq/queue"
	"github.com/jq-dev/jq/store"
	"github.com/jq-dev/jq/store/internal/sqlstore"
)

var _ store.AdminStore = (*Store)(nil)

// purgeBatch is how many dead letters one purge transaction deletes.
const purgeBatch = 5000

const (
	// Walks jobs_dispatch_idx in its order, as sqlJobDue does; ORDER BY names the table's columns
	// (a bare id would bind to the output column id::text).
	sqlJobPeekPending = `-- name: job_peek_pending
SELECT ` + jobPageColumns + `
FROM jobs
WHERE queue = $1 AND state = 'PENDING' AND not_before <= now()
ORDER BY jobs.priority DESC, jobs.created_at, jobs.id
LIMIT $2`

	sqlJobPeekPendingLevel = `-- name: job_peek_pending_level
SELECT ` + jobPageColumns + `
FROM jobs
WHERE queue = $1 AND state = 'PENDING' AND not_before <= now() AND priority = $3
ORDER BY jobs.created_at, jobs.id
LIMIT $2`

	// Walks jobs_dead_lettered_idx (queue, completed_at) backwards.
	sqlJobPeekDead = `-- name: job_peek_dead
SELECT ` + jobPageColumns + `
FROM jobs
WHERE queue = $1 AND state = 'DEAD_LETTERED'
ORDER BY jobs.completed_at DESC, jobs.id DESC
LIMIT $2`

	// Walks jobs_dispatch_idx in its order, as sqlJobDue does, for at most $3 jobs.
	sqlJobDueTypeList = `-- name: job_due_types
SELECT DISTINCT type FROM (
    SELECT j.type FROM jobs j
    WHERE j.queue = $1 AND j.state = 'PENDING' AND j.not_before <= now()
    ORDER BY j.priority DESC, j.created_at, j.id
    LIMIT $3
) head
WHERE type <> ALL($2::text[])
ORDER BY type`

	sqlQueueExists = `-- name: queue_exists
SELECT EXISTS (SELECT 1 FROM queues WHERE name = $1)`

	sqlNow = `-- name: now
SELECT now()`

	// One batch of a purge, oldest dead letters first, over jobs_dead_lettered_idx. The DELETE
	// re-checks the state of every row it locks: a job retried since the subquery's snapshot is
	// PENDING by then and stays.
	sqlJobPurgeQueue = `-- name: job_purge_queue
DELETE FROM jobs
WHERE id IN (
    SELECT id FROM jobs
    WHERE queue = $1 AND state = 'DEAD_LETTERED' AND completed_at <= $2
    ORDER BY completed_at
    LIMIT $3
) AND state = 'DEAD_LETTERED'
RETURNING id::text, coalesce(ev, '{}')::text[]`

	sqlJobPurgeAll = `-- name: job_purge_all
DELETE FROM jobs
WHERE id IN (
    SELECT id FROM jobs
    WHERE state = 'DEAD_LETTERED' AND completed_at <= $1
    LIMIT $2
) AND state = 'DEAD_LETTERED'
RETURNING id::text, coalesce(ev, '{}')::text[]`

	// One finished job, by its primary key, while still in the state the engine decided on.
	sqlJobDelete = `-- name: job_delete
DELETE FROM jobs WHERE id = $1 AND state = $2 RETURNING id::text, coalesce(ev, '{}')::text[]`

	// An index-only scan of jobs_dead_lettered_idx.
	sqlJobCountDeadLettered = `-- name: job_count_dead_lettered
SELECT queue, count(*) FROM jobs WHERE state = 'DEAD_LETTERED' GROUP BY queue`

	// Per queue, an index-only walk of jobs_dispatch_idx (not_before is INCLUDEd), stopped at $2.
	sqlJobCountReady = `-- name: job_count_ready
SELECT q, (SELECT count(*) FROM (
               SELECT 1 FROM jobs j
               WHERE j.queue = q AND j.state = 'PENDING' AND j.not_before <= now()
               LIMIT $2) due)
FROM unnest($1::text[]) q`

	sqlWorkerCountLive = `-- name: worker_count_live
SELECT count(*) FROM workers
WHERE status <> 'OFFLINE' AND last_heartbeat_at > now() - $1 * interval '1 millisecond'`
)

var peekStatements = sqlstore.PeekStatements{Pending: sqlJobPeekPending, Level: sqlJobPeekPendingLevel, Dead: sqlJobPeekDead}

// JobPeek implements store.AdminStore.
func (s *Store) JobPeek(ctx context.Context, p store.JobPeekParams) (store.JobPeekResult, error) {
	q, args := peekStatements.For(p, p.Queue, p.Limit)
	jobs, cut, err := s.jobPage(ctx, p.Limit, p.WithData, p.MaxBytes, q, args...)
	if err != nil {
		return store.JobPeekResult{}, errs.Wrap("peek jobs", err)
	}
	return sqlstore.PeekResult(jobs, cut, func() error { return s.queueMustExist(ctx, p.Queue) })
}

// JobPurgeDeadLetters implements store.AdminStore. Events have no foreign key to their job
// (migration 000003): each batch deletes them itself, in the jobs' transaction and after the jobs'
// delete, whose row locks waited for any state change in flight (as QueueDelete does).
func (s *Store) JobPurgeDeadLetters(ctx context.Context, p store.JobPurgeDeadLettersParams) (int64, error) {
	if p.Queue != "" {
		if err := s.queueMustExist(ctx, p.Queue); err != nil {
			return 0, err
		}
	}
	// Only what was dead-lettered when the purge began: jobs dead-lettered meanwhile cannot keep it
	// going forever.
	var cutoff time.Time
	if err := s.pool.QueryRow(ctx, sqlNow).Scan(&cutoff); err != nil {
		return 0, errs.Wrap("purge dead letters", err)
	}
	var total int64
	for {
		n, err := s.purgeBatch(ctx, p.Queue, cutoff)
		if err != nil {
			return total, err
		}
		if n == 0 {
			return total, nil
		}
		total += n
	}
}

func (s *Store) purgeBatch(ctx context.Context, queueName string, cutoff time.Time) (int64, error) {
	var n int64
	err := pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		var rows pgx.Rows
		var err error
		if queueName == "" {
			rows, err = tx.Query(ctx, sqlJobPurgeAll, cutoff, purgeBatch)
		} else {
			rows, err = tx.Query(ctx, sqlJobPurgeQueue, queueName, cutoff, purgeBatch)
		}
		if err != nil {
			return errs.Wrap("purge dead letters", err)
		}
		var d deletedJobs
		if err := d.collect(rows); err != nil {
			return errs.Wrap("purge dead letters", err)
		}
		if len(d.ids) == 0 {
			return nil
		}
		if err := d.deleteEvents(ctx, tx, false); err != nil {
			return errs.Wrap("purge dead letters' events", err)
		}
		n = int64(len(d.ids))
		return nil
	})
	if err != nil {
		return 0, err
	}
	return n, nil
}

// JobDelete implements store.AdminStore. As a purge batch: the job's published events (every
// event, with p.Unpublished) go in the same transaction, after the job's delete, whose row lock
// waited for any change in flight.
func (s *Store) JobDelete(ctx context.Context, p store.JobDeleteParams) error {
	id := p.ID
	var deleted bool
	err := pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		rows, err := tx.Query(ctx, sqlJobDelete, id, string(p.State))
		if err != nil {
			return errs.Wrap("delete job", err)
		}
		var d deletedJobs
		if err := d.collect(rows); err != nil {
			return errs.Wrap("delete job", err)
		}
		if deleted = len(d.ids) == 1; !deleted {
			return nil
		}
		if err := d.deleteEvents(ctx, tx, p.Unpublished); err != nil {
			return errs.Wrap("delete job's events", err)
		}
		return nil
	})
	if err != nil || deleted {
		return err
	}
	// Nothing matched: tell a missing job from a lost compare-and-set.
	var (
		state   string
		attempt int
	)
	err = s.pool.QueryRow(ctx, sqlJobStateAttempt, id).Scan(&state, &attempt)
	if errors.Is(err, pgx.ErrNoRows) {
		return fmt.Errorf("%w: %s", queue.ErrJobNotFound, id)
	}
	if err != nil {
		return errs.Wrap("delete job", err)
	}
	return sqlstore.ErrStaleDelete(id, state, p.State)
}

// JobCountDeadLettered implements store.AdminStore.
func (s *Store) JobCountDeadLettered(ctx context.Context) (map[string]int64, error) {
	rows, err := s.pool.Query(ctx, sqlJobCountDeadLettered)
	if err != nil {
		return nil, errs.Wrap("count dead letters", err)
	}
	out := map[string]int64{}
	var (
		q string
		n int64
	)
	_, err = pgx.ForEachRow(rows, []any{&q, &n}, func() error {
		out[q] = n
		return nil
	})
	if err != nil {
		return nil, errs.Wrap("count dead letters", err)
	}
	return out, nil
}

// JobCountReady implements store.AdminStore.
func (s *Store) JobCountReady(ctx context.Context, queues []string) (map[string]int64, error) {
	rows, err := s.pool.Query(ctx, sqlJobCountReady, queues, store.MaxReadyCount)
	if err != nil {
		return nil, errs.Wrap("count ready jobs", err)
	}
	out := make(map[string]int64, len(queues))
	var (
		q string
		n int64
	)
	_, err = pgx.ForEachRow(rows, []any{&q, &n}, func() error {
		out[q] = n
		return nil
	})
	if err != nil {
		return nil, errs.Wrap("count ready jobs", err)
	}
	return out, nil
}

// JobDueTypeList implements store.AdminStore.
func (s *Store) JobDueTypeList(ctx context.Context, queueName string, except []string) ([]string, error) {
	if except == nil {
		except = []string{} // not NULL: <> ALL(NULL) would match no type
	}
	rows, err := s.pool.Query(ctx, sqlJobDueTypeList, queueName, except, store.MaxDueTypesScan)
	if err != nil {
		return nil, errs.Wrap("due job types", err)
	}
	types, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return nil, errs.Wrap("due job types", err)
	}
	return types, nil
}

// WorkerCountLive implements store.AdminStore.
func (s *Store) WorkerCountLive(ctx context.Context, heartbeatTimeout time.Duration) (int64, error) {
	if heartbeatTimeout <= 0 {
		return 0, fmt.Errorf("%w: heartbeat timeout %v must be positive", queue.ErrInvalidArgument, heartbeatTimeout)
	}
	var n int64
	if err := s.pool.QueryRow(ctx, sqlWorkerCountLive, heartbeatTimeout.Milliseconds()).Scan(&n); err != nil {
		return 0, errs.Wrap("count live workers", err)
	}
	return n, nil
}

func (s *Store) queueMustExist(ctx context.Context, name string) error {
	var exists bool
	err := s.pool.QueryRow(ctx, sqlQueueExists, name).Scan(&exists)
	if err != nil && !errors.Is(err, pgx.ErrNoRows) {
		return errs.Wrap("queue exists", err)
	}
	if !exists {
		return fmt.Errorf("%w: %q", queue.ErrQueueNotFound, name)
	}
	return nil
}
