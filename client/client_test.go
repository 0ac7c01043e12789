package client_test

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	"connectrpc.com/connect"
	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/jq-dev/jq/api/apierr"
	jqv1 "github.com/jq-dev/jq/api/gen/jq/v1"
	"github.com/jq-dev/jq/api/workerconn"
	"github.com/jq-dev/jq/client"
	"github.com/jq-dev/jq/internal/testenv"
	"github.com/jq-dev/jq/internal/testenv/jqserver"
	"github.com/jq-dev/jq/queue"
	"github.com/jq-dev/jq/queue/executor"
)

// Tests against one real server (roles.Main --role=server) and an in-process worker whose
// handlers are typed (queue.HandlerOf), so every assertion sees what an application sees.

type addArgs struct {
	A, B int
}

type addResult struct {
	Sum int `json:"sum"`
}

func newClient(t *testing.T, opts client.Options) *client.Client {
	t.Helper()
	c, err := client.New(opts)
	require.NoError(t, err)
	t.Cleanup(c.Close)
	return c
}

// startWorker runs a worker on the default queue until the test ends.
func startWorker(t *testing.T, c *client.Client) {
	t.Helper()
	mux := queue.NewMux()
	mux.Register("add", queue.HandlerOf(func(_ context.Context, _ *queue.Job, a addArgs) (addResult, error) {
		return addResult{Sum: a.A + a.B}, nil
	}))
	mux.RegisterFunc("fail", func(context.Context, *queue.Job) ([]byte, error) {
		return nil, queue.Permanent(errors.New("no"))
	})
	// progress reports 25 %, waits for the test, reports 75 %, waits again, and succeeds.
	mux.RegisterFunc("progress", func(ctx context.Context, _ *queue.Job) ([]byte, error) {
		for _, pct := range []int{25, 75} {
			if err := queue.Progress(ctx, pct, fmt.Sprintf("at %d", pct)); err != nil {
				return nil, err
			}
			select {
			case <-progressStep:
			case <-ctx.Done():
				return nil, context.Cause(ctx)
			}
		}
		return nil, nil
	})
	exec, err := executor.New(executor.Options{
		Conn: workerconn.New(c.API()), Handler: mux, WorkerID: "client-test-" + uuid.NewString()[:8],
		Concurrency: 4, Queues: []string{"default"}, ShutdownGrace: time.Second, AckDelay: time.Millisecond,
	})
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Go(func() { _ = exec.Run(ctx) })
	t.Cleanup(func() { cancel(); wg.Wait() })
}

// progressStep lets the "progress" handler go on to its next step.
var progressStep = make(chan struct{})

func TestAgainstServer(t *testing.T) {
	srv := jqserver.Start(t)
	c := newClient(t, client.Options{Addr: srv.Addr})
	startWorker(t, c)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()

	t.Run("SubmitArgsWaitResult", func(t *testing.T) {
		sub, err := client.SubmitArgs(ctx, c, "default", "add", addArgs{A: 2, B: 3}, client.KeepResult(), client.Priority(7),
			client.Labels(map[string]string{"team": "a"}), client.Labels(map[string]string{"env": "test"}))
		require.NoError(t, err)
		require.False(t, sub.Existing)

		job, err := c.Wait(ctx, sub.ID)
		require.NoError(t, err)
		require.Equal(t, queue.StateDone, job.State)
		require.Equal(t, 7, job.Priority)
		require.Equal(t, map[string]string{"team": "a", "env": "test"}, job.Labels)
		require.JSONEq(t, `{"A": 2, "B": 3}`, string(job.Payload))
		require.JSONEq(t, `{"sum": 5}`, string(job.Result))
		require.Equal(t, queue.Checksum(job.Result), job.ResultChecksum)
		require.False(t, job.CompletedAt.IsZero())

		out, found, err := c.Result(ctx, sub.ID, true)
		require.NoError(t, err)
		require.True(t, found)
		require.Equal(t, client.ResultSuccess, out.Type)
		require.Equal(t, queue.StateDone, out.State)
		require.JSONEq(t, `{"sum": 5}`, string(out.Data))
		require.Equal(t, job.ResultChecksum, out.Checksum)
		require.Equal(t, job.CompletedAt, out.FinishedAt)
		_, found, err = c.Result(ctx, sub.ID, false) // consumed
		require.NoError(t, err)
		require.False(t, found)
	})

	t.Run("Progress", func(t *testing.T) {
		sub, err := c.Submit(ctx, client.Job{Queue: "default", Type: "progress"})
		require.NoError(t, err)
		waitProgress := func(pct int) {
			t.Helper()
			testenv.Eventually(t, 30*time.Second, func() error {
				job, err := c.Get(ctx, sub.ID)
				if err != nil {
					return err
				}
				if job.Progress == nil || job.Progress.Percent != pct {
					return fmt.Errorf("job %s is %s with progress %+v, want %d %%", job.ID, job.State, job.Progress, pct)
				}
				require.Equal(t, fmt.Sprintf("at %d", pct), job.Progress.Message)
				require.False(t, job.Progress.UpdatedAt.IsZero())
				return nil
			})
		}
		waitProgress(25)
		progressStep <- struct{}{}
		waitProgress(75) // sent a second after the first: the worker's coalescing
		progressStep <- struct{}{}
		job, err := c.Wait(ctx, sub.ID)
		require.NoError(t, err)
		require.Equal(t, queue.StateDone, job.State)
		job, err = c.Get(ctx, sub.ID)
		require.NoError(t, err)
		require.Nil(t, job.Progress, "a finished job shows no progress")
	})

	t.Run("WatchProgress", func(t *testing.T) {
		sub, err := c.Submit(ctx, client.Job{Queue: "default", Type: "progress"})
		require.NoError(t, err)
		seen := make(chan int, 16)
		done := make(chan *queue.Job, 1)
		go func() {
			job, err := c.Watch(ctx, sub.ID, func(j *queue.Job) {
				if j.Progress != nil {
					seen <- j.Progress.Percent
				}
			})
			if err != nil {
				job = nil
			}
			done <- job
		}()
		waitSeen := func(pct int) {
			t.Helper()
			for {
				select {
				case got := <-seen:
					if got == pct {
						return
					}
				case <-ctx.Done():
					require.FailNow(t, "Watch did not deliver the progress", "want %d %%", pct)
				}
			}
		}
		waitSeen(25) // carried by the stream, not polled
		progressStep <- struct{}{}
		waitSeen(75)
		progressStep <- struct{}{}
		job := <-done
		require.NotNil(t, job)
		require.Equal(t, queue.StateDone, job.State)
	})

	t.Run("PayloadKinds", func(t *testing.T) {
		for _, p := range []any{[]byte(`{"A":1,"B":1}`), json.RawMessage(`{"A":1,"B":1}`), map[string]int{"A": 1, "B": 1}} {
			sub, err := c.Submit(ctx, client.Job{Queue: "default", Type: "add", Payload: p}, client.KeepResult())
			require.NoError(t, err)
			job, err := c.Wait(ctx, sub.ID)
			require.NoError(t, err)
			require.Equal(t, queue.StateDone, job.State, "%T", p)
			require.JSONEq(t, `{"sum": 2}`, string(job.Result), "%T", p)
		}
		// A payload that does not decode dead-letters the job at once (a permanent failure).
		sub, err := c.Submit(ctx, client.Job{Queue: "default", Type: "add", Payload: []byte(`{"C": 1}`)}, client.MaxRetries(5))
		require.NoError(t, err)
		job, err := c.Wait(ctx, sub.ID)
		require.NoError(t, err)
		require.Equal(t, queue.StateDeadLettered, job.State)
		require.Zero(t, job.RetryCount)
		require.Contains(t, job.LastError, "unknown field")

		_, err = c.Submit(ctx, client.Job{Queue: "default", Type: "add", Payload: func() {}})
		require.ErrorIs(t, err, queue.ErrInvalidArgument)
	})

	t.Run("Idempotency", func(t *testing.T) {
		key := client.IdempotencyKey("k-" + uuid.NewString())
		later := client.RunAt(time.Now().Add(time.Hour)) // not Delay: run_at is part of the spec
		job := client.Job{Queue: "default", Type: "add", Payload: addArgs{A: 1}}
		first, err := c.Submit(ctx, job, key, later)
		require.NoError(t, err)
		again, err := c.Submit(ctx, job, key, later)
		require.NoError(t, err)
		require.Equal(t, client.Submitted{ID: first.ID, Existing: true}, again)

		_, err = c.Submit(ctx, client.Job{Queue: "default", Type: "add", Payload: addArgs{A: 2}}, key, later)
		require.ErrorIs(t, err, queue.ErrIdempotencyConflict)
		var ce *connect.Error
		require.ErrorAs(t, err, &ce)
		require.Equal(t, connect.CodeFailedPrecondition, ce.Code())
		require.Contains(t, err.Error(), first.ID, "the message names the job holding the key")
		require.True(t, strings.HasPrefix(err.Error(), "submit: "), err.Error())
	})

	t.Run("SubmitMany", func(t *testing.T) {
		subs, err := c.SubmitMany(ctx, []client.Job{
			{Queue: "default", Type: "add", Payload: addArgs{A: 1, B: 1}},
			{Queue: "default", Type: "add", Payload: addArgs{A: 2, B: 2}, Options: []client.Option{client.Priority(9)}},
		}, client.KeepResult(), client.Priority(1))
		require.NoError(t, err)
		require.Len(t, subs, 2)
		for i, want := range []struct{ prio, sum int }{{1, 2}, {9, 4}} {
			job, err := c.Wait(ctx, subs[i].ID)
			require.NoError(t, err)
			require.Equal(t, want.prio, job.Priority)
			require.JSONEq(t, fmt.Sprintf(`{"sum": %d}`, want.sum), string(job.Result))
		}

		// Atomic: one bad spec refuses the batch, naming its index.
		_, err = c.SubmitMany(ctx, []client.Job{
			{Queue: "default", Type: "add"},
			{Queue: "default", Type: "has space"},
		})
		require.ErrorIs(t, err, queue.ErrInvalidArgument)
		require.Contains(t, err.Error(), "jobs[1]")
		_, err = c.SubmitMany(ctx, nil)
		require.ErrorIs(t, err, queue.ErrInvalidArgument)
	})

	t.Run("CancelAndRetry", func(t *testing.T) {
		sub, err := c.Submit(ctx, client.Job{Queue: "default", Type: "add", Payload: addArgs{}}, client.RunAt(time.Now().Add(time.Hour)))
		require.NoError(t, err)
		job, err := c.Get(ctx, sub.ID)
		require.NoError(t, err)
		require.Equal(t, queue.StatePending, job.State)
		require.WithinDuration(t, time.Now().Add(time.Hour), job.NotBefore, time.Minute)

		_, err = c.Retry(ctx, sub.ID) // PENDING: nothing to retry
		require.ErrorIs(t, err, queue.ErrIllegalTransition)

		job, err = c.Cancel(ctx, sub.ID)
		require.NoError(t, err)
		require.Equal(t, queue.StateDeadLettered, job.State)
		require.Equal(t, "cancelled", job.FailureReason)
		require.False(t, job.CancelRequested)
		job, err = c.Wait(ctx, sub.ID)
		require.NoError(t, err)
		require.Equal(t, queue.StateDeadLettered, job.State)

		_, err = c.Cancel(ctx, sub.ID) // already dead-lettered
		require.ErrorIs(t, err, queue.ErrIllegalTransition)

		job, err = c.Retry(ctx, sub.ID)
		require.NoError(t, err)
		require.Equal(t, queue.StatePending, job.State)
		job, err = c.Wait(ctx, sub.ID) // due at once now
		require.NoError(t, err)
		require.Equal(t, queue.StateDone, job.State)

		job, err = c.Delete(ctx, sub.ID) // DONE: finished, so it may go
		require.NoError(t, err)
		require.Equal(t, queue.StateDone, job.State, "the job as it was")
		_, err = c.Get(ctx, sub.ID)
		require.ErrorIs(t, err, queue.ErrJobNotFound)
		_, err = c.Delete(ctx, sub.ID)
		require.ErrorIs(t, err, queue.ErrJobNotFound)
	})

	t.Run("DeleteRefusesALiveJob", func(t *testing.T) {
		sub, err := c.Submit(ctx, client.Job{Queue: "default", Type: "add", Payload: addArgs{}}, client.RunAt(time.Now().Add(time.Hour)))
		require.NoError(t, err)
		_, err = c.Delete(ctx, sub.ID) // PENDING: cancel it first
		require.ErrorIs(t, err, queue.ErrIllegalTransition)
		require.ErrorContains(t, err, "cancel it first")
		var e *client.Error
		require.ErrorAs(t, err, &e)
		require.Equal(t, "delete job", e.Op)
		_, err = c.Cancel(ctx, sub.ID)
		require.NoError(t, err)
		_, err = c.Delete(ctx, sub.ID)
		require.NoError(t, err)
	})

	t.Run("Errors", func(t *testing.T) {
		_, err := c.Get(ctx, uuid.NewString())
		require.ErrorIs(t, err, queue.ErrJobNotFound)
		require.NotErrorIs(t, err, queue.ErrQueueNotFound)
		require.Equal(t, "JOB_NOT_FOUND", apierr.Reason(err))
		_, err = c.Wait(ctx, uuid.NewString())
		require.ErrorIs(t, err, queue.ErrJobNotFound)
		_, _, err = c.Result(ctx, uuid.NewString(), false)
		require.ErrorIs(t, err, queue.ErrJobNotFound)
		_, err = c.Cancel(ctx, uuid.NewString())
		require.ErrorIs(t, err, queue.ErrJobNotFound)

		_, err = c.Get(ctx, "not-a-uuid")
		require.ErrorIs(t, err, queue.ErrInvalidArgument)

		_, err = c.Submit(ctx, client.Job{Queue: "no-such-queue", Type: "add"})
		require.ErrorIs(t, err, queue.ErrQueueNotFound)
		require.NotErrorIs(t, err, queue.ErrJobNotFound)
		require.Equal(t, "QUEUE_NOT_FOUND", apierr.Reason(err), "the reason travels, not a guess from NOT_FOUND")
		require.Contains(t, err.Error(), "no-such-queue")

		// A call through the stubs maps the same way with CallError.
		_, err = c.API().Queues.GetQueue(ctx, connect.NewRequest(&jqv1.GetQueueRequest{Name: "no-such-queue"}))
		require.Equal(t, connect.CodeNotFound, connect.CodeOf(err))
		err = client.CallError("", err)
		require.ErrorIs(t, err, queue.ErrQueueNotFound)
		require.NotErrorIs(t, err, queue.ErrJobNotFound)

		for _, opt := range []client.Option{client.Priority(10), client.Priority(-1), client.MaxRetries(1000),
			client.Timeout(-time.Second), client.TTL(-time.Second), client.IdempotencyKey(strings.Repeat("k", 300))} {
			_, err = c.Submit(ctx, client.Job{Queue: "default", Type: "add"}, opt)
			require.ErrorIs(t, err, queue.ErrInvalidArgument)
			var e *client.Error
			require.ErrorAs(t, err, &e)
			require.Equal(t, "submit", e.Op)
		}

		// A dead-lettered job is not an error of Wait.
		sub, err := c.Submit(ctx, client.Job{Queue: "default", Type: "fail"})
		require.NoError(t, err)
		job, err := c.Wait(ctx, sub.ID)
		require.NoError(t, err)
		require.Equal(t, queue.StateDeadLettered, job.State)
		// Its result is a failure (seed 001), without keep_result and however often it is read.
		for range 2 {
			res, found, err := c.Result(ctx, sub.ID, true)
			require.NoError(t, err)
			require.True(t, found)
			require.Equal(t, client.ResultFailure, res.Type)
			require.Equal(t, job.FailureReason, res.Reason)
			require.False(t, res.ShouldRetry, "permanent, and dead-lettered")
			require.Equal(t, job.LastError, res.Message)
			errText, err := json.Marshal(job.LastError)
			require.NoError(t, err)
			require.JSONEq(t, string(errText), string(res.Error), "plain text comes as a JSON string")
			require.Equal(t, job.CompletedAt, res.FinishedAt)
			require.Nil(t, res.Data)
		}

		// Wait ends with its context.
		sub, err = c.Submit(ctx, client.Job{Queue: "default", Type: "add"}, client.Delay(time.Hour))
		require.NoError(t, err)
		short, cancelShort := context.WithTimeout(ctx, 200*time.Millisecond)
		defer cancelShort()
		_, err = c.Wait(short, sub.ID)
		require.ErrorIs(t, err, context.DeadlineExceeded)
	})
}

func TestUnavailable(t *testing.T) {
	t.Parallel()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	addr := ln.Addr().String()
	require.NoError(t, ln.Close()) // nothing listens there now
	c := newClient(t, client.Options{Addr: addr})
	_, err = c.Submit(t.Context(), client.Job{Queue: "default", Type: "add"})
	require.ErrorIs(t, err, client.ErrUnavailable)
	var ce *connect.Error
	require.ErrorAs(t, err, &ce)
	require.Equal(t, connect.CodeUnavailable, ce.Code())
}

func TestAuthErrors(t *testing.T) {
	token := "tok-" + uuid.NewString()
	sum := sha256.Sum256([]byte(token))
	srv := jqserver.Start(t, "JQ_AUTH_ENABLED=true",
		"JQ_AUTH_TOKENS=name=ingest;roles=producer;queues=elsewhere;sha256="+hex.EncodeToString(sum[:]))
	ctx := t.Context()

	_, err := newClient(t, client.Options{Addr: srv.Addr}).Submit(ctx, client.Job{Queue: "default", Type: "add"})
	require.ErrorIs(t, err, queue.ErrUnauthenticated)
	_, err = newClient(t, client.Options{Addr: srv.Addr, Token: "wrong"}).Get(ctx, uuid.NewString())
	require.ErrorIs(t, err, queue.ErrUnauthenticated)

	_, err = newClient(t, client.Options{Addr: srv.Addr, Token: token}).Submit(ctx, client.Job{Queue: "default", Type: "add"})
	require.ErrorIs(t, err, queue.ErrPermissionDenied)
}
