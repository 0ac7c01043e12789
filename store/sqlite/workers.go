package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"slices"

	"github.com/jq-dev/jq/queue"
	"github.com/jq-dev/jq/store"
)

const (
	// Re-registering an id (a restarted worker) replaces its row and brings it back ONLINE. The
	// first principal to register an id owns it for good: another principal's registration
	// updates nothing; one without a principal (authentication off) keeps the owner.
	// ?1 id, ?2 hostname, ?3 concurrency, ?4 queues, ?5 version, ?6 principal, ?7 any owner,
	// ?8 types, ?9 now.
	sqlWorkerRegister = `
INSERT INTO workers (id, hostname, status, concurrency, queues, version, started_at,
                     last_heartbeat_at, updated_at, principal, types)
VALUES (?1, ?2, 'ONLINE', ?3, ?4, ?5, ?9, ?9, ?9, ?6, ?8)
ON CONFLICT (id) DO UPDATE SET
    hostname = excluded.hostname, status = 'ONLINE', concurrency = excluded.concurrency,
    queues = excluded.queues, version = excluded.version, types = excluded.types, started_at = ?9,
    last_heartbeat_at = ?9, updated_at = ?9, shutdown_requested = 0,
    principal = CASE WHEN workers.principal = '' THEN excluded.principal ELSE workers.principal END
WHERE excluded.principal = '' OR workers.principal = '' OR workers.principal = excluded.principal OR ?7`

	sqlWorkerCountLiveExcept = `SELECT count(*) FROM workers WHERE status <> 'OFFLINE' AND id <> ?1`

	// Garbage collection of long-OFFLINE rows, a bounded batch per registration.
	sqlWorkerGC = `DELETE FROM workers WHERE id IN (
    SELECT id FROM workers WHERE status = 'OFFLINE' AND updated_at < ?1 LIMIT 1000)`

	// The principal's rows but the id registering: the live ones, and all.
	sqlWorkerCountOfPrincipal = `SELECT coalesce(sum(status <> 'OFFLINE'), 0), count(*)
FROM workers WHERE principal = ?1 AND id <> ?2`

	// Room for one more row of the principal: its ?3 oldest OFFLINE rows go.
	sqlWorkerPruneOfPrincipal = `DELETE FROM workers WHERE id IN (
    SELECT id FROM workers WHERE principal = ?1 AND status = 'OFFLINE' AND id <> ?2
    ORDER BY updated_at, id LIMIT ?3)`

	sqlWorkerCounts = `SELECT count(*), coalesce(sum(principal = ?1), 0)
FROM workers WHERE status <> 'OFFLINE' AND id <> ?2`

	sqlWorkerHeartbeat = `UPDATE workers SET last_heartbeat_at = ?3, updated_at = ?3, breakers = ?2 WHERE id = ?1`

	sqlWorkerGet = `SELECT ` + workerColumns + ` FROM workers w WHERE w.id = ?1`

	sqlWorkerList = `SELECT ` + workerColumns + ` FROM workers w ORDER BY w.id`

	sqlWorkerListPage = `SELECT ` + workerColumns + ` FROM workers w WHERE w.id > ?1 ORDER BY w.id LIMIT ?2`

	// Only registering brings an OFFLINE worker back (compare-and-set on the status).
	sqlWorkerSetStatus = `UPDATE workers SET status = ?2, updated_at = ?3
WHERE id = ?1 AND (status <> 'OFFLINE' OR ?2 = 'OFFLINE')`
)

// WorkerRegister implements store.WorkerStore.
func (s *Store) WorkerRegister(ctx context.Context, p store.WorkerRegisterParams) (*queue.Worker, error) {
	types := append([]string{}, p.Types...)
	slices.Sort(types)
	var w *queue.Worker
	err := s.write(ctx, func(tx *wtx) error {
		if p.OfflineRetention > 0 {
			if _, err := tx.exec(sqlWorkerGC, us(tx.now.Add(-p.OfflineRetention))); err != nil {
				return err
			}
		}
		if p.MaxLive > 0 {
			var n int
			if err := tx.queryRow(sqlWorkerCountLiveExcept, p.ID).Scan(&n); err != nil {
				return err
			}
			if n >= p.MaxLive {
				return fmt.Errorf("%w: %d workers are registered, the most allowed (server.max_workers)", queue.ErrLimitReached, n)
			}
		}
		if p.MaxOfPrincipal > 0 && p.Principal != "" {
			var live, rows int
			if err := tx.queryRow(sqlWorkerCountOfPrincipal, p.Principal, p.ID).Scan(&live, &rows); err != nil {
				return err
			}
			if live >= p.MaxOfPrincipal {
				return fmt.Errorf("%w: %s has %d live workers, the most allowed (auth.max_workers_per_principal)",
					queue.ErrLimitReached, p.Principal, live)
			}
			if rows >= p.MaxOfPrincipal {
				if _, err := tx.exec(sqlWorkerPruneOfPrincipal, p.Principal, p.ID, rows-p.MaxOfPrincipal+1); err != nil {
					return err
				}
			}
		}
		res, err := tx.exec(sqlWorkerRegister, p.ID, p.Hostname, p.Concurrency, listText(p.Queues), p.Version,
			p.Principal, p.AnyOwner, listText(types), us(tx.now))
		if err != nil {
			return err
		}
		if n, err := res.RowsAffected(); err != nil || n == 0 {
			return fmt.Errorf("%w: worker id %q is registered by another principal", queue.ErrPermissionDenied, p.ID)
		}
		w, err = scanWorker(tx.queryRow(sqlWorkerGet, p.ID))
		return err
	})
	if errors.Is(err, queue.ErrLimitReached) || errors.Is(err, queue.ErrPermissionDenied) {
		return nil, err
	}
	if err != nil {
		return nil, errs.Wrap("register worker", err)
	}
	return w, nil
}

// WorkerCounts implements store.WorkerStore.
func (s *Store) WorkerCounts(ctx context.Context, principal, except string) (store.WorkerCounts, error) {
	var c store.WorkerCounts
	if err := s.queryRow(ctx, sqlWorkerCounts, principal, except).Scan(&c.Live, &c.LiveOfPrincipal); err != nil {
		return c, errs.Wrap("count workers", err)
	}
	return c, nil
}

// WorkerHeartbeat implements store.WorkerStore.
func (s *Store) WorkerHeartbeat(ctx context.Context, p store.WorkerHeartbeatParams) (*queue.Worker, error) {
	return s.workerUpdate(ctx, "heartbeat", p.ID, sqlWorkerHeartbeat, breakersText(p.Breakers))
}

// WorkerGet implements store.WorkerStore.
func (s *Store) WorkerGet(ctx context.Context, id string) (*queue.Worker, error) {
	w, err := scanWorker(s.queryRow(ctx, sqlWorkerGet, id))
	if err != nil {
		return nil, errs.Row("get worker", err, queue.ErrWorkerNotFound, id)
	}
	return w, nil
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

func (s *Store) workerList(ctx context.Context, q string, args ...any) ([]*queue.Worker, error) {
	rows, err := s.query(ctx, q, args...)
	if err != nil {
		return nil, errs.Wrap("list workers", err)
	}
	ws, err := collect(rows, scanWorker)
	return ws, errs.Wrap("list workers", err)
}

// WorkerSetStatus implements store.WorkerStore.
func (s *Store) WorkerSetStatus(ctx context.Context, p store.WorkerSetStatusParams) (*queue.Worker, error) {
	w, err := s.workerUpdate(ctx, "set status", p.ID, sqlWorkerSetStatus, string(p.Status))
	if errors.Is(err, queue.ErrWorkerNotFound) {
		if _, gerr := s.WorkerGet(ctx, p.ID); gerr == nil {
			return nil, fmt.Errorf("%w: worker %q is OFFLINE: it must register again", queue.ErrIllegalTransition, p.ID)
		}
	}
	return w, err
}

// WorkerDeregister implements store.WorkerStore.
func (s *Store) WorkerDeregister(ctx context.Context, id string) error {
	_, err := s.workerUpdate(ctx, "deregister", id, sqlWorkerSetStatus, string(queue.WorkerOffline))
	return err
}

// workerUpdate runs an UPDATE of one worker (?1 its id, ?2 arg, ?3 now) and reads the row back.
func (s *Store) workerUpdate(ctx context.Context, op, id, q string, arg any) (*queue.Worker, error) {
	var w *queue.Worker
	err := s.write(ctx, func(tx *wtx) error {
		res, err := tx.exec(q, id, arg, us(tx.now))
		if err != nil {
			return err
		}
		if n, err := res.RowsAffected(); err != nil || n == 0 {
			return sql.ErrNoRows
		}
		w, err = scanWorker(tx.queryRow(sqlWorkerGet, id))
		return err
	})
	if errors.Is(err, sql.ErrNoRows) {
		return nil, fmt.Errorf("%w: %q", queue.ErrWorkerNotFound, id)
	}
	if err != nil {
		return nil, fmt.Errorf("sqlite: %s worker: %w", op, err)
	}
	return w, nil
}
