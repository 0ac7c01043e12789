package executor_test

import (
	"context"
	"errors"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/jq-dev/jq/queue"
	"github.com/jq-dev/jq/queue/executor"
	"github.com/jq-dev/jq/queue/executor/executortest"
)

// TestCircuitBreakerTripsAndRecovers: a handler failing 60 % of a queue's jobs opens that
// queue's breaker after min_samples; while it is open the queue's jobs stay PENDING on the
// server and the worker's other queue keeps being served; after the cooldown one probe job is
// taken, and its success closes the breaker. OnChange (the metric's hook) sees each state.
func TestCircuitBreakerTripsAndRecovers(t *testing.T) {
	t.Parallel()
	const cooldown = 3 * time.Second
	var (
		mu      sync.Mutex
		changes []executor.BreakerChange
	)
	changed := make(chan executor.BreakerChange, 10)
	b := setup(t, func(c *config) {
		c.opts.Queues = []string{"flaky", "steady"}
		c.opts.CircuitBreaker = executor.CircuitBreakerOptions{
			Enabled: true, FailureThreshold: 0.5, Window: time.Minute, Cooldown: cooldown, MinSamples: 20,
			OnChange: func(ch executor.BreakerChange) {
				mu.Lock()
				changes = append(changes, ch)
				mu.Unlock()
				changed <- ch
			},
		}
	})
	var healthy atomic.Bool
	var finishedBeforeOpen atomic.Int64
	release := make(chan struct{}) // holds the healthy flaky jobs (the probe) until the test looks
	probeStarted := make(chan string, 100)
	b.mux.RegisterFunc("work", func(_ context.Context, job *queue.Job) ([]byte, error) {
		if job.Queue != "flaky" {
			return nil, nil
		}
		if healthy.Load() {
			probeStarted <- job.ID
			<-release
			return nil, nil
		}
		finishedBeforeOpen.Add(1)
		if i, _ := strconv.Atoi(string(job.Payload)); i%5 < 3 {
			return nil, errors.New("downstream unavailable") // retryable: counts
		}
		return nil, nil
	})
	b.start(t)

	var flaky []*queue.Job
	for i := range 60 {
		j := newJob("work", strconv.Itoa(i))
		j.Queue = "flaky"
		flaky = append(flaky, j)
	}
	b.srv.Submit(flaky...)

	open := waitChange(t, changed)
	require.Equal(t, executor.BreakerChange{Queue: "flaky", From: queue.BreakerClosed, To: queue.BreakerOpen,
		FailureRate: open.FailureRate, Samples: open.Samples}, open)
	require.GreaterOrEqual(t, open.Samples, 20, "not before min_samples")
	require.GreaterOrEqual(t, open.FailureRate, 0.5)
	require.GreaterOrEqual(t, finishedBeforeOpen.Load(), int64(20))

	// The state change reaches the server at once (the heartbeat interval here is an hour).
	eventually(t, 5*time.Second, func() bool {
		bs := b.srv.Breakers()
		return len(bs) == 1 && bs[0].Queue == "flaky" && bs[0].State == queue.BreakerOpen
	})
	// Once the jobs the worker held are settled, no more flaky jobs are taken while it is open.
	eventually(t, 5*time.Second, func() bool { return b.srv.Outstanding() == 0 })
	taken := func() (n int) {
		for _, j := range flaky {
			if b.srv.JobState(j.ID) != executortest.Pending {
				n++
			}
		}
		return n
	}
	before := taken()
	require.Less(t, before, len(flaky), "some flaky jobs wait")

	// The other queue is served meanwhile.
	steady := jobs(10, "work")
	for _, j := range steady {
		j.Queue = "steady"
	}
	b.srv.Submit(steady...)
	eventually(t, 5*time.Second, func() bool {
		for _, j := range steady {
			if b.srv.JobState(j.ID) != executortest.Done {
				return false
			}
		}
		return true
	})
	require.Equal(t, []queue.QueueBreaker{{Queue: "flaky", State: queue.BreakerOpen, FailureRate: open.FailureRate,
		Samples: open.Samples, Since: b.exec.Breakers()[0].Since}}, b.exec.Breakers(), "still inside the cooldown")
	require.Equal(t, before, taken(), "no flaky job taken while open")
	for _, j := range flaky[before:] {
		if st := b.srv.JobState(j.ID); st != executortest.Pending && st != executortest.Done && st != executortest.Failed {
			t.Fatalf("job %s is %s", j.ID, st)
		}
	}
	pending := 0
	for _, j := range flaky {
		if b.srv.JobState(j.ID) == executortest.Pending {
			pending++
		}
	}
	require.Equal(t, len(flaky)-before, pending, "the rest wait PENDING: not failed, not assigned")

	// After the cooldown: half-open, exactly one probe, which succeeds: closed, and the rest flow.
	healthy.Store(true)
	half := waitChange(t, changed)
	require.Equal(t, queue.BreakerHalfOpen, half.To)
	select {
	case <-probeStarted:
	case <-time.After(10 * time.Second):
		t.Fatal("no probe job started")
	}
	require.Equal(t, before+1, taken(), "one probe job while half-open")
	require.Equal(t, 1, b.srv.Outstanding())
	close(release)
	closed := waitChange(t, changed)
	require.Equal(t, queue.BreakerClosed, closed.To)
	eventually(t, 10*time.Second, func() bool {
		for _, j := range flaky {
			if b.srv.JobState(j.ID) == executortest.Pending {
				return false
			}
		}
		return true
	})
	require.Empty(t, b.exec.Breakers())
	eventually(t, 5*time.Second, func() bool { return len(b.srv.Breakers()) == 0 })

	mu.Lock()
	defer mu.Unlock()
	var states []queue.BreakerState
	for _, c := range changes {
		states = append(states, c.To)
	}
	require.Equal(t, []queue.BreakerState{queue.BreakerOpen, queue.BreakerHalfOpen, queue.BreakerClosed}, states)
}

// TestCircuitBreakerIgnoresPermanentFailures: bad payloads (permanent failures) say nothing
// about the queue's health: the breaker stays closed.
func TestCircuitBreakerIgnoresPermanentFailures(t *testing.T) {
	t.Parallel()
	changed := make(chan executor.BreakerChange, 10)
	b := setup(t, func(c *config) {
		c.opts.CircuitBreaker = executor.CircuitBreakerOptions{
			Enabled: true, MinSamples: 5, OnChange: func(ch executor.BreakerChange) { changed <- ch },
		}
	})
	b.mux.RegisterFunc("bad", func(context.Context, *queue.Job) ([]byte, error) {
		return nil, queue.Permanent(errors.New("malformed payload"))
	})
	b.start(t)
	b.srv.Submit(jobs(30, "bad")...)
	for range 30 {
		require.Equal(t, executor.OutcomeFailed, b.waitDone(t).Outcome)
	}
	eventually(t, 5*time.Second, func() bool { return len(b.srv.Reports()) == 30 })
	select {
	case c := <-changed:
		t.Fatalf("breaker changed on permanent failures: %+v", c)
	default:
	}
	require.Empty(t, b.exec.Breakers())
}

func waitChange(t *testing.T, ch <-chan executor.BreakerChange) executor.BreakerChange {
	t.Helper()
	select {
	case c := <-ch:
		return c
	case <-time.After(15 * time.Second):
		t.Fatal("no breaker state change")
		return executor.BreakerChange{}
	}
}
