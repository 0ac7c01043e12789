// Package jqpgx inserts jobs inside an application's own pgx transaction on jq's database, so a
// job exists if and only if the application's change commits (the transactional outbox, River's
// InsertTx):
//
//	tx, err := pool.Begin(ctx)
//	…
//	if _, err := tx.Exec(ctx, `UPDATE orders SET state = 'paid' WHERE id = $1`, orderID); err != nil { … }
//	sub, err := jqpgx.InsertTx(ctx, tx, client.Job{Queue: "emails", Type: "receipt", Payload: Receipt{OrderID: orderID}},
//		client.IdempotencyKey("receipt-"+orderID))
//	…
//	err = tx.Commit(ctx) // the job is PENDING now, and the servers are woken to dispatch it
//
// The job is written as a submit through the API writes it: the same validation (what the server's
// SubmitJob checks, with the default payload limit), the job row and its submission event in one
// statement, the queue's defaults, and the same idempotency-key semantics. Inside the transaction
// it also sends the servers' wake-up NOTIFY, which Postgres delivers only at commit, so a committed
// job is dispatched at once rather than at the scheduler's next tick.
//
// What differs from a submit through the API: no authentication (the job has no principal, as with
// authentication off: a producer whose token limits it to its own jobs does not see it) and no
// trace context is attached. The transaction must be on jq's own database with its schema migrated.
//
// This package is the one place outside roles/wire.go where an application reaches a jq backend
// directly, by design: it imports pgx and store/postgres, which package client does not.
package jqpgx

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/jq-dev/jq/api"
	"github.com/jq-dev/jq/client"
	"github.com/jq-dev/jq/queue"
	"github.com/jq-dev/jq/store"
	"github.com/jq-dev/jq/store/postgres"
)

// MaxPayloadBytes is the largest payload InsertTx accepts: the server's default limit
// (server.max_payload_bytes), which it cannot read from here.
const MaxPayloadBytes = 1 << 20

// InsertTx inserts one job inside tx; see the package documentation. Errors wrap the queue
// sentinels, as the client's do: queue.ErrInvalidArgument, queue.ErrQueueNotFound,
// queue.ErrIdempotencyConflict. A refused insert leaves tx as it was, still usable.
func InsertTx(ctx context.Context, tx pgx.Tx, job client.Job, opts ...client.Option) (client.Submitted, error) {
	subs, err := insert(ctx, tx, []client.Job{job}, opts)
	if err != nil {
		return client.Submitted{}, err
	}
	return subs[0], nil
}

// InsertManyTx inserts 1 to client.MaxBatch jobs inside tx, all or none; opts apply to every job
// before each job's own Options. The results are in the order of jobs.
func InsertManyTx(ctx context.Context, tx pgx.Tx, jobs []client.Job, opts ...client.Option) ([]client.Submitted, error) {
	return insert(ctx, tx, jobs, opts)
}

func insert(ctx context.Context, tx pgx.Tx, jobs []client.Job, opts []client.Option) ([]client.Submitted, error) {
	if len(jobs) == 0 || len(jobs) > client.MaxBatch {
		return nil, fmt.Errorf("jqpgx: insert: %w", invalidBatch(len(jobs)))
	}
	now := time.Now()
	ps := make([]store.JobInsertParams, len(jobs))
	for i, j := range jobs {
		spec, err := j.JobSpec(opts...)
		if err == nil {
			ps[i], err = api.JobSpecParams(spec, MaxPayloadBytes, now)
		}
		if err != nil {
			return nil, fmt.Errorf("jqpgx: insert: jobs[%d]: %w", i, err)
		}
	}
	res, err := postgres.InsertTx(ctx, tx, ps)
	if err != nil {
		return nil, fmt.Errorf("jqpgx: insert: %w", err)
	}
	out := make([]client.Submitted, len(res))
	for i, r := range res {
		out[i] = client.Submitted{ID: r.Job.ID, Existing: r.Existing}
	}
	return out, nil
}

func invalidBatch(n int) error {
	return fmt.Errorf("%w: want 1..%d jobs, got %d", queue.ErrInvalidArgument, client.MaxBatch, n)
}
