package executor_test

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/jq-dev/jq/queue"
	"github.com/jq-dev/jq/queue/executor"
	"github.com/jq-dev/jq/queue/executor/executortest"
)

func TestNewValidates(t *testing.T) {
	t.Parallel()
	_, err := executor.New(executor.Options{Concurrency: 0, Queues: []string{"Bad Name"}})
	require.Error(t, err)
	for _, want := range []string{"Conn is required", "Handler is required", "concurrency must be 1 to 1024", "queue name"} {
		require.Contains(t, err.Error(), want)
	}
	e, err := executor.New(executor.Options{
		Conn: executortest.NewServer(executortest.Options{}), Handler: queue.NewMux(), Concurrency: 1, Queues: []string{"q"},
	})
	require.NoError(t, err)
	require.NotEmpty(t, e.WorkerID(), "default id is <hostname>-<pid>-<random>")
	require.False(t, e.Ready())
}

func TestJobRunsWithJobInfoAndTimeout(t *testing.T) {
	t.Parallel()
	b := setup(t, nil)
	type seen struct {
		info     queue.JobInfo
		ok       bool
		deadline time.Duration
	}
	got := make(chan seen, 1)
	b.mux.RegisterFunc("echo", func(ctx context.Context, job *queue.Job) ([]byte, error) {
		info, ok := queue.JobInfoFromContext(ctx)
		dl, _ := ctx.Deadline()
		got <- seen{info: info, ok: ok, deadline: time.Until(dl)}
		return append([]byte("echo:"), job.Payload...), nil
	})
	b.start(t)
	j := newJob("echo", "hi")
	j.Timeout = 42 * time.Second
	b.srv.Submit(j)

	s := <-got
	require.True(t, s.ok)
	require.Equal(t, queue.JobInfo{ID: j.ID, Attempt: 1, Queue: "default", Type: "echo"}, s.info)
	require.InDelta(t, 42*time.Second, s.deadline, float64(5*time.Second))

	eventually(t, 5*time.Second, func() bool { return len(b.srv.ReportsFor(j.ID)) == 1 })
	r := b.srv.ReportsFor(j.ID)[0]
	require.True(t, r.Success)
	require.Equal(t, "echo:hi", string(r.Result))
	require.Equal(t, 1, r.Attempt)
	require.Positive(t, r.Runtime)
	require.Empty(t, b.srv.Acks(), "a job that ends within AckDelay is acknowledged by its report")
	require.Equal(t, executortest.Done, b.srv.JobState(j.ID))
	eventually(t, 5*time.Second, func() bool { return b.exec.Ready() })
}

// TestConcurrencyNeverExceeded: FR-021 under 500 assignments, measured in
// the handler itself.
func TestConcurrencyNeverExceeded(t *testing.T) {
	t.Parallel()
	const n, conc = 500, 8
	b := setup(t, func(c *config) {
		c.opts.Concurrency = conc
		c.server.Latency = 200 * time.Microsecond
	})
	var cur, peak atomic.Int64
	var runs atomic.Int64
	b.mux.RegisterFunc("work", func(context.Context, *queue.Job) ([]byte, error) {
		c := cur.Add(1)
		defer cur.Add(-1)
		for p := peak.Load(); c > p && !peak.CompareAndSwap(p, c); p = peak.Load() {
		}
		runs.Add(1)
		time.Sleep(time.Duration(rand.IntN(1500)) * time.Microsecond) // simulated work
		return nil, nil
	})
	b.start(t)
	b.srv.Submit(jobs(n, "work")...)
	eventually(t, 30*time.Second, func() bool { return successes(b.srv.Reports()) == n })

	require.LessOrEqual(t, peak.Load(), int64(conc))
	require.Greater(t, peak.Load(), int64(1), "jobs should overlap")
	require.Equal(t, int64(n), runs.Load(), "each job ran exactly once")
	st := b.exec.Stats()
	require.LessOrEqual(t, st.MaxRunning, conc)
	require.Zero(t, st.ProtocolErrors)
	require.Len(t, b.srv.Reports(), n, "one report per job")
}

// TestAcksAndReportsBatched: under load, calls carry many items; the sender
// never waits to fill a batch.
func TestAcksAndReportsBatched(t *testing.T) {
	t.Parallel()
	const n = 1000
	b := setup(t, func(c *config) {
		c.opts.Concurrency = 64
		c.opts.AckDelay = -1 // every start acknowledged at once, to see the acks batched
		c.server.Latency = 2 * time.Millisecond
	})
	acked := func(id string) bool {
		return slices.ContainsFunc(b.srv.Acks(), func(l executor.Lease) bool { return l.JobID == id })
	}
	// Each handler returns once the server has its ack, so every start is acknowledged.
	ackedHandler := func(ctx context.Context, j *queue.Job) ([]byte, error) {
		for !acked(j.ID) {
			select {
			case <-ctx.Done():
				return nil, ctx.Err()
			case <-time.After(time.Millisecond):
			}
		}
		return nil, nil
	}
	b.mux.RegisterFunc("noop", ackedHandler)
	b.start(t)
	b.srv.Submit(jobs(n, "noop")...)
	eventually(t, 30*time.Second, func() bool { return successes(b.srv.Reports()) == n })

	acks, reports := b.srv.Calls(executortest.MethodAck), b.srv.Calls(executortest.MethodReport)
	t.Logf("%d jobs: %d ack calls, %d report calls", n, acks, reports)
	require.Less(t, acks, n/4)
	require.Less(t, reports, n/4)
	st := b.exec.Stats()
	require.Equal(t, int64(acks), st.AckCalls)
	require.Equal(t, int64(reports), st.ReportCalls)
	require.Len(t, b.srv.Acks(), n)
}

func TestPanicBecomesFailure(t *testing.T) {
	t.Parallel()
	b := setup(t, nil)
	b.mux.RegisterFunc("boom", func(context.Context, *queue.Job) ([]byte, error) { panic("kaboom") })
	b.mux.RegisterFunc("ok", func(context.Context, *queue.Job) ([]byte, error) { return []byte("fine"), nil })
	b.start(t)
	bad, good := newJob("boom", ""), newJob("ok", "")
	b.srv.Submit(bad)
	eventually(t, 5*time.Second, func() bool { return len(b.srv.ReportsFor(bad.ID)) == 1 })
	r := b.srv.ReportsFor(bad.ID)[0]
	require.False(t, r.Success)
	require.Equal(t, executor.ReasonError, r.Reason)
	require.Contains(t, r.Error, "kaboom")
	require.False(t, r.Permanent)

	// The worker survived.
	b.srv.Submit(good)
	eventually(t, 5*time.Second, func() bool { return len(b.srv.ReportsFor(good.ID)) == 1 })
	require.True(t, b.srv.ReportsFor(good.ID)[0].Success)
}

func TestTimeoutReason(t *testing.T) {
	t.Parallel()
	b := setup(t, nil)
	b.mux.RegisterFunc("slow", func(ctx context.Context, _ *queue.Job) ([]byte, error) {
		<-ctx.Done()
		return nil, ctx.Err()
	})
	b.start(t)
	j := newJob("slow", "")
	j.Timeout = 50 * time.Millisecond
	b.srv.Submit(j)
	eventually(t, 5*time.Second, func() bool { return len(b.srv.ReportsFor(j.ID)) == 1 })
	r := b.srv.ReportsFor(j.ID)[0]
	require.False(t, r.Success)
	require.Equal(t, executor.ReasonTimeout, r.Reason)
	require.Contains(t, r.Error, "timeout of 50ms")
	require.False(t, r.Permanent)
}

func TestFailureClassification(t *testing.T) {
	t.Parallel()
	b := setup(t, func(c *config) { c.opts.MaxResultBytes = 10 })
	b.mux.RegisterFunc("fail", func(context.Context, *queue.Job) ([]byte, error) { return nil, errors.New("transient") })
	b.mux.RegisterFunc("perm", func(context.Context, *queue.Job) ([]byte, error) {
		return nil, fmt.Errorf("decode: %w", queue.Permanent(errors.New("bad payload")))
	})
	b.mux.RegisterFunc("later", func(context.Context, *queue.Job) ([]byte, error) {
		return nil, fmt.Errorf("http: %w", queue.RetryAfter(errors.New("503"), 90*time.Second))
	})
	b.mux.RegisterFunc("permlater", func(context.Context, *queue.Job) ([]byte, error) {
		return nil, queue.Permanent(queue.RetryAfter(errors.New("gone"), 90*time.Second))
	})
	b.mux.RegisterFunc("big", func(context.Context, *queue.Job) ([]byte, error) { return []byte("01234567890"), nil })
	b.mux.RegisterFunc("toolarge", func(context.Context, *queue.Job) ([]byte, error) {
		return nil, queue.Permanent(fmt.Errorf("%w: stdout", queue.ErrOutputTooLarge))
	})
	b.start(t)
	cases := map[*queue.Job]struct {
		reason     string
		permanent  bool
		msg        string
		retryAfter time.Duration
	}{
		newJob("fail", ""):      {executor.ReasonError, false, "transient", 0},
		newJob("perm", ""):      {executor.ReasonError, true, "decode: bad payload", 0},
		newJob("later", ""):     {executor.ReasonError, false, "http: 503", 90 * time.Second},
		newJob("permlater", ""): {executor.ReasonError, true, "gone", 0},
		newJob("big", ""):       {executor.ReasonOutputTooLarge, true, "11 bytes", 0},
		newJob("toolarge", ""):  {executor.ReasonOutputTooLarge, true, "output too large", 0},
		newJob("nosuch", ""):    {executor.ReasonError, true, `unknown job type "nosuch"`, 0},
	}
	for j := range cases {
		b.srv.Submit(j)
	}
	for j, want := range cases {
		eventually(t, 5*time.Second, func() bool { return len(b.srv.ReportsFor(j.ID)) == 1 }, j.Type)
		r := b.srv.ReportsFor(j.ID)[0]
		require.False(t, r.Success, j.Type)
		require.Equal(t, want.reason, r.Reason, j.Type)
		require.Equal(t, want.permanent, r.Permanent, j.Type)
		require.Contains(t, r.Error, want.msg, j.Type)
		require.Equal(t, want.retryAfter, r.RetryAfter, j.Type)
	}
}

// TestStaleReportDropped: a report the server rejects is final.
func TestStaleReportDropped(t *testing.T) {
	t.Parallel()
	b := setup(t, nil)
	b.mux.RegisterFunc("noop", func(context.Context, *queue.Job) ([]byte, error) { return nil, nil })
	stale := newJob("noop", "")
	b.srv.OnReport(func(r executor.Report) (bool, string) {
		if r.JobID == stale.ID {
			return false, "stale attempt"
		}
		return true, ""
	})
	b.start(t)
	b.srv.Submit(stale)
	eventually(t, 5*time.Second, func() bool {
		st := b.exec.Stats()
		return st.ReportsRejected == 1 && st.Held == 0
	})
	// Nothing of it is left to retry: later traffic carries no second copy.
	next := newJob("noop", "")
	b.srv.Submit(next)
	eventually(t, 5*time.Second, func() bool { return len(b.srv.ReportsFor(next.ID)) == 1 })
	require.Len(t, b.srv.ReportsFor(stale.ID), 1)
	require.Zero(t, b.exec.Stats().ReportsLost)
}

func TestReportRetriedAfterFailure(t *testing.T) {
	t.Parallel()
	b := setup(t, nil)
	b.mux.RegisterFunc("noop", func(context.Context, *queue.Job) ([]byte, error) { return []byte("r"), nil })
	unreachable := fmt.Errorf("%w: connection refused", executor.ErrUnreachable)
	b.srv.Fail(executortest.MethodReport, unreachable, errors.New("internal error"))
	b.start(t)
	j := newJob("noop", "")
	b.srv.Submit(j)
	eventually(t, 5*time.Second, func() bool { return len(b.srv.ReportsFor(j.ID)) == 1 })
	require.Equal(t, 3, b.srv.Calls(executortest.MethodReport))
	require.True(t, b.srv.ReportsFor(j.ID)[0].Success)
	require.Equal(t, executortest.Done, b.srv.JobState(j.ID))
}

func TestReconnectAfterStreamError(t *testing.T) {
	t.Parallel()
	b := setup(t, nil)
	b.mux.RegisterFunc("noop", func(context.Context, *queue.Job) ([]byte, error) { return nil, nil })
	b.start(t)
	first := newJob("noop", "")
	b.srv.Submit(first)
	eventually(t, 5*time.Second, func() bool { return len(b.srv.ReportsFor(first.ID)) == 1 })
	require.Equal(t, 1, b.srv.Calls(executortest.MethodRegister))

	b.srv.BreakStream(fmt.Errorf("%w: connection reset", executor.ErrUnreachable))
	second := newJob("noop", "")
	b.srv.Submit(second)
	eventually(t, 5*time.Second, func() bool { return len(b.srv.ReportsFor(second.ID)) == 1 })
	require.GreaterOrEqual(t, b.srv.Calls(executortest.MethodRegister), 2, "registers again before reconnecting")
	require.GreaterOrEqual(t, b.srv.Calls(executortest.MethodStream), 2)
	eventually(t, 5*time.Second, func() bool { return b.exec.Ready() })
}

// TestJobsSurviveReconnect: a job running while the stream breaks finishes
// and is reported; the new stream asks only for the free slots.
func TestJobsSurviveReconnect(t *testing.T) {
	t.Parallel()
	b := setup(t, func(c *config) { c.opts.Concurrency = 2 })
	g := newGate()
	b.mux.Register("gate", g)
	b.start(t)
	j := newJob("gate", "")
	b.srv.Submit(j)
	g.waitStarted(t, 1)
	b.srv.BreakStream(errors.New("connection reset"))
	eventually(t, 5*time.Second, func() bool { return len(b.srv.StreamCapacities()) >= 2 })
	require.Equal(t, []int{2, 1}, b.srv.StreamCapacities()[:2], "the running job's slot is not offered")
	close(g.release)
	eventually(t, 5*time.Second, func() bool { return len(b.srv.ReportsFor(j.ID)) == 1 })
	require.True(t, b.srv.ReportsFor(j.ID)[0].Success)
}

func TestRegistrationRetriedUntilServerUp(t *testing.T) {
	t.Parallel()
	b := setup(t, nil)
	b.mux.RegisterFunc("noop", func(context.Context, *queue.Job) ([]byte, error) { return nil, nil })
	down := fmt.Errorf("%w: connection refused", executor.ErrUnreachable)
	b.srv.Fail(executortest.MethodRegister, down, down, down, down, down)
	b.start(t)
	j := newJob("noop", "")
	b.srv.Submit(j)
	eventually(t, 10*time.Second, func() bool { return len(b.srv.ReportsFor(j.ID)) == 1 })
	require.Equal(t, 6, b.srv.Calls(executortest.MethodRegister))
}

func TestInvalidRegistrationEndsRun(t *testing.T) {
	t.Parallel()
	b := setup(t, nil)
	b.srv.Fail(executortest.MethodRegister, fmt.Errorf("%w: queue name", executor.ErrInvalid))
	b.start(t)
	select {
	case err := <-b.runErr:
		require.ErrorIs(t, err, executor.ErrInvalid)
		b.runErr <- err
	case <-time.After(10 * time.Second):
		t.Fatal("Run did not return")
	}
	require.Zero(t, b.srv.Calls(executortest.MethodDeregister), "never registered, nothing to deregister")
}

// TestOverCapacityAssignmentReported: a server that ignores capacity gets
// the extra jobs back as failures; they never run.
func TestOverCapacityAssignmentReported(t *testing.T) {
	t.Parallel()
	b := setup(t, func(c *config) {
		c.opts.Concurrency = 1
		c.opts.AckDelay = time.Millisecond
		c.server.IgnoreCapacity = true
	})
	g := newGate()
	b.mux.Register("gate", g)
	b.start(t)
	js := jobs(3, "gate")
	b.srv.Submit(js...)
	first := g.waitStarted(t, 1)[0]
	for _, j := range js {
		if j.ID == first {
			continue
		}
		eventually(t, 5*time.Second, func() bool { return len(b.srv.ReportsFor(j.ID)) == 1 })
		r := b.srv.ReportsFor(j.ID)[0]
		require.False(t, r.Success)
		require.Equal(t, executor.ReasonError, r.Reason)
		require.False(t, r.Permanent)
		require.Contains(t, r.Error, "beyond its concurrency of 1")
	}
	require.Equal(t, int64(2), b.exec.Stats().ProtocolErrors)
	eventually(t, 5*time.Second, func() bool { return len(b.srv.Acks()) == 1 }) // only the job that runs is acked
	close(g.release)
	eventually(t, 5*time.Second, func() bool { return len(b.srv.ReportsFor(first)) == 1 })
	require.Equal(t, 1, b.exec.Stats().MaxRunning)
}

// TestAckRejectedJobStopped: handlers start without waiting for an ack; when the server refuses a
// running job's ack (its attempt is no longer this worker's), the handler is cancelled and its
// outcome is not reported.
func TestAckRejectedJobStopped(t *testing.T) {
	t.Parallel()
	b := setup(t, func(c *config) { c.opts.AckDelay = time.Millisecond })
	g := newGate()
	b.mux.Register("gate", g)
	rejected := newJob("gate", "")
	b.srv.OnAck(func(l executor.Lease) (bool, string) { return l.JobID != rejected.ID, "job cancelled" })
	b.start(t)
	b.srv.Submit(rejected)
	g.waitStarted(t, 1)
	eventually(t, 5*time.Second, func() bool { return b.exec.Stats().AcksRejected == 1 })
	eventually(t, 5*time.Second, func() bool { return g.cause(rejected.ID) != nil })
	require.ErrorContains(t, g.cause(rejected.ID), "lease lost")
	ok := newJob("gate", "")
	b.srv.Submit(ok)
	g.waitStarted(t, 1)
	close(g.release)
	eventually(t, 5*time.Second, func() bool { return len(b.srv.ReportsFor(ok.ID)) == 1 })
	require.Empty(t, b.srv.ReportsFor(rejected.ID))
}

func TestCancelFromHeartbeat(t *testing.T) {
	t.Parallel()
	b := setup(t, func(c *config) { c.server.HeartbeatInterval = 10 * time.Millisecond })
	g := newGate()
	b.mux.Register("gate", g)
	b.start(t)
	j := newJob("gate", "")
	b.srv.Submit(j)
	g.waitStarted(t, 1)
	eventually(t, 5*time.Second, func() bool {
		hbs := b.srv.Heartbeats()
		return len(hbs) > 0 && len(hbs[len(hbs)-1]) == 1
	}, "heartbeats carry the held lease")
	b.srv.CancelJobs(j.ID)
	eventually(t, 5*time.Second, func() bool { return len(b.srv.ReportsFor(j.ID)) == 1 })
	r := b.srv.ReportsFor(j.ID)[0]
	require.Equal(t, executor.ReasonCancelled, r.Reason)
	require.True(t, r.Permanent)
}

func TestShutdownCommand(t *testing.T) {
	t.Parallel()
	b := setup(t, func(c *config) { c.server.HeartbeatInterval = 10 * time.Millisecond })
	g := newGate()
	b.mux.Register("gate", g)
	b.start(t)
	j := newJob("gate", "")
	b.srv.Submit(j)
	g.waitStarted(t, 1)
	b.srv.SetCommand(executor.CommandShutdown)
	eventually(t, 5*time.Second, func() bool { return b.exec.Stopping() })
	require.False(t, b.exec.Ready())
	close(g.release) // the running job finishes within the grace period
	select {
	case err := <-b.runErr:
		require.NoError(t, err)
		b.runErr <- err
	case <-time.After(10 * time.Second):
		t.Fatal("Run did not return after SHUTDOWN")
	}
	require.Len(t, b.srv.ReportsFor(j.ID), 1)
	require.True(t, b.srv.ReportsFor(j.ID)[0].Success)
	require.Equal(t, 1, b.srv.Calls(executortest.MethodDeregister))
}

func TestDrainCommand(t *testing.T) {
	t.Parallel()
	b := setup(t, func(c *config) { c.server.HeartbeatInterval = 10 * time.Millisecond })
	g := newGate()
	b.mux.Register("gate", g)
	b.start(t)
	j := newJob("gate", "")
	b.srv.Submit(j)
	g.waitStarted(t, 1)
	b.srv.SetCommand(executor.CommandDrain)
	eventually(t, 5*time.Second, func() bool { return !b.exec.Ready() })
	streams := b.srv.Calls(executortest.MethodStream)
	later := newJob("gate", "")
	b.srv.Submit(later)
	close(g.release)
	eventually(t, 5*time.Second, func() bool { return len(b.srv.ReportsFor(j.ID)) == 1 })
	require.Equal(t, streams, b.srv.Calls(executortest.MethodStream), "a draining worker opens no stream")
	require.Equal(t, executortest.Pending, b.srv.JobState(later.ID))
	require.False(t, b.exec.Stopping(), "drain keeps the process up")
	require.NoError(t, b.stop(t))
}

// A drained worker goes back to work when the operator resumes it: its heartbeat no longer says
// DRAIN, so it opens its stream again and takes the job that waited meanwhile.
func TestResumeAfterDrain(t *testing.T) {
	t.Parallel()
	b := setup(t, func(c *config) { c.server.HeartbeatInterval = 10 * time.Millisecond })
	g := newGate()
	b.mux.Register("gate", g)
	b.start(t)
	eventually(t, 5*time.Second, b.exec.Ready)
	b.srv.SetCommand(executor.CommandDrain)
	eventually(t, 5*time.Second, func() bool { return !b.exec.Ready() })
	later := newJob("gate", "")
	b.srv.Submit(later)
	require.Equal(t, executortest.Pending, b.srv.JobState(later.ID))

	b.srv.SetCommand(executor.CommandNone)
	eventually(t, 5*time.Second, b.exec.Ready, "the resumed worker streams again")
	g.waitStarted(t, 1)
	close(g.release)
	eventually(t, 5*time.Second, func() bool { return len(b.srv.ReportsFor(later.ID)) == 1 })
	require.False(t, b.exec.Status().Draining)
	require.NoError(t, b.stop(t))
}

func TestOfflineHeartbeatAbandonsJobs(t *testing.T) {
	t.Parallel()
	b := setup(t, func(c *config) { c.server.HeartbeatInterval = 10 * time.Millisecond })
	g := newGate()
	b.mux.Register("gate", g)
	b.start(t)
	j := newJob("gate", "")
	b.srv.Submit(j)
	g.waitStarted(t, 1)
	b.srv.Fail(executortest.MethodHeartbeat, fmt.Errorf("%w: worker is OFFLINE", executor.ErrWorkerInactive))
	eventually(t, 5*time.Second, func() bool { return g.cause(j.ID) != nil })
	require.ErrorContains(t, g.cause(j.ID), "lease lost")
	eventually(t, 5*time.Second, func() bool { return b.srv.Calls(executortest.MethodRegister) >= 2 })
	eventually(t, 5*time.Second, func() bool { return b.exec.Stats().Abandoned == 1 })
	require.Empty(t, b.srv.ReportsFor(j.ID), "its lease is gone: nothing to report")
}

// TestShutdownGrace: short jobs finish and are reported within the grace
// period; the long one is cancelled with queue.ErrShutdown and not reported.
func TestShutdownGrace(t *testing.T) {
	t.Parallel()
	const grace = 300 * time.Millisecond
	b := setup(t, func(c *config) { c.opts.ShutdownGrace, c.opts.AckDelay = grace, time.Millisecond })
	short := newGate()
	long := newGate()
	b.mux.Register("short", short)
	b.mux.Register("long", long)
	b.start(t)
	shorts := jobs(3, "short")
	lj := newJob("long", "")
	b.srv.Submit(append(shorts, lj)...)
	short.waitStarted(t, 3)
	long.waitStarted(t, 1)

	start := time.Now()
	b.cancel()
	eventually(t, 5*time.Second, func() bool { return b.exec.Stopping() })
	require.False(t, b.exec.Ready())
	close(short.release)
	var err error
	select {
	case err = <-b.runErr:
		b.runErr <- err
	case <-time.After(10 * time.Second):
		t.Fatal("Run did not return")
	}
	require.NoError(t, err)
	require.GreaterOrEqual(t, time.Since(start), grace, "the long job had the full grace period")

	for _, j := range shorts {
		rs := b.srv.ReportsFor(j.ID)
		require.Len(t, rs, 1)
		require.True(t, rs[0].Success)
	}
	require.ErrorIs(t, long.cause(lj.ID), queue.ErrShutdown)
	require.Empty(t, b.srv.ReportsFor(lj.ID), "left to the reaper, not reported as failed")
	require.Equal(t, executortest.Running, b.srv.JobState(lj.ID))
	require.Equal(t, 1, b.srv.Calls(executortest.MethodDeregister))
	// Run does not wait for an abandoned handler to return (it is left to the
	// reaper); the count rises when the cancelled handler does return.
	eventually(t, 5*time.Second, func() bool { return b.exec.Stats().Abandoned == 1 })
}

func TestShutdownIdleIsQuick(t *testing.T) {
	t.Parallel()
	b := setup(t, func(c *config) { c.opts.ShutdownGrace = time.Minute })
	b.mux.RegisterFunc("noop", func(context.Context, *queue.Job) ([]byte, error) { return nil, nil })
	b.start(t)
	eventually(t, 5*time.Second, func() bool { return b.exec.Ready() })
	start := time.Now()
	require.NoError(t, b.stop(t))
	require.Less(t, time.Since(start), 10*time.Second, "no running job: no wait for the grace period")
	require.Equal(t, 1, b.srv.Calls(executortest.MethodDeregister))
	require.False(t, b.srv.Registered())
}

// TestShutdownFlushesPendingReports: a report that fails to send at stop is
// retried within the flush timeout.
func TestShutdownFlushesPendingReports(t *testing.T) {
	t.Parallel()
	b := setup(t, nil)
	g := newGate()
	b.mux.Register("gate", g)
	b.start(t)
	j := newJob("gate", "")
	b.srv.Submit(j)
	g.waitStarted(t, 1)
	unreachable := fmt.Errorf("%w: connection refused", executor.ErrUnreachable)
	b.srv.Fail(executortest.MethodReport, unreachable, unreachable, unreachable)
	b.cancel()
	eventually(t, 5*time.Second, func() bool { return b.exec.Stopping() })
	close(g.release)
	select {
	case err := <-b.runErr:
		require.NoError(t, err)
		b.runErr <- err
	case <-time.After(10 * time.Second):
		t.Fatal("Run did not return")
	}
	require.Len(t, b.srv.ReportsFor(j.ID), 1)
	require.Equal(t, 4, b.srv.Calls(executortest.MethodReport))
}

func TestInvalidBatchRetriedItemByItem(t *testing.T) {
	t.Parallel()
	b := setup(t, func(c *config) {
		c.opts.Concurrency = 8
		c.server.Latency = 5 * time.Millisecond
	})
	b.mux.RegisterFunc("noop", func(context.Context, *queue.Job) ([]byte, error) { return nil, nil })
	b.srv.Fail(executortest.MethodReport, fmt.Errorf("%w: a report has no outcome", executor.ErrInvalid))
	b.start(t)
	js := jobs(8, "noop")
	b.srv.Submit(js...)
	eventually(t, 10*time.Second, func() bool {
		st := b.exec.Stats()
		return st.Held == 0 && st.Succeeded == 8
	})
	// With only one injected failure, every report still arrives, unless the
	// rejected batch held exactly one report (then that one is given up).
	got := successes(b.srv.Reports())
	require.GreaterOrEqual(t, got, 7)
	require.Equal(t, int64(8-got), b.exec.Stats().ReportsLost)
}

// TestPrefetch: with Prefetch the server may send concurrency plus prefetch assignments; the
// prefetched ones wait for a slot (never more than Concurrency handlers at once) and start, in
// arrival order, the moment a slot frees. A prefetched job that waits past half of its ack deadline
// is acknowledged while it waits, so the server keeps its lease.
func TestPrefetch(t *testing.T) {
	t.Parallel()
	b := setup(t, func(c *config) {
		c.opts.Concurrency, c.opts.Prefetch = 2, 2
		c.server.AckDeadline = 400 * time.Millisecond
	})
	g := newGate()
	b.mux.Register("gate", g)
	b.start(t)
	js := jobs(4, "gate")
	b.srv.Submit(js...)
	running := g.waitStarted(t, 2)
	eventually(t, 5*time.Second, func() bool { return b.srv.Outstanding() == 4 }, "all four sent: two running, two prefetched")
	// The prefetched pair waits past half its deadline: both are acknowledged while waiting.
	eventually(t, 5*time.Second, func() bool {
		waiting := 0
		for _, l := range b.srv.Acks() {
			if !slices.Contains(running, l.JobID) {
				waiting++
			}
		}
		return waiting == 2
	})
	require.Equal(t, 2, b.exec.Stats().MaxRunning)
	close(g.release)
	g.waitStarted(t, 2)
	eventually(t, 5*time.Second, func() bool { return successes(b.srv.Reports()) == 4 })
	require.Equal(t, 2, b.exec.Stats().MaxRunning, "never more than the concurrency at once")
	require.Zero(t, b.exec.Stats().ProtocolErrors)
}

// TestRedeliveredReportSettled: a report whose first call was applied but answered with a transport
// error goes out again and is refused as stale; that is its own earlier delivery, not a rejection,
// and is counted (and logged) as settled.
func TestRedeliveredReportSettled(t *testing.T) {
	t.Parallel()
	b := setup(t, nil)
	b.mux.RegisterFunc("noop", func(context.Context, *queue.Job) ([]byte, error) { return nil, nil })
	b.srv.LoseReportAnswers(1)
	b.start(t)
	j := newJob("noop", "")
	b.srv.Submit(j)
	eventually(t, 5*time.Second, func() bool { return b.exec.Stats().ReportsSettled == 1 })
	require.Len(t, b.srv.ReportsFor(j.ID), 2, "the report went out twice")
	require.Equal(t, executortest.Done, b.srv.JobState(j.ID))
	require.Zero(t, b.exec.Stats().ReportsRejected)
	require.Zero(t, b.exec.Stats().ReportsLost)
}
