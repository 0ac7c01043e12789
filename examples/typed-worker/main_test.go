package main

import (
	"context"
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
