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

var _ store.AdminStore = (*Store)(nil)

// purgeBatch is how many dead letters one purge write deletes: the writer is not held for long,
// and other writes go between two batches.
const purgeBatch = 5000

const (
	// Walks jobs_dispatch_idx in its order, as the dispatch does.
	sqlJobPeekPending = `-- name: job_peek_pending
SELECT ` + jobPageColumns + `
FROM jobs
WHERE queue = ?1 AND state = 'PENDING' AND not_before <= ?2
ORDER BY priority DESC, created_at, id
LIMIT ?3`

	sqlJobPeekPendingLevel = `-- name: job_peek_pending_level
SELECT ` + jobPageColumns + `
FROM jobs
WHERE queue = ?1 AND state = 'PENDING' AND not_before <= ?2 AND priority = ?4
ORDER BY created_at, id
LIMIT ?3`

	// Walks jobs_dead_lettered_idx (queue, completed_at) backwards.
	sqlJobPeekDead = `-- name: job_peek_dead
SELECT ` + jobPageColumns + `
FROM jobs
WHERE queue = ?1 AND state = 'DEAD_LETTERED'
ORDER BY completed_at DESC, id DESC
LIMIT ?3`

	// Walks jobs_dispatch_idx in its order for at most ?3 jobs; ?4 is a JSON array of the types
	// left out.
	sqlJobDueTypeList = `-- name: job_due_types
SELECT DISTINCT type FROM (
    SELECT j.type FROM jobs j
    WHERE j.queue = ?1 AND j.state = 'PENDING' AND j.not_before <= ?2
    ORDER BY j.priority DESC, j.created_at, j.id
    LIMIT ?3
) head
WHERE type NOT IN (SELECT value FROM json_each(?4))
ORDER BY type`

	sqlQueueExists = `-- name: queue_exists
SELECT EXISTS (SELECT 1 FROM queues WHERE name = ?1)`

	// One batch of a purge of one queue, oldest dead letters first, over jobs_dead_lettered_idx.
	sqlJobPurgeQueue = `-- name: job_purge_queue
DELETE FROM jobs
WHERE id IN (
    SELECT id FROM jobs
    WHERE queue = ?1 AND state = 'DEAD_LETTERED' AND completed_at <= ?2
    ORDER BY completed_at
    LIMIT ?3
)
RETURNING id, n`

	// One batch of a purge of every queue, in the index's order.
	sqlJobPurgeAll = `-- name: job_purge_all
DELETE FROM jobs
WHERE id IN (
    SELECT id FROM jobs INDEXED BY jobs_dead_lettered_idx
    WHERE state = 'DEAD_LETTERED' AND completed_at <= ?1
    LIMIT ?2
)
RETURNING id, n`

	// The published events of deleted jobs (?1, a JSON array of their n): at or below the relay's
	// cursor. An unpublished one is still owed to Kafka (I8): the relay publishes it (the job being
	// gone does not matter) and the retention pass deletes it later. The same rule as a forced
	// queue delete.
	sqlDeletePublishedEvents = `-- name: delete_published_events
DELETE FROM job_events
WHERE job_n IN (SELECT value FROM json_each(?1))
  AND id <= coalesce((SELECT id FROM outbox_cursors WHERE name = 'kafka'), 0)`

	// Every event of a deleted job (?1 its n): with Kafka off none is owed to anyone.
	sqlDeleteAllJobEvents = `-- name: delete_all_job_events
DELETE FROM job_events WHERE job_n = ?1`

	// The progress rows of deleted jobs (?1, a JSON array of ids); the maintenance pass would
	// prune them later, as in Postgres, where nothing shows them once the job is finished.
	sqlDeleteJobsProgress = `-- name: delete_jobs_progress
DELETE FROM job_progress WHERE job_id IN (SELECT value FROM json_each(?1))`

	// One finished job, by its primary key, while still in the state the engine decided on.
	sqlJobDelete = `-- name: job_delete
DELETE FROM jobs WHERE id = ?1 AND state = ?2 RETURNING n`

	sqlJobStateOf = `-- name: job_state_of
SELECT state FROM jobs WHERE id = ?1`

	// Over jobs_dead_lettered_idx.
	sqlJobCountDeadLettered = `-- name: job_count_dead_lettered
SELECT queue, count(*) FROM jobs WHERE state = 'DEAD_LETTERED' GROUP BY queue`

	// One queue's walk of jobs_dispatch_idx, stopped at ?3.
	sqlJobCountReady = `-- name: job_count_ready
SELECT count(*) FROM (
    SELECT 1 FROM jobs WHERE queue = ?1 AND state = 'PENDING' AND not_before <= ?2 LIMIT ?3
)`

	sqlWorkerCountLive = `-- name: worker_count_live
SELECT count(*) FROM workers WHERE status <> 'OFFLINE' AND last_heartbeat_at > ?1`
)

var peekStatements = sqlstore.PeekStatements{Pending: sqlJobPeekPending, Level: sqlJobPeekPendingLevel, Dead: sqlJobPeekDead}

// JobPeek implements store.AdminStore.
func (s *Store) JobPeek(ctx context.Context, p store.JobPeekParams) (store.JobPeekResult, error) {
	q, args := peekStatements.For(p, p.Queue, us(s.now()), p.Limit)
	jobs, cut, err := s.jobPage(ctx, p.Limit, p.WithData, p.MaxBytes, q, args...)
	if err != nil {
		return store.JobPeekResult{}, errs.Wrap("peek jobs", err)
	}
	return sqlstore.PeekResult(jobs, cut, func() error { return s.queueMustExist(ctx, p.Queue) })
}

// JobPurgeDeadLetters implements store.AdminStore. Each batch is one write that deletes the jobs,
// their published events and their progress rows (events have no foreign key to their job).
func (s *Store) JobPurgeDeadLetters(ctx context.Context, p store.JobPurgeDeadLettersParams) (int64, error) {
	if p.Queue != "" {
		if err := s.queueMustExist(ctx, p.Queue); err != nil {
			return 0, err
		}
	}
	// Only what was dead-lettered when the purge began: jobs dead-lettered meanwhile cannot keep it
	// going forever.
	cutoff := us(s.now())
	var total int64
	for {
		var n int64
		err := s.write(ctx, func(tx *wtx) error {
			ids, err := purgeDeadBatch(tx, p.Queue, cutoff)
			if err != nil {
				return err
			}
			n = int64(len(ids))
			return deleteJobsRest(tx, ids)
		})
		if err != nil {
			return total, errs.Wrap("purge dead letters", err)
		}
		if n == 0 {
			return total, nil
		}
		total += n
	}
}

// deletedJob is a job a write deleted: its id and its n (its events' key).
type deletedJob struct {
	id string
	n  int64
}

func purgeDeadBatch(tx *wtx, queueName string, cutoff int64) ([]deletedJob, error) {
	var (
		rows *sql.Rows
		err  error
	)
	if queueName == "" {
		rows, err = tx.query(sqlJobPurgeAll, cutoff, purgeBatch)
	} else {
		rows, err = tx.query(sqlJobPurgeQueue, queueName, cutoff, purgeBatch)
	}
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var jobs []deletedJob
	for rows.Next() {
		var j deletedJob
		if err := rows.Scan(&j.id, &j.n); err != nil {
			return nil, err
		}
		jobs = append(jobs, j)
	}
	return jobs, rows.Err()
}

// deleteJobsRest deletes what belongs to deleted jobs: their published events and progress rows.
func deleteJobsRest(tx *wtx, jobs []deletedJob) error {
	if len(jobs) == 0 {
		return nil
	}
	ids := make([]string, len(jobs))
	ns := make([]int64, len(jobs))
	for i, j := range jobs {
		ids[i], ns[i] = j.id, j.n
	}
	if _, err := tx.exec(sqlDeletePublishedEvents, jsonText(ns)); err != nil {
		return fmt.Errorf("events: %w", err)
	}
	if _, err := tx.exec(sqlDeleteJobsProgress, listText(ids)); err != nil {
		return fmt.Errorf("progress: %w", err)
	}
	return nil
}

// JobDelete implements store.AdminStore: the job, its published events (every event, with
// p.Unpublished) and its progress row in one write, with a compare-and-set on the state; when nothing matched, the same write tells a missing
// job from a lost compare-and-set.
func (s *Store) JobDelete(ctx context.Context, p store.JobDeleteParams) error {
	id := p.ID
	var state string // the job's state when the compare-and-set lost
	err := s.write(ctx, func(tx *wtx) error {
		state = ""
		var n int64
		err := tx.queryRow(sqlJobDelete, id, string(p.State)).Scan(&n)
		if errors.Is(err, sql.ErrNoRows) {
			return tx.queryRow(sqlJobStateOf, id).Scan(&state)
		}
		if err != nil {
			return err
		}
		if p.Unpublished {
			if _, err := tx.exec(sqlDeleteAllJobEvents, n); err != nil {
				return fmt.Errorf("events: %w", err)
			}
		}
		return deleteJobsRest(tx, []deletedJob{{id: id, n: n}})
	})
	switch {
	case errors.Is(err, sql.ErrNoRows):
		return fmt.Errorf("%w: %s", queue.ErrJobNotFound, id)
	case err != nil:
		return errs.Wrap("delete job", err)
	case state != "":
		return sqlstore.ErrStaleDelete(id, state, p.State)
	}
	return nil
}

// JobCountDeadLettered implements store.AdminStore.
func (s *Store) JobCountDeadLettered(ctx context.Context) (map[string]int64, error) {
	rows, err := s.query(ctx, sqlJobCountDeadLettered)
	if err != nil {
		return nil, errs.Wrap("count dead letters", err)
	}
	defer rows.Close()
	out := map[string]int64{}
	for rows.Next() {
		var (
			q string
			n int64
		)
		if err := rows.Scan(&q, &n); err != nil {
			return nil, errs.Wrap("count dead letters", err)
		}
		out[q] = n
	}
	if err := rows.Err(); err != nil {
		return nil, errs.Wrap("count dead letters", err)
	}
	return out, nil
}

// JobCountReady implements store.AdminStore: one bounded index walk per queue.
func (s *Store) JobCountReady(ctx context.Context, queues []string) (map[string]int64, error) {
	now := us(s.now())
	out := make(map[string]int64, len(queues))
	for _, q := range queues {
		var n int64
		if err := s.queryRow(ctx, sqlJobCountReady, q, now, store.MaxReadyCount).Scan(&n); err != nil {
			return nil, errs.Wrap("count ready jobs", err)
		}
		out[q] = n
	}
	return out, nil
}

// JobDueTypeList implements store.AdminStore.
func (s *Store) JobDueTypeList(ctx context.Context, queueName string, except []string) ([]string, error) {
	types, err := s.strings(ctx, sqlJobDueTypeList, queueName, us(s.now()), store.MaxDueTypesScan, listText(except))
	return types, errs.Wrap("due job types", err)
}

// WorkerCountLive implements store.AdminStore.
func (s *Store) WorkerCountLive(ctx context.Context, heartbeatTimeout time.Duration) (int64, error) {
	if heartbeatTimeout <= 0 {
		return 0, fmt.Errorf("%w: heartbeat timeout %v must be positive", queue.ErrInvalidArgument, heartbeatTimeout)
	}
	var n int64
	since := us(s.now().Add(-heartbeatTimeout.Truncate(time.Millisecond)))
	if err := s.queryRow(ctx, sqlWorkerCountLive, since).Scan(&n); err != nil {
		return 0, errs.Wrap("count live workers", err)
	}
	return n, nil
}

func (s *Store) queueMustExist(ctx context.Context, name string) error {
	var exists bool
	if err := s.queryRow(ctx, sqlQueueExists, name).Scan(&exists); err != nil {
		return errs.Wrap("queue exists", err)
	}
	if !exists {
		return fmt.Errorf("%w: %q", queue.ErrQueueNotFound, name)
	}
	return nil
}
