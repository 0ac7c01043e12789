package engine

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/jq-dev/jq/queue"
)

func TestBatcherGroupsConcurrentRequests(t *testing.T) {
	t.Parallel()
	var calls, maxBatch, firstLen atomic.Int64
	release := make(chan struct{})
	b := newBatcher(50, func(int) int { return 1 }, func(_ context.Context, vs []int) ([]int, error) {
		if calls.Add(1) == 1 {
			firstLen.Store(int64(len(vs)))
			<-release // hold the first flush so the others pile up
		}
		for {
			m := maxBatch.Load()
			if int64(len(vs)) <= m || maxBatch.CompareAndSwap(m, int64(len(vs))) {
				break
			}
		}
		out := make([]int, len(vs))
		for i, v := range vs {
			out[i] = v * 2
		}
		return out, nil
	})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { b.run(ctx, 1); close(done) }()

	const n = 200
	results := make([]int, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			r, err := b.do(context.Background(), i)
			require.NoError(t, err)
			results[i] = r
		})
	}
	// Wait until the first flush is blocked and the rest are queued.
	require.Eventually(t, func() bool { return calls.Load() == 1 && int64(len(b.in))+firstLen.Load() == n }, 5*time.Second, time.Millisecond)
	close(release)
	wg.Wait()
	for i, r := range results {
		require.Equal(t, 2*i, r)
	}
	require.LessOrEqual(t, calls.Load(), int64(1+(n+49)/50), "queued requests must be written in batches of up to 50")
	require.Equal(t, int64(50), maxBatch.Load())
	cancel()
	<-done
}

func TestBatcherErrorReachesEveryCallerOfTheBatch(t *testing.T) {
	t.Parallel()
	boom := errors.New("boom")
	b := newBatcher(10, func(int) int { return 1 }, func(context.Context, []int) ([]int, error) { return nil, boom })
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go b.run(ctx, 2)
	_, err := b.do(context.Background(), 1)
	require.ErrorIs(t, err, boom)
}

func TestBatcherCallerContext(t *testing.T) {
	t.Parallel()
	b := newBatcher(10, func(int) int { return 1 }, func(_ context.Context, vs []int) ([]int, error) { return vs, nil })
	// Not running: a caller with a deadline gets its context error.
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
	defer cancel()
	_, err := b.do(ctx, 1)
	require.ErrorIs(t, err, context.DeadlineExceeded)

	// Stopped with requests queued: they fail instead of hanging.
	runCtx, stop := context.WithCancel(context.Background())
	stop()
	errc := make(chan error, 1)
	go func() { _, err := b.do(context.Background(), 2); errc <- err }()
	require.Eventually(t, func() bool { return len(b.in) == 2 }, 5*time.Second, time.Millisecond) // 1 (abandoned) and 2
	b.run(runCtx, 1)
	require.ErrorIs(t, <-errc, queue.ErrShutdown)

	// After run has returned, a request fails at once.
	_, err = b.do(context.Background(), 3)
	require.ErrorIs(t, err, queue.ErrShutdown)
}
