package engine_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.uber.org/zap/zaptest"

	"github.com/jq-dev/jq/internal/testenv/stores"
	"github.com/jq-dev/jq/queue"
	"github.com/jq-dev/jq/queue/engine"
	"github.com/jq-dev/jq/store"
)

// cmdEnv is an engine whose commands are called directly; it is not run (nothing is dispatched),
// so jobs are brought into each state with the store's primitives.
type cmdEnv struct {
	t     *testing.T
	ctx   context.Context
	st    *stores.PG
	eng   *engine.Engine
	queue string
}

func newCmdEnv(t *testing.T, opts engine.Options) *cmdEnv {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	t.Cleanup(cancel)
	st := stores.Postgres(ctx, t, 4)
	opts.Store, opts.Dispatcher, opts.Log = st, stores.Dispatcher(ctx, t), zaptest.NewLogger(t)
	eng, err := engine.New(opts)
	require.NoError(t, err)
	q, err := st.QueueCreate(ctx, store.QueueCreateParams{Name: "cmd", BackoffBase: 2 * time.Second, BackoffMax: time.Minute})
	require.NoError(t, err)
	return &cmdEnv{t: t, ctx: ctx, st: st, eng: eng, queue: q.Name}
}

// inState returns a new job in state s, reached through the store's primitives.
func (c *cmdEnv) inState(s queue.State) *queue.Job {
	c.t.Helper()
	three := 3
	res, err := c.st.JobInsertMany(c.ctx, []store.JobInsertParams{{Queue: c.queue, Type: "t", MaxRetries: &three, TTL: time.Hour}})
	require.NoError(c.t, err)
	j := res[0].Job
	step := func(to queue.State, p store.JobTransitionParams) {
		c.t.Helper()
		p.ID, p.From, p.To, p.Attempt = j.ID, j.State, to, j.Attempt
		if p.Reason == "" {
			p.Reason = "test"
		}
		j, err = c.st.JobTransition(c.ctx, p)
		require.NoError(c.t, err)
	}
	path := map[queue.State][]queue.State{
		queue.StatePending:      nil,
		queue.StateAssigned:     {queue.StateAssigned},
		queue.StateRunning:      {queue.StateAssigned, queue.StateRunning},
		queue.StateDone:         {queue.StateAssigned, queue.StateRunning, queue.StateDone},
		queue.StateFailed:       {queue.StateAssigned, queue.StateRunning, queue.StateFailed},
		queue.StateDeadLettered: {queue.StateDeadLettered},
	}[s]
	for _, to := range path {
		step(to, store.JobTransitionParams{WorkerID: "w"})
	}
	return j
}

func (c *cmdEnv) events(id string) []queue.Event {
	c.t.Helper()
	evs, err := c.st.JobEvents(c.ctx, id)
	require.NoError(c.t, err)
	return evs
}

// TestCommandsCheckEveryEdge: for every state, cancel and retry either take an edge of the
// transition table (with its event) or are refused with ErrIllegalTransition and change nothing.
func TestCommandsCheckEveryEdge(t *testing.T) {
	t.Parallel()
	c := newCmdEnv(t, engine.Options{})
	commands := map[string]struct {
		run   func(ctx context.Context, id string) (*queue.Job, error)
		legal map[queue.State]queue.State // from → the state the command leaves the job in
	}{
		"cancel": {c.eng.JobCancel, map[queue.State]queue.State{
			queue.StatePending: queue.StateDeadLettered, queue.StateAssigned: queue.StateDeadLettered,
			queue.StateFailed: queue.StateDeadLettered, queue.StateRunning: queue.StateRunning,
		}},
		"retry": {c.eng.JobRetry, map[queue.State]queue.State{
			queue.StateFailed: queue.StatePending, queue.StateDeadLettered: queue.StatePending,
		}},
	}
	for name, cmd := range commands {
		for _, from := range queue.States() {
			t.Run(name+"/"+string(from), func(t *testing.T) {
				j := c.inState(from)
				before := c.events(j.ID)
				got, err := cmd.run(c.ctx, j.ID)
				want, legal := cmd.legal[from]
				if !legal {
					require.ErrorIs(t, err, queue.ErrIllegalTransition)
					now, err := c.st.JobGet(c.ctx, j.ID)
					require.NoError(t, err)
					require.Equal(t, from, now.State, "a refused command changes nothing")
					require.Equal(t, before, c.events(j.ID), "and writes no event")
					return
				}
				require.NoError(t, err)
				require.Equal(t, want, got.State)
				evs := c.events(j.ID)
				if want == from { // a cancel request: no event
					require.Equal(t, before, evs)
					require.True(t, got.CancelRequested)
					return
				}
				last := evs[len(evs)-1]
				require.Equal(t, from, last.From)
				require.Equal(t, want, last.To)
				require.NoError(t, queue.CheckTransition(last.From, last.To))
			})
		}
	}
	_, err := c.eng.JobCancel(c.ctx, "not-a-uuid")
	require.ErrorIs(t, err, queue.ErrInvalidArgument)
	_, err = c.eng.JobRetry(c.ctx, "3c9d0c0e-7b4a-4c8e-9a55-0a3f1f6f6b11")
	require.ErrorIs(t, err, queue.ErrJobNotFound)
}

// TestJobDelete: only a DONE or DEAD_LETTERED job is deleted, with its history; every other state
// is refused with ErrIllegalTransition (cancel first) and changes nothing.
func TestJobDelete(t *testing.T) {
	t.Parallel()
	c := newCmdEnv(t, engine.Options{})
	for _, from := range queue.States() {
		t.Run(string(from), func(t *testing.T) {
			j := c.inState(from)
			before := c.events(j.ID)
			got, err := c.eng.JobDelete(c.ctx, j.ID)
			if !from.Terminal() {
				require.ErrorIs(t, err, queue.ErrIllegalTransition)
				require.ErrorContains(t, err, "cancel it first")
				now, err := c.st.JobGet(c.ctx, j.ID)
				require.NoError(t, err)
				require.Equal(t, from, now.State, "a refused delete changes nothing")
				require.Equal(t, before, c.events(j.ID))
				return
			}
			require.NoError(t, err)
			require.Equal(t, j.ID, got.ID)
			require.Equal(t, from, got.State, "the job as it was")
			_, err = c.st.JobGet(c.ctx, j.ID)
			require.ErrorIs(t, err, queue.ErrJobNotFound)
			_, err = c.eng.JobDelete(c.ctx, j.ID)
			require.ErrorIs(t, err, queue.ErrJobNotFound, "deleted once")
		})
	}
	_, err := c.eng.JobDelete(c.ctx, "not-a-uuid")
	require.ErrorIs(t, err, queue.ErrInvalidArgument)
}

// TestRetryUsesTheEnginesClock: a manual retry is due at the engine's now, with the TTL restarted
// from it (queue.ManualRetry), not at the database's.
func TestRetryUsesTheEnginesClock(t *testing.T) {
	t.Parallel()
	at := time.Date(2031, 1, 2, 3, 4, 5, 678000, time.UTC)
	c := newCmdEnv(t, engine.Options{Clock: func() time.Time { return at }})
	j, err := c.eng.JobRetry(c.ctx, c.inState(queue.StateDeadLettered).ID)
	require.NoError(t, err)
	require.True(t, at.Equal(j.NotBefore), "not_before %v", j.NotBefore)
	require.True(t, at.Add(time.Hour).Equal(j.ExpiresAt), "expires_at %v", j.ExpiresAt)
	require.Equal(t, 0, j.RetryCount)
}

// TestReaperSettlesWithTheRetryPolicy: the reaper's retry sweep writes queue.RetryPolicy.Backoff of
// the engine's clock and jitter source, exactly.
func TestReaperSettlesWithTheRetryPolicy(t *testing.T) {
	t.Parallel()
	at := time.Now().Add(time.Hour).Truncate(time.Microsecond)
	c := newCmdEnv(t, engine.Options{Clock: func() time.Time { return at }, Rand: func() float64 { return 0.25 },
		ReaperInterval: 20 * time.Millisecond})
	j := c.inState(queue.StateFailed)
	ctx, stop := context.WithCancel(c.ctx)
	done := make(chan struct{})
	go func() { _ = c.eng.Run(ctx); close(done) }()
	t.Cleanup(func() { stop(); <-done })
	require.Eventually(t, func() bool {
		got, err := c.st.JobGet(c.ctx, j.ID)
		require.NoError(t, err)
		return got.State == queue.StatePending
	}, 20*time.Second, 20*time.Millisecond)
	got, err := c.st.JobGet(c.ctx, j.ID)
	require.NoError(t, err)
	want := at.Add(queue.RetryPolicy{Base: 2 * time.Second, Max: time.Minute}.Backoff(0, func() float64 { return 0.25 }))
	require.True(t, want.Equal(got.NotBefore), "not_before %v, want %v", got.NotBefore, want)
	require.True(t, want.Add(time.Hour).Equal(got.ExpiresAt))
	require.Equal(t, 1, got.RetryCount)
}

// TestWorkerCommands: drain and shutdown check the worker's status first.
func TestWorkerCommands(t *testing.T) {
	t.Parallel()
	c := newCmdEnv(t, engine.Options{})
	w, err := c.eng.WorkerRegister(c.ctx, store.WorkerRegisterParams{ID: "cmd-w", Concurrency: 1, Queues: []string{c.queue}})
	require.NoError(t, err)
	w, err = c.eng.WorkerDrain(c.ctx, w.ID)
	require.NoError(t, err)
	require.Equal(t, queue.WorkerDraining, w.Status)
	w, err = c.eng.WorkerDrain(c.ctx, w.ID)
	require.NoError(t, err, "drain is idempotent")
	require.Equal(t, queue.WorkerDraining, w.Status)
	a, err := c.eng.WorkerHeartbeat(c.ctx, store.WorkerHeartbeatParams{ID: w.ID}, nil)
	require.NoError(t, err)
	require.True(t, a.Drain)
	require.False(t, a.Shutdown)
	require.NoError(t, c.eng.WorkerDeregister(c.ctx, w.ID))
	_, err = c.eng.WorkerDrain(c.ctx, w.ID)
	require.ErrorIs(t, err, queue.ErrIllegalTransition, "an OFFLINE worker cannot be drained")
	_, err = c.eng.WorkerShutdown(c.ctx, w.ID)
	require.ErrorIs(t, err, queue.ErrIllegalTransition)
	_, err = c.eng.WorkerHeartbeat(c.ctx, store.WorkerHeartbeatParams{ID: w.ID}, nil)
	require.ErrorIs(t, err, queue.ErrWorkerLost, "an OFFLINE worker must register again")
}
