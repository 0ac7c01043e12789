package engine_test

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"connectrpc.com/connect"
	"github.com/stretchr/testify/require"

	jqv1 "github.com/jq-dev/jq/api/gen/jq/v1"
	"github.com/jq-dev/jq/api/workerconn"
	"github.com/jq-dev/jq/internal/testenv"
	"github.com/jq-dev/jq/queue"
	"github.com/jq-dev/jq/queue/executor"
)

// Two idle workers of concurrency 2 with a prefetch of 2 each: four jobs submitted at once run
// two on each worker, not four on one (two running, two waiting in its prefetch buffer). A
// worker's prefetch only takes jobs that no idle slot of another worker could start.
func TestDispatchFillsIdleSlotsBeforePrefetch(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	r := h.startReplica()
	cl := h.client(r.addr)
	q := "fair-" + h.prefix[len(h.prefix)-8:]
	h.createQueue(cl, q)

	release := make(chan struct{})
	var running [2]atomic.Int64
	for i := range 2 {
		mux := queue.NewMux()
		mux.RegisterFunc("hold", func(ctx context.Context, _ *queue.Job) ([]byte, error) {
			running[i].Add(1)
			select {
			case <-release:
			case <-ctx.Done():
			}
			return nil, nil
		})
		ex, err := executor.New(executor.Options{
			Conn: workerconn.New(h.client(r.addr)), Handler: mux, WorkerID: fmt.Sprintf("%s-w%d", q, i), Hostname: "test",
			Concurrency: 2, Prefetch: 2, Queues: []string{q}, HeartbeatInterval: time.Second, ShutdownGrace: 5 * time.Second,
		})
		require.NoError(t, err)
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan struct{})
		go func() { _ = ex.Run(ctx); close(done) }()
		t.Cleanup(func() { cancel(); <-done })
	}
	var once sync.Once
	t.Cleanup(func() { once.Do(func() { close(release) }) })
	// Both streams open, each with its session on the replica.
	testenv.Eventually(t, 30*time.Second, func() error {
		if n := r.engine.Sessions(); n != 2 {
			return fmt.Errorf("%d of 2 sessions open", n)
		}
		return nil
	})

	specs := make([]*jqv1.JobSpec, 4)
	for i := range specs {
		specs[i] = &jqv1.JobSpec{Queue: q, Type: "hold"}
	}
	_, err := cl.Jobs.SubmitJobs(h.ctx, connect.NewRequest(&jqv1.SubmitJobsRequest{Jobs: specs}))
	require.NoError(t, err)
	testenv.Eventually(t, 30*time.Second, func() error {
		if a, b := running[0].Load(), running[1].Load(); a+b != 4 {
			return fmt.Errorf("%d and %d jobs running on the two workers, want 2 and 2", a, b)
		}
		return nil
	})
	require.EqualValues(t, 2, running[0].Load())
	require.EqualValues(t, 2, running[1].Load())
	once.Do(func() { close(release) })
}
