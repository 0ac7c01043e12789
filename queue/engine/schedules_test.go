package engine_test

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.uber.org/zap/zaptest"

	"github.com/jq-dev/jq/internal/testenv/stores"
	"github.com/jq-dev/jq/queue"
	"github.com/jq-dev/jq/queue/engine"
	"github.com/jq-dev/jq/store"
)

// schedEnv is a private database with a queue, and engines over it with their schedules.
type schedEnv struct {
	t     *testing.T
	ctx   context.Context
	st    *stores.PG
	queue string
}

func newSchedEnv(t *testing.T) *schedEnv {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	t.Cleanup(cancel)
	st := stores.Postgres(ctx, t, 8)
	_, err := st.QueueCreate(ctx, store.QueueCreateParams{Name: "reports"})
	require.NoError(t, err)
	return &schedEnv{t: t, ctx: ctx, st: st, queue: "reports"}
}

// replica starts an engine (running) and its schedules (not running) with clock as the engine's.
func (s *schedEnv) replica(clock func() time.Time, o engine.ScheduleOptions) *engine.Schedules {
	s.t.Helper()
	eng, err := engine.New(engine.Options{Store: s.st, Dispatcher: stores.Dispatcher(s.ctx, s.t), Log: zaptest.NewLogger(s.t), Clock: clock})
	require.NoError(s.t, err)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { _ = eng.Run(ctx); close(done) }()
	s.t.Cleanup(func() { cancel(); <-done })
	o.Store = s.st
	sch, err := engine.NewSchedules(eng, o)
	require.NoError(s.t, err)
	return sch
}

// runLoop runs sch's fire loop until the returned stop is called (or the test ends).
func runLoop(t *testing.T, sch *engine.Schedules) (stop func()) {
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { _ = sch.Run(ctx); close(done) }()
	var once sync.Once
	stop = func() { once.Do(func() { cancel(); <-done }) }
	t.Cleanup(stop)
	return stop
}

func (s *schedEnv) params(name, cron string) store.ScheduleParams {
	return store.ScheduleParams{Name: name, Cron: cron, Template: queue.JobTemplate{Queue: s.queue, Type: "report", Payload: []byte(`{}`)}}
}

// jobsByFire returns the schedule's jobs by fire time (from their idempotency keys).
func (s *schedEnv) jobsByFire(name string) map[time.Time][]*queue.Job {
	s.t.Helper()
	out := map[time.Time][]*queue.Job{}
	p := store.JobListParams{Labels: map[string]string{engine.ScheduleLabel: name}, Limit: store.MaxListLimit}
	for {
		res, err := s.st.JobList(s.ctx, p)
		require.NoError(s.t, err)
		for _, j := range res.Jobs {
			at, ok := strings.CutPrefix(j.IdempotencyKey, "schedule:"+name+":")
			require.True(s.t, ok, j.IdempotencyKey)
			if strings.HasPrefix(at, "trigger:") {
				continue
			}
			ft, err := time.Parse(time.RFC3339, at)
			require.NoError(s.t, err)
			out[ft.UTC()] = append(out[ft.UTC()], j)
		}
		if res.NextCursor == "" {
			return out
		}
		p.Cursor = res.NextCursor
	}
}

func TestScheduleCommands(t *testing.T) {
	t.Parallel()
	env := newSchedEnv(t)
	sch := env.replica(nil, engine.ScheduleOptions{})
	ctx := env.ctx

	for name, p := range map[string]store.ScheduleParams{
		"cron": env.params("a", "61 * * * *"),
		"zone": func() store.ScheduleParams {
			p := env.params("a", "@hourly")
			p.TimeZone = "Nowhere/Atlantis"
			return p
		}(),
		"never fires": env.params("a", "0 0 30 2 *"),
		"label": func() store.ScheduleParams {
			p := env.params("a", "@hourly")
			p.Template.Labels = map[string]string{engine.ScheduleLabel: "x"}
			return p
		}(),
		"policy":  func() store.ScheduleParams { p := env.params("a", "@hourly"); p.Missed = "sometimes"; return p }(),
		"bound":   func() store.ScheduleParams { p := env.params("a", "@hourly"); p.CatchUpMax = 3; return p }(),
		"name":    env.params("A", "@hourly"),
		"overlap": func() store.ScheduleParams { p := env.params("a", "@hourly"); p.Overlap = "sometimes"; return p }(),
	} {
		_, err := sch.ScheduleCreate(ctx, p)
		require.ErrorIs(t, err, queue.ErrInvalidArgument, name)
		_, err = sch.ScheduleUpdate(ctx, p)
		require.ErrorIs(t, err, queue.ErrInvalidArgument, "update refuses what create refuses: %s", name)
	}

	p := env.params("nightly", "0 3 * * *")
	p.TimeZone = "Europe/Berlin"
	before := time.Now()
	sc, err := sch.ScheduleCreate(ctx, p)
	require.NoError(t, err)
	require.Equal(t, queue.OwnerAPI, sc.Owner)
	require.Equal(t, queue.MissedSkip, sc.Missed)
	require.True(t, sc.NextFireAt.After(before))
	berlin, err := time.LoadLocation("Europe/Berlin")
	require.NoError(t, err)
	require.Equal(t, 3, sc.NextFireAt.In(berlin).Hour())
	_, err = sch.ScheduleCreate(ctx, p)
	require.ErrorIs(t, err, queue.ErrScheduleExists)

	paused, err := sch.ScheduleSetPaused(ctx, "nightly", true)
	require.NoError(t, err)
	require.True(t, paused.Paused)
	resumed, err := sch.ScheduleSetPaused(ctx, "nightly", false)
	require.NoError(t, err)
	require.False(t, resumed.Paused)
	require.True(t, resumed.NextFireAt.After(before))

	res, err := sch.ScheduleTrigger(ctx, "nightly")
	require.NoError(t, err)
	require.Equal(t, "nightly", res.Job.Labels[engine.ScheduleLabel])
	require.Equal(t, queue.StatePending, res.Job.State)
	after, err := env.st.ScheduleGet(ctx, "nightly")
	require.NoError(t, err)
	require.True(t, resumed.NextFireAt.Equal(after.NextFireAt), "a trigger does not move the next fire time")
	_, err = sch.ScheduleTrigger(ctx, "none")
	require.ErrorIs(t, err, queue.ErrScheduleNotFound)

	// Config-owned schedules: reconciled, not deleted over the API, but paused and resumed.
	cfg := env.params("hourly-cfg", "@hourly")
	rec, err := sch.ScheduleReconcile(ctx, []store.ScheduleParams{cfg})
	require.NoError(t, err)
	require.Equal(t, []string{"hourly-cfg"}, rec.Created)
	require.ErrorIs(t, sch.ScheduleDelete(ctx, "hourly-cfg"), queue.ErrScheduleOwnedByConfig)
	_, err = sch.ScheduleSetPaused(ctx, "hourly-cfg", true)
	require.NoError(t, err)
	_, err = sch.ScheduleReconcile(ctx, []store.ScheduleParams{env.params("bad", "nope")})
	require.ErrorIs(t, err, queue.ErrInvalidArgument)

	_, err = sch.ScheduleUpdate(ctx, cfg)
	require.ErrorIs(t, err, queue.ErrScheduleOwnedByConfig, "configured schedules are changed in the file")
	_, err = sch.ScheduleUpdate(ctx, env.params("none", "@hourly"))
	require.ErrorIs(t, err, queue.ErrScheduleNotFound)

	require.NoError(t, sch.ScheduleDelete(ctx, "nightly"))
	require.ErrorIs(t, sch.ScheduleDelete(ctx, "nightly"), queue.ErrScheduleNotFound)
}

// Two replicas fire an @every 1s schedule; one stops half-way. Every fire time in the window has
// exactly one job, none created before its fire time, none unaccounted for: a fire time without a
// job was counted missed (a pass that came more than a second late fires only the latest).
func TestScheduleReplicasOneJobPerFireTime(t *testing.T) {
	t.Parallel()
	env := newSchedEnv(t)
	o1, o2 := &countingObserver{}, &countingObserver{}
	r1 := env.replica(nil, engine.ScheduleOptions{Interval: 200 * time.Millisecond, Observer: o1})
	r2 := env.replica(nil, engine.ScheduleOptions{Interval: 200 * time.Millisecond, Observer: o2})
	p := env.params("tick", "@every 1s")
	p.Overlap = queue.OverlapAllowAll // no worker runs the jobs: every fire is counted
	created, err := r1.ScheduleCreate(env.ctx, p)
	require.NoError(t, err)
	stop1 := runLoop(t, r1)
	stop2 := runLoop(t, r2)
	time.Sleep(3 * time.Second) // the schedule's own clock is what is measured
	stop1()
	time.Sleep(3 * time.Second) // as above
	stop2()

	byFire := env.jobsByFire("tick")
	require.GreaterOrEqual(t, len(byFire), 4)
	var first, last time.Time
	for at, jobs := range byFire {
		require.Len(t, jobs, 1, "fire time %s", at)
		require.False(t, jobs[0].CreatedAt.Before(at), "fire time %s: created %s, early", at, jobs[0].CreatedAt)
		if first.IsZero() || at.Before(first) {
			first = at
		}
		if at.After(last) {
			last = at
		}
	}
	sc, err := env.st.ScheduleGet(env.ctx, "tick")
	require.NoError(t, err)
	total := int(sc.NextFireAt.Sub(created.NextFireAt) / time.Second)
	require.Equal(t, total, len(byFire)+o1.missed()+o2.missed(), "every fire time is a job or counted missed")
	require.True(t, last.Equal(sc.LastFireAt))
	require.Equal(t, byFire[last][0].ID, sc.LastJobID)
	require.Contains(t, []string{queue.FireSubmitted, queue.FireExisting}, sc.LastOutcome)
}

// Every server was down across fire times: skip fires none of them, catch_up the most recent ones
// up to its bound; either way the schedule continues at its next time, and nothing doubles when
// the pass runs again.
func TestScheduleMissedFires(t *testing.T) {
	t.Parallel()
	// A spec firing hourly at the minute half an hour away from now: the 3 hours of "downtime"
	// hold exactly 3 fire times, none near either end.
	now := time.Now().UTC()
	minute := (now.Minute() + 30) % 60
	cron := fmt.Sprintf("%d * * * *", minute)
	cases := []struct {
		name    string
		missed  queue.MissedPolicy
		bound   int
		wantJob int
	}{
		{"skip", queue.MissedSkip, 0, 0},
		{"catch_up 2", queue.MissedCatchUp, 2, 2},
		{"catch_up 10", queue.MissedCatchUp, 10, 3},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			env := newSchedEnv(t)
			// Created by a server 3 hours ago, which then stopped.
			past := env.replica(func() time.Time { return time.Now().Add(-3 * time.Hour) }, engine.ScheduleOptions{})
			p := env.params("hourly", cron)
			p.Missed, p.CatchUpMax = tc.missed, tc.bound
			created, err := past.ScheduleCreate(env.ctx, p)
			require.NoError(t, err)
			require.True(t, created.NextFireAt.Before(now))

			var missed int
			obs := &countingObserver{}
			sch := env.replica(nil, engine.ScheduleOptions{Observer: obs})
			_, err = sch.Pass(env.ctx)
			require.NoError(t, err)
			_, err = sch.Pass(env.ctx)
			require.NoError(t, err)
			missed = obs.missed()

			byFire := env.jobsByFire("hourly")
			require.Len(t, byFire, tc.wantJob)
			require.Equal(t, 3-tc.wantJob, missed)
			for at, jobs := range byFire {
				require.Len(t, jobs, 1)
				require.True(t, jobs[0].NotBefore.Equal(at), "due at its fire time")
				require.True(t, at.After(now.Add(-time.Duration(tc.wantJob)*time.Hour)), "the most recent are caught up")
			}
			sc, err := env.st.ScheduleGet(env.ctx, "hourly")
			require.NoError(t, err)
			require.True(t, sc.NextFireAt.After(now))
			require.Less(t, sc.NextFireAt.Sub(now), time.Hour)
			require.Equal(t, tc.wantJob, obs.fired())
		})
	}
}

// A fire whose job is refused (its queue is gone) is recorded and the schedule moves on.
func TestScheduleFireRefused(t *testing.T) {
	t.Parallel()
	env := newSchedEnv(t)
	past := env.replica(func() time.Time { return time.Now().Add(-2 * time.Second) }, engine.ScheduleOptions{})
	p := env.params("orphan", "@every 1s")
	p.Template.Queue = "gone"
	created, err := past.ScheduleCreate(env.ctx, p)
	require.NoError(t, err)
	obs := &countingObserver{}
	sch := env.replica(nil, engine.ScheduleOptions{Observer: obs})
	_, err = sch.Pass(env.ctx)
	require.NoError(t, err)
	sc, err := env.st.ScheduleGet(env.ctx, "orphan")
	require.NoError(t, err)
	require.Equal(t, queue.FireFailed, sc.LastOutcome)
	require.Contains(t, sc.LastError, "queue not found")
	require.True(t, sc.NextFireAt.After(created.NextFireAt))
	require.Positive(t, obs.failed())
}

type countingObserver struct {
	mu                 sync.Mutex
	nFired, nFail, nMs int
}

func (o *countingObserver) ScheduleFired(string, time.Duration) {
	o.mu.Lock()
	o.nFired++
	o.mu.Unlock()
}
func (o *countingObserver) ScheduleFireFailed(string)      { o.mu.Lock(); o.nFail++; o.mu.Unlock() }
func (o *countingObserver) ScheduleMissed(_ string, n int) { o.mu.Lock(); o.nMs += n; o.mu.Unlock() }
func (o *countingObserver) fired() int                     { o.mu.Lock(); defer o.mu.Unlock(); return o.nFired }
func (o *countingObserver) failed() int                    { o.mu.Lock(); defer o.mu.Unlock(); return o.nFail }
func (o *countingObserver) missed() int                    { o.mu.Lock(); defer o.mu.Unlock(); return o.nMs }
