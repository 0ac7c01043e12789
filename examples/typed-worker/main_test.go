package main

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/jq-dev/jq/client"
	"github.com/jq-dev/jq/internal/testenv/jqserver"
	"github.com/jq-dev/jq/queue"
)

// TestTypedWorker runs the example's worker against a real server and gives it work with the
// typed client helper.
func TestTypedWorker(t *testing.T) {
	srv := jqserver.Start(t)
	ctx, cancel := context.WithCancel(t.Context())
	var wg sync.WaitGroup
	var runErr error
	wg.Go(func() { runErr = run(ctx, []string{"--server-addr", srv.Addr, "--concurrency", "2"}) })

	c, err := client.New(client.Options{Addr: srv.Addr})
	require.NoError(t, err)
	defer c.Close()
	waitCtx, cancelWait := context.WithTimeout(t.Context(), time.Minute)
	defer cancelWait()

	sub, err := client.SubmitArgs(waitCtx, c, "default", "greet", GreetArgs{Name: "Ada", Shout: true}, client.KeepResult())
	require.NoError(t, err)
	job, err := c.Wait(waitCtx, sub.ID)
	require.NoError(t, err)
	require.Equal(t, queue.StateDone, job.State)
	require.JSONEq(t, `{"greeting": "HELLO, ADA!"}`, string(job.Result))

	// A permanent failure is dead-lettered without retries.
	sub, err = client.SubmitArgs(waitCtx, c, "default", "greet", GreetArgs{}, client.MaxRetries(3))
	require.NoError(t, err)
	job, err = c.Wait(waitCtx, sub.ID)
	require.NoError(t, err)
	require.Equal(t, queue.StateDeadLettered, job.State)
	require.Contains(t, job.LastError, "name is required")
	require.Zero(t, job.RetryCount)

	cancel() // SIGTERM, as main sees it
	wg.Wait()
	require.NoError(t, runErr)
}

// TestTypedWorkerBesideAll: the example's worker
// (greet) on the queue of `jq --role=all`, whose built-in worker handles exec, file, http, noop and
// sleep. Each job goes to the worker of its type at its first attempt and none is dead-lettered;
// a type neither handles waits PENDING and GetJob says why.
func TestTypedWorkerBesideAll(t *testing.T) {
	srv := jqserver.StartRole(t, "all")
	ctx, cancel := context.WithCancel(t.Context())
	var wg sync.WaitGroup
	var runErr error
	wg.Go(func() { runErr = run(ctx, []string{"--server-addr", srv.Addr, "--concurrency", "2"}) })
	defer func() {
		cancel()
		wg.Wait()
		require.NoError(t, runErr)
	}()

	c, err := client.New(client.Options{Addr: srv.Addr})
	require.NoError(t, err)
	defer c.Close()
	waitCtx, cancelWait := context.WithTimeout(t.Context(), time.Minute)
	defer cancelWait()

	// Submitted first, so that every claim below passes over it.
	orphan, err := c.Submit(waitCtx, client.Job{Queue: "default", Type: "email", Payload: []byte(`{}`)})
	require.NoError(t, err)
	var greets, noops []string
	for i := range 8 {
		sub, err := client.SubmitArgs(waitCtx, c, "default", "greet", GreetArgs{Name: fmt.Sprint("n", i)})
		require.NoError(t, err)
		greets = append(greets, sub.ID)
		sub, err = c.Submit(waitCtx, client.Job{Queue: "default", Type: "noop"})
		require.NoError(t, err)
		noops = append(noops, sub.ID)
	}
	workers := map[string]map[string]bool{} // type → the workers that ran it
	for _, id := range append(greets, noops...) {
		job, err := c.Wait(waitCtx, id)
		require.NoError(t, err)
		require.Equal(t, queue.StateDone, job.State, "job %s of type %s: %s", id, job.Type, job.LastError)
		require.Equal(t, 1, job.Attempt, "job %s of type %s", id, job.Type)
		if workers[job.Type] == nil {
			workers[job.Type] = map[string]bool{}
		}
		workers[job.Type][job.WorkerID] = true
	}
	require.Len(t, workers["greet"], 1, "%v", workers)
	require.Len(t, workers["noop"], 1, "%v", workers)
	require.NotEqual(t, workers["greet"], workers["noop"], "the example ran the greet jobs, the built-in worker the noop jobs")

	job, err := c.Get(waitCtx, orphan.ID)
	require.NoError(t, err)
	require.Equal(t, queue.StatePending, job.State)
	require.Zero(t, job.Attempt)
	require.Equal(t, "no connected worker handles type email", job.Waiting)
}
