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
	sqlQueueInsert = `
INSERT INTO queues (name, max_retries, ttl_ms, priority_weights, backoff_base_ms, backoff_max_ms,
                    result_retention_ms, created_at, updated_at, max_wait_ms)
VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?8, ?9)`

	sqlQueueCreate = sqlQueueInsert + ` RETURNING ` + queueColumns

	sqlQueueEnsure = sqlQueueInsert + ` ON CONFLICT (name) DO NOTHING RETURNING ` + queueColumns

	sqlQueueGet = `SELECT ` + queueColumns + ` FROM queues WHERE name = ?1`

	sqlQueueList = `SELECT ` + queueColumns + ` FROM queues ORDER BY name`

	sqlQueueSetPaused = `UPDATE queues SET paused = ?2, updated_at = ?3 WHERE name = ?1 RETURNING ` + queueColumns

	sqlQueueUpdate = `UPDATE queues SET max_retries = ?2, ttl_ms = ?3, priority_weights = ?4, backoff_base_ms = ?5,
		backoff_max_ms = ?6, result_retention_ms = ?7, updated_at = ?8, max_wait_ms = ?9
	WHERE name = ?1 RETURNING ` + queueColumns

	sqlQueueHasJobs = `SELECT EXISTS (SELECT 1 FROM jobs WHERE queue = ?1)`

	sqlQueueDeleteJobs = `DELETE FROM jobs WHERE queue = ?1 RETURNING id, n`

	sqlQueueDelete = `DELETE FROM queues WHERE name = ?1`
)

func queueArgs(q *queue.Queue, now int64) []any {
	weights := map[int]int{}
	for k, v := range q.PriorityWeights {
		weights[k] = v
	}
	return []any{q.Name, q.MaxRetries, toMillis(q.TTL), jsonText(weights), toMillis(q.BackoffBase),
		toMillis(q.BackoffMax), toMillis(q.ResultRetention), now, toMillis(q.MaxWait)}
}

// QueueCreate implements store.QueueStore.
func (s *Store) QueueCreate(ctx context.Context, p store.QueueCreateParams) (*queue.Queue, error) {
	q, err := p.Queue()
	if err != nil {
		return nil, err
	}
	var created *queue.Queue
	err = s.write(ctx, func(tx *wtx) error {
		var err error
		created, err = scanQueue(tx.queryRow(sqlQueueCreate, queueArgs(q, us(tx.now))...))
		return err
	})
	if isUnique(err) {
		return nil, fmt.Errorf("%w: %q", queue.ErrQueueExists, p.Name)
	}
	if err != nil {
		return nil, errs.Wrap("create queue", err)
	}
	return created, nil
}

// QueueEnsure implements store.QueueStore.
func (s *Store) QueueEnsure(ctx context.Context, p store.QueueCreateParams) (*queue.Queue, bool, error) {
	q, err := p.Queue()
	if err != nil {
		return nil, false, err
	}
	var (
		got     *queue.Queue
		created bool
	)
	err = s.write(ctx, func(tx *wtx) error {
		var err error
		got, err = scanQueue(tx.queryRow(sqlQueueEnsure, queueArgs(q, us(tx.now))...))
		if err == nil {
			created = true
			return nil
		}
		if !errors.Is(err, sql.ErrNoRows) {
			return err
		}
		got, err = scanQueue(tx.queryRow(sqlQueueGet, p.Name))
		return err
	})
	if err != nil {
		return nil, false, errs.Wrap("ensure queue", err)
	}
	return got, created, nil
}

// QueueGet implements store.QueueStore.
func (s *Store) QueueGet(ctx context.Context, name string) (*queue.Queue, error) {
	q, err := scanQueue(s.queryRow(ctx, sqlQueueGet, name))
	if err != nil {
		return nil, errs.Row("get queue", err, queue.ErrQueueNotFound, name)
	}
	return q, nil
}

// QueueList implements store.QueueStore.
func (s *Store) QueueList(ctx context.Context) ([]*queue.Queue, error) {
	rows, err := s.query(ctx, sqlQueueList)
	if err != nil {
		return nil, errs.Wrap("list queues", err)
	}
	qs, err := collect(rows, scanQueue)
	return qs, errs.Wrap("list queues", err)
}

// QueueDelete implements store.QueueStore.
func (s *Store) QueueDelete(ctx context.Context, p store.QueueDeleteParams) (int64, error) {
	var deleted int64
	err := s.write(ctx, func(tx *wtx) error {
		if _, err := scanQueue(tx.queryRow(sqlQueueGet, p.Name)); err != nil {
			return errs.Row("delete queue", err, queue.ErrQueueNotFound, p.Name)
		}
		hasJobs := func(dest ...any) error { return tx.queryRow(sqlQueueHasJobs, p.Name).Scan(dest...) }
		if err := errs.QueueDeletable(p, hasJobs); err != nil {
			return err
		}
		rows, err := tx.query(sqlQueueDeleteJobs, p.Name)
		if err != nil {
			return errs.Wrap("delete queue jobs", err)
		}
		jobs, err := collect(rows, func(r scanner) (deletedJob, error) {
			var j deletedJob
			return j, r.Scan(&j.id, &j.n)
		})
		if err != nil {
			return errs.Wrap("delete queue jobs", err)
		}
		deleted = int64(len(jobs))
		// Their published events and progress rows, in one statement each (deleteJobsRest, as a
		// purge or a job delete).
		if err := deleteJobsRest(tx, jobs); err != nil {
			return fmt.Errorf("sqlite: delete queue jobs' %w", err)
		}
		if _, err := tx.exec(sqlQueueDelete, p.Name); err != nil {
			return errs.Wrap("delete queue", err)
		}
		return nil
	})
	if err != nil {
		return 0, err
	}
	return deleted, nil
}

// QueueUpdate implements store.QueueStore. The single writer orders concurrent updates.
func (s *Store) QueueUpdate(ctx context.Context, p store.QueueUpdateParams) (*queue.Queue, error) {
	var updated *queue.Queue
	err := s.write(ctx, func(tx *wtx) error {
		cur, err := scanQueue(tx.queryRow(sqlQueueGet, p.Name))
		if err != nil {
			return errs.Row("update queue", err, queue.ErrQueueNotFound, p.Name)
		}
		q, err := p.Apply(cur)
		if err != nil {
			return err
		}
		updated, err = scanQueue(tx.queryRow(sqlQueueUpdate, queueArgs(q, us(tx.now))...))
		if err != nil {
			return errs.Wrap("update queue", err)
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return updated, nil
}

// QueueSetPaused implements store.QueueStore.
func (s *Store) QueueSetPaused(ctx context.Context, p store.QueueSetPausedParams) (*queue.Queue, error) {
	var q *queue.Queue
	err := s.write(ctx, func(tx *wtx) error {
		var err error
		q, err = scanQueue(tx.queryRow(sqlQueueSetPaused, p.Name, p.Paused, us(tx.now)))
		return err
	})
	if err != nil {
		return nil, errs.Row("pause queue", err, queue.ErrQueueNotFound, p.Name)
	}
	return q, nil
}

// strings reads the one text column of the rows a statement returns.
func (s *Store) strings(ctx context.Context, q string, args ...any) ([]string, error) {
	rows, err := s.query(ctx, q, args...)
	if err != nil {
		return nil, err
	}
	return collect(rows, func(r scanner) (string, error) {
		var v string
		return v, r.Scan(&v)
	})
}

// collect scans every row with scan and closes rows.
func collect[T any](rows *sql.Rows, scan func(scanner) (T, error)) ([]T, error) {
	defer rows.Close()
	out := []T{}
	for rows.Next() {
		v, err := scan(rows)
		if err != nil {
			return nil, err
		}
		out = append(out, v)
	}
	return out, rows.Err()
}
