package main

import (
	"bytes"
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/jq-dev/jq/api/workerconn"
	"github.com/jq-dev/jq/client"
	"github.com/jq-dev/jq/internal/testenv/jqserver"
	"github.com/jq-dev/jq/queue"
	"github.com/jq-dev/jq/queue/executor"
)

// TestSubmitAndWait runs the example against a real server with a worker that echoes a greeting.
func TestSubmitAndWait(t *testing.T) {
	srv := jqserver.Start(t)
	c, err := client.New(client.Options{Addr: srv.Addr})
	require.NoError(t, err)
	defer c.Close()
	mux := queue.NewMux()
	mux.Register("greet", queue.HandlerOf(func(_ context.Context, _ *queue.Job, a struct{ Name string }) (string, error) {
		return "hello " + a.Name, nil
	}))
	exec, err := executor.New(executor.Options{Conn: workerconn.New(c.API()), Handler: mux, WorkerID: "example-worker",
		Concurrency: 1, Queues: []string{"default"}, ShutdownGrace: time.Second})
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(t.Context())
	var wg sync.WaitGroup
	wg.Go(func() { _ = exec.Run(ctx) })
	defer wg.Wait()
	defer cancel()

	var out bytes.Buffer
	require.NoError(t, run(t.Context(), []string{"--server-addr", srv.Addr, "--type", "greet", "--payload", `{"Name": "Ada"}`}, &out))
	require.Equal(t, `"hello Ada"`, strings.TrimSpace(out.String()))

	err = run(t.Context(), []string{"--server-addr", srv.Addr, "--queue", "nope", "--type", "greet"}, &out)
	require.ErrorIs(t, err, queue.ErrQueueNotFound)
	require.Contains(t, err.Error(), "queue create nope")

	err = run(t.Context(), []string{"--server-addr", srv.Addr, "--type", "greet", "--payload", `{"Nom": "Ada"}`}, &out)
	require.ErrorContains(t, err, "DEAD_LETTERED")
}
