package postgres

import (
	"context"
	"fmt"

	"github.com/jq-dev/jq/store"
)

// notifyChannel is the LISTEN/NOTIFY channel of due work; the payload is the
// queue name.
const notifyChannel = "jq_jobs_due"

// sqlNotify sends one notification per queue of $1. Inside a transaction Postgres delivers them at
// commit, and not at all on rollback (InsertTx relies on that).
const sqlNotify = "-- name: notify\n" + `SELECT pg_notify('` + notifyChannel + `', q) FROM unnest($1::text[]) AS q`

var _ store.Notifier = (*Store)(nil)

// Notify sends one notification per queue in one statement.
func (s *Store) Notify(ctx context.Context, queues []string) error {
	if len(queues) == 0 {
		return nil
	}
	if _, err := s.pool.Exec(ctx, sqlNotify, queues); err != nil {
		return fmt.Errorf("notify: %w", err)
	}
	return nil
}

// Listen holds one pool connection for LISTEN until ctx ends or it fails.
func (s *Store) Listen(ctx context.Context, f func(queueName string)) error {
	conn, err := s.pool.Acquire(ctx)
	if err != nil {
		return fmt.Errorf("listen: acquire: %w", err)
	}
	defer conn.Release()
	if _, err := conn.Exec(ctx, "LISTEN "+notifyChannel); err != nil {
		return fmt.Errorf("listen: %w", err)
	}
	defer func() {
		// The connection goes back to the pool: stop listening first.
		_, _ = conn.Exec(context.WithoutCancel(ctx), "UNLISTEN "+notifyChannel)
	}()
	for {
		n, err := conn.Conn().WaitForNotification(ctx)
		if err != nil {
			if ctx.Err() != nil {
				return nil
			}
			return fmt.Errorf("listen: %w", err)
		}
		f(n.Payload)
	}
}
