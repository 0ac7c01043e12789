package postgres

import (
	"context"
	"errors"
	"fmt"
	"slices"

	"github.com/jackc/pgx/v5"

	"github.com/jq-dev/jq/queue"
	"github.com/jq-dev/jq/store"
)

const (
	// Re-registering an id (a restarted worker) replaces its row and brings it back ONLINE. The
	// first principal to register an id owns it for good: another principal's registration
	// updates nothing (no row returned); one without a principal (authentication off) keeps the
	// owner. Owners never change, so the API may cache them.
	sqlWorkerRegister = `-- name: worker_register
INSERT INTO workers AS w (id, hostname, status, concurrency, queues, version, started_at,
                          last_heartbeat_at, updated_at, principal, types)
VALUES ($1, $2, 'ONLINE', $3, $4, $5, now(), now(), now(), $6, $8)
ON CONFLICT (id) DO UPDATE SET
    hostname = excluded.hostname, status = 'ONLINE', concurrency = excluded.concurrency,
    queues = excluded.queues, version = excluded.version, types = excluded.types, started_at = now(),
    last_heartbeat_at = now(), updated_at = now(), shutdown_requested = false,
    principal = CASE WHEN w.principal = '' THEN excluded.principal ELSE w.principal END
WHERE excluded.principal = '' OR w.principal = '' OR w.principal = excluded.principal OR $7
RETURNING ` + workerColumns

	// Serialises the registrations of one principal, for the count below (released at commit).
	sqlWorkerLockPrincipal = `-- name: worker_lock_principal
SELECT pg_advisory_xact_lock(hashtextextended('jq.workers:' || $1, 0))`

	// Serialises every registration of the cluster, for server.max_workers (released at commit).
	// Taken before the principal's lock, always in that order.
	sqlWorkerLockCluster = `-- name: worker_lock_cluster
SELECT pg_advisory_xact_lock(hashtextextended('jq.workers', 0))`

	// The live workers but the id registering (its own re-registration takes nothing new).
	sqlWorkerCountLiveExcept = `-- name: worker_count_live_except
SELECT count(*) FROM workers WHERE status <> 'OFFLINE' AND id <> $1`

	// Garbage collection of long-OFFLINE rows, a bounded batch per registration.
	sqlWorkerGC = `-- name: worker_gc
DELETE FROM workers WHERE id IN (
    SELECT id FROM workers WHERE status = 'OFFLINE' AND updated_at < now() - $1::interval LIMIT 1000)`

	// The principal's rows but the id registering (its own re-registration takes nothing new): the
	// live ones, and all.
	sqlWorkerCountOfPrincipal = `-- name: worker_count_of_principal
SELECT count(*) FILTER (WHERE status <> 'OFFLINE'), count(*) FROM workers WHERE principal = $1 AND id <> $2`

	// Room for one more row of the principal: its $3 oldest OFFLINE rows go (their ids are free
	// again), so a principal never holds more rows than its limit, live or not.
	sqlWorkerPruneOfPrincipal = `-- name: worker_prune_of_principal
DELETE FROM workers WHERE id IN (
    SELECT id FROM workers WHERE principal = $1 AND status = 'OFFLINE' AND id <> $2
    ORDER BY updated_at, id LIMIT $3)`

	sqlWorkerCounts = `-- name: worker_counts
SELECT count(*), count(*) FILTER (WHERE principal = $1)
FROM workers WHERE status <> 'OFFLINE' AND id <> $2`

	// The database's clock, not the caller's: heartbeat ages are compared by the reaper on any
	// replica.
	sqlWorkerHeartbeat = `-- name: worker_heartbeat
UPDATE workers AS w SET last_heartbeat_at = now(), updated_at = now(), breakers = $2::jsonb WHERE id = $1
RETURNING ` + workerColumns

	sqlWorkerGet = `-- name: worker_get
SELECT ` + workerColumns + ` FROM workers w WHERE w.id = $1`

	sqlWorkerList = `-- name: worker_list
SELECT ` + workerColumns + ` FROM workers w ORDER BY w.id`

	sqlWorkerListPage = `-- name: worker_list_page
SELECT ` + workerColumns + ` FROM workers w WHERE w.id > $1 ORDER BY w.id LIMIT $2`

	// Only registering brings an OFFLINE worker back: a drain racing the reaper's verdict must not
	// revive it (compare-and-set on the status).
	sqlWorkerSetStatus = `-- name: worker_set_status
UPDATE workers AS w SET status = $2, updated_at = now()
WHERE id = $1 AND (status <> 'OFFLINE' OR $2 = 'OFFLINE')
RETURNING ` + workerColumns
)

// WorkerRegister implements store.WorkerStore.
func (s *Store) WorkerRegister(ctx context.Context, p store.WorkerRegisterParams) (*queue.Worker, error) {
	queues := p.Queues
	if queues == nil {
		queues = []string{}
	}
	types := append([]string{}, p.Types...)
	slices.Sort(types)
	var w *queue.Worker
	err := pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		if p.OfflineRetention > 0 {
			if _, err := tx.Exec(ctx, sqlWorkerGC, p.OfflineRetention); err != nil {
				return err
			}
		}
		if p.MaxLive > 0 {
			if _, err := tx.Exec(ctx, sqlWorkerLockCluster); err != nil {
				return err
			}
			var n int
			if err := tx.QueryRow(ctx, sqlWorkerCountLiveExcept, p.ID).Scan(&n); err != nil {
				return err
			}
			if n >= p.MaxLive {
				return fmt.Errorf("%w: %d workers are registered, the most allowed (server.max_workers)", queue.ErrLimitReached, n)
			}
		}
		if p.MaxOfPrincipal > 0 && p.Principal != "" {
			if _, err := tx.Exec(ctx, sqlWorkerLockPrincipal, p.Principal); err != nil {
				return err
			}
			var live, rows int
			if err := tx.QueryRow(ctx, sqlWorkerCountOfPrincipal, p.Principal, p.ID).Scan(&live, &rows); err != nil {
				return err
			}
			if live >= p.MaxOfPrincipal {
				return fmt.Errorf("%w: %s has %d live workers, the most allowed (auth.max_workers_per_principal)",
					queue.ErrLimitReached, p.Principal, live)
			}
			if rows >= p.MaxOfPrincipal {
				if _, err := tx.Exec(ctx, sqlWorkerPruneOfPrincipal, p.Principal, p.ID, rows-p.MaxOfPrincipal+1); err != nil {
					return err
				}
			}
		}
		var err error
		w, err = scanWorker(tx.QueryRow(ctx, sqlWorkerRegister, p.ID, p.Hostname, p.Concurrency, queues, p.Version, p.Principal, p.AnyOwner, types))
		return err
	})
	if errors.Is(err, queue.ErrLimitReached) {
		return nil, err
	}
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, fmt.Errorf("%w: worker id %q is registered by another principal", queue.ErrPermissionDenied, p.ID)
	}
	if err != nil {
		return nil, errs.Wrap("register worker", err)
	}
	return w, nil
}

// WorkerCounts implements store.WorkerStore.
func (s *Store) WorkerCounts(ctx context.Context, principal, except string) (store.WorkerCounts, error) {
	var c store.WorkerCounts
	if err := s.pool.QueryRow(ctx, sqlWorkerCounts, principal, except).Scan(&c.Live, &c.LiveOfPrincipal); err != nil {
		return c, errs.Wrap("count workers", err)
	}
	return c, nil
}

// WorkerHeartbeat implements store.WorkerStore.
func (s *Store) WorkerHeartbeat(ctx context.Context, p store.WorkerHeartbeatParams) (*queue.Worker, error) {
	breakers, err := breakersJSON(p.Breakers)
	if err != nil {
		return nil, errs.Wrap("heartbeat worker", err)
	}
	return s.workerRow(ctx, "heartbeat", sqlWorkerHeartbeat, p.ID, string(breakers))
}

// WorkerGet implements store.WorkerStore.
func (s *Store) WorkerGet(ctx context.Context, id string) (*queue.Worker, error) {
	return s.workerRow(ctx, "get", sqlWorkerGet, id)
}

// WorkerListPage implements store.WorkerStore.
func (s *Store) WorkerListPage(ctx context.Context, after string, limit int) ([]*queue.Worker, error) {
	if limit <= 0 {
		return nil, fmt.Errorf("%w: worker page size must be positive, got %d", queue.ErrInvalidArgument, limit)
	}
	return s.workerList(ctx, sqlWorkerListPage, after, limit)
}

// WorkerList implements store.WorkerStore.
func (s *Store) WorkerList(ctx context.Context) ([]*queue.Worker, error) {
	return s.workerList(ctx, sqlWorkerList)
}

func (s *Store) workerList(ctx context.Context, sql string, args ...any) ([]*queue.Worker, error) {
	rows, err := s.pool.Query(ctx, sql, args...)
	if err != nil {
		return nil, errs.Wrap("list workers", err)
	}
	ws, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (*queue.Worker, error) { return scanWorker(r) })
	return ws, errs.Wrap("list workers", err)
}

// WorkerSetStatus implements store.WorkerStore.
func (s *Store) WorkerSetStatus(ctx context.Context, p store.WorkerSetStatusParams) (*queue.Worker, error) {
	w, err := s.workerRow(ctx, "set status", sqlWorkerSetStatus, p.ID, string(p.Status))
	if errors.Is(err, queue.ErrWorkerNotFound) {
		if _, gerr := s.WorkerGet(ctx, p.ID); gerr == nil {
			return nil, fmt.Errorf("%w: worker %q is OFFLINE: it must register again", queue.ErrIllegalTransition, p.ID)
		}
	}
	return w, err
}

// WorkerDeregister implements store.WorkerStore.
func (s *Store) WorkerDeregister(ctx context.Context, id string) error {
	_, err := s.workerRow(ctx, "deregister", sqlWorkerSetStatus, id, string(queue.WorkerOffline))
	return err
}

func (s *Store) workerRow(ctx context.Context, op, sql, id string, args ...any) (*queue.Worker, error) {
	w, err := scanWorker(s.pool.QueryRow(ctx, sql, append([]any{id}, args...)...))
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, fmt.Errorf("%w: %q", queue.ErrWorkerNotFound, id)
	}
	if err != nil {
		return nil, fmt.Errorf("postgres: %s worker: %w", op, err)
	}
	return w, nil
}
