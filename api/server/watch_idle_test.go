package apiserver_test

import (
	"context"
	"sync"
	"syscall"
	"testing"
	"time"

	"connectrpc.com/connect"
	"github.com/stretchr/testify/require"

	jqv1 "github.com/jq-dev/jq/api/gen/jq/v1"
	"github.com/jq-dev/jq/queue/engine"
	"github.com/jq-dev/jq/store"
)

// Idle watch streams cost next to nothing: 5,000 WatchJob streams (1,000 under the race detector)
// on PENDING jobs that do not change, measured over a 10 s window. The streams are woken by the
// events of their jobs (the hub's one feed read per second for the replica), not by a re-read each:
// the database sees a handful of statements per second instead of one per stream per second. The
// CPU of this process (server and client of the streams, and the running engine) over the window is
// reported, not asserted (the machine is shared).
func TestWatchIdleStreamsCost(t *testing.T) {
	if testing.Short() {
		t.Skip("opens thousands of streams for 10 s")
	}
	b := setupEngine(t, engine.Options{})
	n := 5000
	if raceOn {
		n = 1000
	}
	ps := make([]store.JobInsertParams, n)
	for i := range ps {
		ps[i] = store.JobInsertParams{Queue: b.queue, Type: "t"}
	}
	res, err := b.store.JobInsertMany(b.ctx, ps)
	require.NoError(t, err)

	ctx, cancel := context.WithCancel(b.ctx)
	var opened, wg sync.WaitGroup
	opened.Add(n)
	for _, r := range res {
		wg.Go(func() {
			s, err := b.cl.Jobs.WatchJob(ctx, connect.NewRequest(&jqv1.WatchJobRequest{JobId: r.Job.ID}))
			if err != nil {
				opened.Done()
				return
			}
			defer func() { _ = s.Close() }()
			first := true
			for s.Receive() {
				if first {
					opened.Done()
					first = false
				}
			}
			if first {
				opened.Done()
			}
		})
	}
	opened.Wait()
	defer func() { cancel(); wg.Wait() }()

	xacts := func() int64 {
		var x int64
		require.NoError(t, b.store.Pool().QueryRow(b.ctx,
			`SELECT xact_commit + xact_rollback FROM pg_stat_database WHERE datname = current_database()`).Scan(&x))
		return x
	}
	const window = 10 * time.Second
	x0, cpu0, t0 := xacts(), processCPU(t), time.Now()
	time.Sleep(window) // the window measured: nothing happens in it, which is the point
	x1, cpu1, el := xacts(), processCPU(t), time.Since(t0)
	perSec := float64(x1-x0) / el.Seconds()
	cores := (cpu1 - cpu0).Seconds() / el.Seconds()
	t.Logf("%d idle WatchJob streams over %s: %.1f database transactions/s (all of this database's: engine, reaper, the hub's feed), process CPU %.3f cores",
		n, el.Round(time.Millisecond), perSec, cores)
	require.Less(t, perSec, float64(n)/4, "the streams do not each read the store every second")
}

// processCPU is the user and system CPU time this process used so far.
func processCPU(t *testing.T) time.Duration {
	t.Helper()
	var ru syscall.Rusage
	require.NoError(t, syscall.Getrusage(syscall.RUSAGE_SELF, &ru))
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
