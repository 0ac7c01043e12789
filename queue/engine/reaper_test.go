package engine_test

import (
	"context"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"
	"go.uber.org/zap/zaptest"

	"github.com/jq-dev/jq/internal/testenv"
	"github.com/jq-dev/jq/internal/testenv/stores"
	"github.com/jq-dev/jq/queue"
	"github.com/jq-dev/jq/queue/engine"
	"github.com/jq-dev/jq/store"
)

// reaperEnv is one engine with a running reaper over a private database (the reaper acts on every
// job and worker of its database) and either the shared Redis or a private redis-server.
type reaperEnv struct {
	t     *testing.T
	ctx   context.Context
	store *stores.PG
	eng   *engine.Engine
	queue string
	start time.Time // the database's clock when the engine started
}

func newReaperEnv(t *testing.T, opts engine.Options, rdb *redis.Client, prefix string) *reaperEnv {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	t.Cleanup(cancel)
	st := stores.Postgres(ctx, t, 8)
	if rdb == nil {
		rdb, prefix = testenv.NewRedis(t)
	}
	disp := stores.DispatcherOn(ctx, t, rdb, prefix)
	q, err := st.QueueCreate(ctx, store.QueueCreateParams{Name: "reaped", BackoffBase: 100 * time.Millisecond, BackoffMax: time.Second})
	require.NoError(t, err)

	opts.Store, opts.Dispatcher, opts.Notifier, opts.Log = st, disp, st, zaptest.NewLogger(t)
	opts.SchedulerInterval = 50 * time.Millisecond
	opts.ReaperInterval = 50 * time.Millisecond
	eng, err := engine.New(opts)
	require.NoError(t, err)
	env := &reaperEnv{t: t, ctx: ctx, store: st, eng: eng, queue: q.Name}
	require.NoError(t, st.Pool().QueryRow(ctx, `SELECT now()`).Scan(&env.start))
	runCtx, stop := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { _ = eng.Run(runCtx); close(done) }()
	t.Cleanup(func() { stop(); <-done })
	return env
}

func (r *reaperEnv) worker(id string) *queue.Worker {
	r.t.Helper()
	w, err := r.store.WorkerRegister(r.ctx, store.WorkerRegisterParams{ID: id, Hostname: "h", Concurrency: 4, Queues: []string{r.queue}})
	require.NoError(r.t, err)
	return w
}

func (r *reaperEnv) submit(p store.JobInsertParams) *queue.Job {
	r.t.Helper()
	p.Queue, p.Type = r.queue, "t"
	res, err := r.eng.Submit(r.ctx, p)
	require.NoError(r.t, err)
	return res.Job
}

// assign opens a session for w, waits for its first assignment and closes the session (the job
// stays ASSIGNED to w; nothing else is sent to w).
func (r *reaperEnv) assign(w *queue.Worker) *queue.Job {
	r.t.Helper()
	s := r.eng.OpenSession(w, 1)
	defer s.Close()
	ctx, cancel := context.WithTimeout(r.ctx, 10*time.Second)
	defer cancel()
	jobs, err := s.Next(ctx)
	require.NoError(r.t, err)
	require.Len(r.t, jobs, 1)
	return jobs[0]
}

// waitState waits until the job is in state with that many retries and returns it.
func (r *reaperEnv) waitState(id string, state queue.State, retries int) *queue.Job {
	r.t.Helper()
	var j *queue.Job
	require.Eventually(r.t, func() bool {
		var err error
		j, err = r.store.JobGet(r.ctx, id)
		require.NoError(r.t, err)
		return j.State == state && j.RetryCount == retries
	}, 20*time.Second, 20*time.Millisecond, "job %s never reached %s with %d retries", id, state, retries)
	return j
}

type step struct {
	from, to queue.State
	reason   string
}

func (r *reaperEnv) requirePath(id string, want ...step) {
	r.t.Helper()
	evs, err := r.store.JobEvents(r.ctx, id)
	require.NoError(r.t, err)
	got := make([]step, len(evs))
	for i, e := range evs {
		got[i] = step{e.From, e.To, e.Reason}
	}
	require.Equal(r.t, want, got)
}

// A worker that stops heartbeating is declared OFFLINE after the heartbeat timeout; its job fails
// with worker_lost and is retried after the queue's backoff — and the stale report it may still
// send is refused.
func TestReaperWorkerLost(t *testing.T) {
	t.Parallel()
	r := newReaperEnv(t, engine.Options{HeartbeatTimeout: time.Second, AssignmentTimeout: time.Hour}, nil, "")
	w := r.worker("lost-worker")
	j := r.submit(store.JobInsertParams{})
	a := r.assign(w)
	require.Equal(t, j.ID, a.ID)

	retried := r.waitState(j.ID, queue.StatePending, 1)
	require.Equal(t, queue.ReasonWorkerLost, retried.FailureReason)
	got, err := r.store.WorkerGet(r.ctx, w.ID)
	require.NoError(t, err)
	require.Equal(t, queue.WorkerOffline, got.Status)
	r.requirePath(j.ID,
		step{"", queue.StatePending, "submitted"},
		step{queue.StatePending, queue.StateAssigned, queue.ReasonAssigned},
		step{queue.StateAssigned, queue.StateFailed, queue.ReasonWorkerLost},
		step{queue.StateFailed, queue.StatePending, queue.ReasonRetry},
	)

	outs, err := r.eng.Report(r.ctx, w.ID, []store.JobReportParams{{JobLease: store.JobLease{ID: a.ID, Attempt: a.Attempt}, Success: true}})
	require.NoError(t, err)
	require.ErrorIs(t, outs[0].Err, queue.ErrStaleAttempt, "the lost worker's late report is refused")
}

// After a start (or an outage) the reaper trusts silent workers for one heartbeat timeout: a
// worker whose heartbeat was already old when the server started is declared lost no earlier than
// a heartbeat timeout after the start.
func TestReaperWaitsAfterStart(t *testing.T) {
	t.Parallel()
	const timeout = 2 * time.Second
	r := newReaperEnv(t, engine.Options{HeartbeatTimeout: timeout, AssignmentTimeout: time.Hour}, nil, "")
	// A worker registered before the start, silent since: backdate its heartbeat.
	w := r.worker("silent-before-start")
	_, err := r.store.Pool().Exec(r.ctx, `UPDATE workers SET last_heartbeat_at = now() - interval '1 hour' WHERE id = $1`, w.ID)
	require.NoError(t, err)
	var lostAt time.Time
	require.Eventually(t, func() bool {
		var status string
		require.NoError(t, r.store.Pool().QueryRow(r.ctx, `SELECT status, updated_at FROM workers WHERE id = $1`, w.ID).Scan(&status, &lostAt))
		return status == string(queue.WorkerOffline)
	}, 20*time.Second, 20*time.Millisecond)
	require.GreaterOrEqual(t, lostAt.Sub(r.start), timeout, "declared lost %v after the start", lostAt.Sub(r.start))
}

// An assignment not acked within the assignment timeout fails (assignment_timeout) and is retried;
// a RUNNING job past its timeout plus the grace fails with timeout. The worker keeps heartbeating.
func TestReaperTimeouts(t *testing.T) {
	t.Parallel()
	r := newReaperEnv(t, engine.Options{HeartbeatTimeout: time.Hour, AssignmentTimeout: time.Second, TimeoutGrace: 0}, nil, "")
	w := r.worker("slow-worker")
	unacked := r.submit(store.JobInsertParams{Priority: 9})
	a := r.assign(w)
	require.Equal(t, unacked.ID, a.ID)
	r.waitState(unacked.ID, queue.StatePending, 1)
	r.requirePath(unacked.ID,
		step{"", queue.StatePending, "submitted"},
		step{queue.StatePending, queue.StateAssigned, queue.ReasonAssigned},
		step{queue.StateAssigned, queue.StateFailed, queue.ReasonAssignmentTimeout},
		step{queue.StateFailed, queue.StatePending, queue.ReasonRetry},
	)

	w2 := r.worker("hanging-worker")
	maxRetries := 0
	hanging := r.submit(store.JobInsertParams{Timeout: time.Second, MaxRetries: &maxRetries})
	var a2 *queue.Job
	for a2 == nil || a2.ID != hanging.ID { // the first job may come back to this worker first
		a2 = r.assign(w2)
	}
	outs, err := r.eng.Ack(r.ctx, w2.ID, []store.JobLease{{ID: a2.ID, Attempt: a2.Attempt}})
	require.NoError(t, err)
	require.NoError(t, outs[0].Err)
	j := r.waitState(hanging.ID, queue.StateDeadLettered, 0)
	require.Equal(t, queue.ReasonTimeout, j.FailureReason)
	r.requirePath(hanging.ID,
		step{"", queue.StatePending, "submitted"},
		step{queue.StatePending, queue.StateAssigned, queue.ReasonAssigned},
		step{queue.StateAssigned, queue.StateRunning, queue.ReasonAcked},
		step{queue.StateRunning, queue.StateFailed, queue.ReasonTimeout},
		step{queue.StateFailed, queue.StateDeadLettered, queue.ReasonMaxRetries},
	)
}

// A failure report goes through the retry sweep at once: PENDING after the backoff while retries
// remain, then dead-lettered with its last error; a permanent failure is dead-lettered at once.
func TestReaperRetriesReportedFailures(t *testing.T) {
	t.Parallel()
	r := newReaperEnv(t, engine.Options{HeartbeatTimeout: time.Hour, AssignmentTimeout: time.Hour}, nil, "")
	w := r.worker("failing-worker")
	one := 1
	j := r.submit(store.JobInsertParams{MaxRetries: &one})
	for attempt := 1; attempt <= 2; attempt++ {
		a := r.assign(w)
		require.Equal(t, attempt, a.Attempt)
		outs, err := r.eng.Report(r.ctx, w.ID, []store.JobReportParams{{JobLease: store.JobLease{ID: a.ID, Attempt: a.Attempt}, Error: "boom"}})
		require.NoError(t, err)
		require.NoError(t, outs[0].Err)
		if attempt == 1 {
			r.waitState(j.ID, queue.StatePending, 1)
		}
	}
	dead := r.waitState(j.ID, queue.StateDeadLettered, 1)
	require.Equal(t, "boom", dead.LastError)

	p := r.submit(store.JobInsertParams{})
	a := r.assign(w)
	require.Equal(t, p.ID, a.ID)
	outs, err := r.eng.Report(r.ctx, w.ID, []store.JobReportParams{{JobLease: store.JobLease{ID: a.ID, Attempt: a.Attempt}, Error: "bad input", Permanent: true}})
	require.NoError(t, err)
	require.NoError(t, outs[0].Err)
	r.waitState(p.ID, queue.StateDeadLettered, 0)
	evs, err := r.store.JobEvents(r.ctx, p.ID)
	require.NoError(t, err)
	require.Equal(t, queue.ReasonPermanent, evs[len(evs)-1].Reason)
}

// With Redis down the workers are served straight from Postgres; with Redis back, through Redis.
func TestDispatchWithoutRedis(t *testing.T) {
	t.Parallel()
	rp := testenv.StartRedis(t)
	rdb := redis.NewClient(&redis.Options{Addr: rp.Addr(), MaxRetries: -1, DialTimeout: time.Second, ReadTimeout: time.Second})
	t.Cleanup(func() { _ = rdb.Close() })
	r := newReaperEnv(t, engine.Options{HeartbeatTimeout: time.Hour, AssignmentTimeout: time.Hour}, rdb, "down:")
	w := r.worker("redisless-worker")

	rp.Kill()
	j := r.submit(store.JobInsertParams{})
	a := r.assign(w)
	require.Equal(t, j.ID, a.ID)
	require.EqualValues(t, 1, r.eng.DirectClaims())

	rp.Start()
	j2 := r.submit(store.JobInsertParams{})
	a2 := r.assign(w)
	require.Equal(t, j2.ID, a2.ID)
	require.EqualValues(t, 1, r.eng.DirectClaims(), "dispatched through Redis again")
}
