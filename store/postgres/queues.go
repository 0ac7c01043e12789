package postgres

import (
	"context"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"

	"github.com/jq-dev/jq/queue"
	"github.com/jq-dev/jq/store"
)

const (
	sqlQueueInsert = `
INSERT INTO queues (name, max_retries, ttl_ms, priority_weights, backoff_base_ms, backoff_max_ms,
                    result_retention_ms, max_wait_ms)
VALUES ($1, $2, $3, $4, $5, $6, $7, $8)`

	sqlQueueCreate = "-- name: queue_create\n" + sqlQueueInsert + ` RETURNING ` + queueColumns

	// ON CONFLICT DO NOTHING waits for a concurrent insert of the same name to commit and then skips,
	// so racing servers never fail; the loser reads the winner's row.
	sqlQueueEnsure = "-- name: queue_ensure\n" + sqlQueueInsert + ` ON CONFLICT (name) DO NOTHING RETURNING ` + queueColumns

	sqlQueueGet = `-- name: queue_get
SELECT ` + queueColumns + ` FROM queues WHERE name = $1`

	sqlQueueList = `-- name: queue_list
SELECT ` + queueColumns + ` FROM queues ORDER BY name`

	sqlQueueSetPaused = `-- name: queue_set_paused
UPDATE queues SET paused = $2, updated_at = now() WHERE name = $1 RETURNING ` + queueColumns

	sqlQueueGetForUpdate = `-- name: queue_get_for_update
SELECT ` + queueColumns + ` FROM queues WHERE name = $1 FOR UPDATE`

	sqlQueueUpdate = `-- name: queue_update
UPDATE queues SET max_retries = $2, ttl_ms = $3, priority_weights = $4, backoff_base_ms = $5,
                  backoff_max_ms = $6, result_retention_ms = $7, max_wait_ms = $8, updated_at = now()
WHERE name = $1 RETURNING ` + queueColumns

	// FOR UPDATE conflicts with the KEY SHARE lock a job insert takes on its queue row
	// (sqlJobInsertMany): inserts in flight finish first (and are counted), later ones wait and then
	// find no queue.
	sqlQueueLock = `-- name: queue_lock
SELECT 1 FROM queues WHERE name = $1 FOR UPDATE`

	sqlQueueHasJobs = `-- name: queue_has_jobs
SELECT EXISTS (SELECT 1 FROM jobs WHERE queue = $1)`

	sqlQueueDeleteJobs = `-- name: queue_delete_jobs
DELETE FROM jobs WHERE queue = $1 RETURNING id::text, coalesce(ev, '{}')::text[]`

	sqlQueueDelete = `-- name: queue_delete
DELETE FROM queues WHERE name = $1`
)

func queueArgs(q *queue.Queue) []any {
	return []any{q.Name, q.MaxRetries, toMillis(q.TTL), q.PriorityWeights, toMillis(q.BackoffBase),
		toMillis(q.BackoffMax), toMillis(q.ResultRetention), toMillis(q.MaxWait)}
}

// QueueCreate implements store.QueueStore.
func (s *Store) QueueCreate(ctx context.Context, p store.QueueCreateParams) (*queue.Queue, error) {
	q, err := p.Queue()
	if err != nil {
		return nil, err
	}
	created, err := scanQueue(s.pool.QueryRow(ctx, sqlQueueCreate, queueArgs(q)...))
	if isCode(err, codeUniqueViolation) {
		return nil, fmt.Errorf("%w: %q", queue.ErrQueueExists, p.Name)
	}
	return created, errs.Wrap("create queue", err)
}

// QueueEnsure implements store.QueueStore.
func (s *Store) QueueEnsure(ctx context.Context, p store.QueueCreateParams) (*queue.Queue, bool, error) {
	q, err := p.Queue()
	if err != nil {
		return nil, false, err
	}
	created, err := scanQueue(s.pool.QueryRow(ctx, sqlQueueEnsure, queueArgs(q)...))
	switch {
	case err == nil:
		return created, true, nil
	case !errors.Is(err, pgx.ErrNoRows):
		return nil, false, errs.Wrap("ensure queue", err)
	}
	existing, err := s.QueueGet(ctx, p.Name)
	if err != nil {
		return nil, false, err
	}
	return existing, false, nil
}

// QueueGet implements store.QueueStore.
func (s *Store) QueueGet(ctx context.Context, name string) (*queue.Queue, error) {
	q, err := scanQueue(s.pool.QueryRow(ctx, sqlQueueGet, name))
	if err != nil {
		return nil, errs.Row("get queue", err, queue.ErrQueueNotFound, name)
	}
	return q, nil
}

// QueueList implements store.QueueStore.
func (s *Store) QueueList(ctx context.Context) ([]*queue.Queue, error) {
	rows, err := s.pool.Query(ctx, sqlQueueList)
	if err != nil {
		return nil, errs.Wrap("list queues", err)
	}
	qs, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (*queue.Queue, error) { return scanQueue(r) })
	return qs, errs.Wrap("list queues", err)
}

// QueueDelete implements store.QueueStore.
func (s *Store) QueueDelete(ctx context.Context, p store.QueueDeleteParams) (int64, error) {
	var deleted int64
	err := pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		var one int
		if err := tx.QueryRow(ctx, sqlQueueLock, p.Name).Scan(&one); err != nil {
			return errs.Row("delete queue", err, queue.ErrQueueNotFound, p.Name)
		}
		hasJobs := func(dest ...any) error { return tx.QueryRow(ctx, sqlQueueHasJobs, p.Name).Scan(dest...) }
		if err := errs.QueueDeletable(p, hasJobs); err != nil {
			return err
		}
		rows, err := tx.Query(ctx, sqlQueueDeleteJobs, p.Name)
		if err != nil {
			return errs.Wrap("delete queue jobs", err)
		}
		var d deletedJobs
		if err := d.collect(rows); err != nil {
			return errs.Wrap("delete queue jobs", err)
		}
		deleted = int64(len(d.ids))
		if err := d.deleteEvents(ctx, tx, false); err != nil {
			return errs.Wrap("delete queue job events", err)
		}
		if _, err := tx.Exec(ctx, sqlQueueDelete, p.Name); err != nil {
			return errs.Wrap("delete queue", err)
		}
		return nil
	})
	if err != nil {
		return 0, err
	}
	return deleted, nil
}

// QueueUpdate implements store.QueueStore. The row lock orders concurrent updates: each applies its
// changes to the settings the previous one left.
func (s *Store) QueueUpdate(ctx context.Context, p store.QueueUpdateParams) (*queue.Queue, error) {
	var updated *queue.Queue
	err := pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		cur, err := scanQueue(tx.QueryRow(ctx, sqlQueueGetForUpdate, p.Name))
		if err != nil {
			return errs.Row("update queue", err, queue.ErrQueueNotFound, p.Name)
		}
		q, err := p.Apply(cur)
		if err != nil {
			return err
		}
		updated, err = scanQueue(tx.QueryRow(ctx, sqlQueueUpdate, queueArgs(q)...))
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
	q, err := scanQueue(s.pool.QueryRow(ctx, sqlQueueSetPaused, p.Name, p.Paused))
	if err != nil {
		return nil, errs.Row("pause queue", err, queue.ErrQueueNotFound, p.Name)
	}
	return q, nil
}
