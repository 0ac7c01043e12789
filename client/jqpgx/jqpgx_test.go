package jqpgx_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/jq-dev/jq/api/workerconn"
	"github.com/jq-dev/jq/client"
	"github.com/jq-dev/jq/client/jqpgx"
	"github.com/jq-dev/jq/internal/testenv/jqserver"
	"github.com/jq-dev/jq/queue"
	"github.com/jq-dev/jq/queue/executor"
)

type order struct {
	ID string `json:"id"`
}

// The server's scheduler ticks once a minute here: a committed job that runs within seconds was
// dispatched by the NOTIFY its transaction sent.
func TestInsertTx(t *testing.T) {
	srv := jqserver.Start(t, "JQ_SCHEDULER_INTERVAL_MS=60000")
	c, err := client.New(client.Options{Addr: srv.Addr})
	require.NoError(t, err)
	t.Cleanup(c.Close)
	startWorker(t, c)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	pool, err := pgxpool.New(ctx, srv.DSN)
	require.NoError(t, err)
	t.Cleanup(pool.Close)

	// The application's own table, changed in the same transaction as the insert.
	_, err = pool.Exec(ctx, `CREATE TABLE app_orders (id text PRIMARY KEY)`)
	require.NoError(t, err)
	job := func(id string) client.Job {
		return client.Job{Queue: "default", Type: "receipt", Payload: order{ID: id}}
	}
	inTx := func(f func(tx pgx.Tx) error) error {
		return pgx.BeginFunc(ctx, pool, f)
	}
	// The worker is registered and idle before the first insert: its registration and its
	// returning capacity wake the scheduler too, and must not pass for the NOTIFY.
	warm, err := c.Submit(ctx, job("warm-up"))
	require.NoError(t, err)
	_, err = c.Wait(ctx, warm.ID)
	require.NoError(t, err)

	t.Run("RollbackLeavesNoJob", func(t *testing.T) {
		var id string
		errRollback := errors.New("roll back")
		err := inTx(func(tx pgx.Tx) error {
			sub, err := jqpgx.InsertTx(ctx, tx, job("o-1"), client.KeepResult())
			require.NoError(t, err)
			id = sub.ID
			return errRollback
		})
		require.ErrorIs(t, err, errRollback)
		_, err = c.Get(ctx, id)
		require.ErrorIs(t, err, queue.ErrJobNotFound)
	})

	t.Run("CommitRunsTheJob", func(t *testing.T) {
		var sub client.Submitted
		require.NoError(t, inTx(func(tx pgx.Tx) error {
			if _, err := tx.Exec(ctx, `INSERT INTO app_orders VALUES ('o-2')`); err != nil {
				return err
			}
			var err error
			sub, err = jqpgx.InsertTx(ctx, tx, job("o-2"), client.KeepResult(), client.Priority(3),
				client.Labels(map[string]string{"source": "tx"}))
			require.NoError(t, err)
			require.False(t, sub.Existing)
			_, err = c.Get(ctx, sub.ID) // invisible until the commit
			require.ErrorIs(t, err, queue.ErrJobNotFound)
			return nil
		}))
		waitCtx, cancel := context.WithTimeout(ctx, 15*time.Second) // far below the scheduler's tick
		defer cancel()
		j, err := c.Wait(waitCtx, sub.ID)
		require.NoError(t, err)
		require.Equal(t, queue.StateDone, j.State)
		require.Equal(t, 3, j.Priority)
		require.Equal(t, map[string]string{"source": "tx"}, j.Labels)
		require.JSONEq(t, `"receipt for o-2"`, string(j.Result))

		// The same rows as a submit: the submission event comes first in the job's log.
		var reason string
		require.NoError(t, pool.QueryRow(ctx, `SELECT reason FROM event_rows WHERE job_id = $1 AND seq = 1`, sub.ID).Scan(&reason))
		require.Equal(t, "submitted", reason)
	})

	t.Run("IdempotencyKey", func(t *testing.T) {
		key := client.IdempotencyKey("order-" + uuid.NewString())
		later := client.RunAt(time.Now().Add(time.Hour).Truncate(time.Second))
		var first client.Submitted
		require.NoError(t, inTx(func(tx pgx.Tx) error {
			var err error
			first, err = jqpgx.InsertTx(ctx, tx, job("o-3"), key, later)
			require.NoError(t, err)
			again, err := jqpgx.InsertTx(ctx, tx, job("o-3"), key, later)
			require.NoError(t, err)
			require.Equal(t, client.Submitted{ID: first.ID, Existing: true}, again)

			// A different spec under the key is refused, and the transaction goes on.
			_, err = jqpgx.InsertTx(ctx, tx, job("o-other"), key, later)
			require.ErrorIs(t, err, queue.ErrIdempotencyConflict)
			_, err = tx.Exec(ctx, `INSERT INTO app_orders VALUES ('o-3')`)
			return err
		}))
		// After the commit, a submit through the API with the same key and spec finds the job.
		sub, err := c.Submit(ctx, job("o-3"), key, later)
		require.NoError(t, err)
		require.Equal(t, client.Submitted{ID: first.ID, Existing: true}, sub)
		var n int
		require.NoError(t, pool.QueryRow(ctx, `SELECT count(*) FROM app_orders WHERE id = 'o-3'`).Scan(&n))
		require.Equal(t, 1, n)
	})

	t.Run("BadSpecRefused", func(t *testing.T) {
		require.NoError(t, inTx(func(tx pgx.Tx) error {
			_, err := jqpgx.InsertTx(ctx, tx, job("o-4"), client.Priority(12))
			require.ErrorIs(t, err, queue.ErrInvalidArgument)
			_, err = jqpgx.InsertTx(ctx, tx, client.Job{Queue: "default", Type: "bad type"})
			require.ErrorIs(t, err, queue.ErrInvalidArgument)
			_, err = jqpgx.InsertTx(ctx, tx, client.Job{Queue: "default", Type: "receipt", Payload: make([]byte, jqpgx.MaxPayloadBytes+1)})
			require.ErrorIs(t, err, queue.ErrInvalidArgument)
			_, err = jqpgx.InsertTx(ctx, tx, client.Job{Queue: "no-such-queue", Type: "receipt"})
			require.ErrorIs(t, err, queue.ErrQueueNotFound)
			_, err = jqpgx.InsertManyTx(ctx, tx, nil)
			require.ErrorIs(t, err, queue.ErrInvalidArgument)
			// Atomic batch: the good job of a refused batch is not kept either.
			_, err = jqpgx.InsertManyTx(ctx, tx, []client.Job{job("o-5"), {Queue: "no-such-queue", Type: "receipt"}})
			require.ErrorIs(t, err, queue.ErrQueueNotFound)
			_, err = tx.Exec(ctx, `INSERT INTO app_orders VALUES ('o-4')`) // the transaction is still usable
			return err
		}))
		var jobs int
		require.NoError(t, pool.QueryRow(ctx, `SELECT count(*) FROM jobs WHERE payload::text LIKE '%o-5%' OR payload::text LIKE '%o-4%'`).Scan(&jobs))
		require.Zero(t, jobs)
	})
}

func startWorker(t *testing.T, c *client.Client) {
	t.Helper()
	mux := queue.NewMux()
	mux.Register("receipt", queue.HandlerOf(func(_ context.Context, _ *queue.Job, o order) (string, error) {
		return "receipt for " + o.ID, nil
	}))
	exec, err := executor.New(executor.Options{
		Conn: workerconn.New(c.API()), Handler: mux, WorkerID: "jqpgx-test-" + uuid.NewString()[:8],
		Concurrency: 2, Queues: []string{"default"}, ShutdownGrace: time.Second, AckDelay: time.Millisecond,
	})
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Go(func() { _ = exec.Run(ctx) })
	t.Cleanup(func() { cancel(); wg.Wait() })
}
