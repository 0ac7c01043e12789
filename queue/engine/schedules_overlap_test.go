package engine_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/jq-dev/jq/queue"
	"github.com/jq-dev/jq/queue/engine"
	"github.com/jq-dev/jq/store"
)

// A fire whose previous fire's job has not ended follows the schedule's overlap policy: skip drops
// it, buffer_one submits it only while the previous job runs (so at most one fire waits),
// allow_all submits it whatever the previous job does. A job that ended never holds a fire back.
func TestScheduleOverlapPolicies(t *testing.T) {
	t.Parallel()
	cases := []struct {
		policy queue.OverlapPolicy
		prev   queue.State // the first fire's job when the second fire comes
		// jobs after the second fire, and after a third one while the second fire's job (if any)
		// is still PENDING.
		second, third int
		outcome       string // of the second fire
	}{
		{queue.OverlapSkip, queue.StatePending, 1, 1, queue.FireSkipped},
		{queue.OverlapSkip, queue.StateRunning, 1, 1, queue.FireSkipped},
		{queue.OverlapSkip, queue.StateDone, 2, 2, queue.FireSubmitted},
		{queue.OverlapBufferOne, queue.StatePending, 1, 1, queue.FireSkipped},
		{queue.OverlapBufferOne, queue.StateRunning, 2, 2, queue.FireSubmitted},
		{queue.OverlapAllowAll, queue.StatePending, 2, 3, queue.FireSubmitted},
		{queue.OverlapAllowAll, queue.StateRunning, 2, 3, queue.FireSubmitted},
	}
	for _, tc := range cases {
		t.Run(string(tc.policy)+"/"+string(tc.prev), func(t *testing.T) {
			t.Parallel()
			env := newSchedEnv(t)
			ctx := env.ctx
			past := env.replica(func() time.Time { return time.Now().Add(-3 * time.Second) }, engine.ScheduleOptions{})
			p := env.params("tick", "@every 1s")
			p.Overlap, p.Template.TTL, p.Template.KeepResult = tc.policy, time.Hour, true
			_, err := past.ScheduleCreate(ctx, p)
			require.NoError(t, err)
			sch := env.replica(nil, engine.ScheduleOptions{})

			// fire makes the schedule due again at the fire time after its last one, waits for the
			// clock to reach it and runs a pass.
			fire := func() *queue.Schedule {
				t.Helper()
				sc, err := env.st.ScheduleGet(ctx, "tick")
				require.NoError(t, err)
				at := sc.LastFireAt.Add(time.Second)
				if sc.LastFireAt.IsZero() {
					at = sc.NextFireAt
				}
				ok, err := env.st.ScheduleAdvance(ctx, store.ScheduleAdvanceParams{Name: "tick", From: sc.NextFireAt, Next: at})
				require.NoError(t, err)
				require.True(t, ok)
				for time.Now().Before(at.Add(50 * time.Millisecond)) {
					time.Sleep(10 * time.Millisecond) // the fire time is on the wall clock
				}
				_, err = sch.Pass(ctx)
				require.NoError(t, err)
				sc, err = env.st.ScheduleGet(ctx, "tick")
				require.NoError(t, err)
				return sc
			}
			jobs := func() int { return len(env.jobsByFire("tick")) }

			first := fire()
			require.Equal(t, queue.FireSubmitted, first.LastOutcome)
			require.Equal(t, 1, jobs())
			j, err := env.st.JobGet(ctx, first.LastJobID)
			require.NoError(t, err)
			require.Equal(t, time.Hour, j.TTL, "the template's ttl")
			require.True(t, j.KeepResult, "the template's keep_result")
			moveTo(t, env, j, tc.prev)

			second := fire()
			require.Equal(t, tc.second, jobs())
			require.Equal(t, tc.outcome, second.LastOutcome)
			if tc.outcome == queue.FireSkipped {
				require.Equal(t, first.LastJobID, second.LastJobID, "the next fire looks at the same job")
			}
			fire()
			require.Equal(t, tc.third, jobs())
		})
	}
}

// moveTo takes a PENDING job to state s through the store's transitions.
func moveTo(t *testing.T, env *schedEnv, j *queue.Job, s queue.State) {
	t.Helper()
	path := map[queue.State][]queue.State{
		queue.StatePending: nil,
		queue.StateRunning: {queue.StateAssigned, queue.StateRunning},
		queue.StateDone:    {queue.StateAssigned, queue.StateRunning, queue.StateDone},
	}[s]
	for _, to := range path {
		var err error
		j, err = env.st.JobTransition(env.ctx, store.JobTransitionParams{ID: j.ID, From: j.State, To: to, Attempt: j.Attempt,
			Reason: "test", WorkerID: "w"})
		require.NoError(t, err)
	}
}

// An update on one replica holds on another at its next pass, without a restart: the other's fire
// loop reads the schedule from the store.
func TestScheduleUpdateReachesOtherReplicas(t *testing.T) {
	t.Parallel()
	env := newSchedEnv(t)
	ctx := env.ctx
	r1 := env.replica(nil, engine.ScheduleOptions{})
	r2 := env.replica(nil, engine.ScheduleOptions{Interval: 100 * time.Millisecond})
	created, err := r1.ScheduleCreate(ctx, env.params("tick", "0 3 * * *"))
	require.NoError(t, err)
	require.Equal(t, queue.OverlapSkip, created.Overlap, "the default")
	stop := runLoop(t, r2)
	defer stop()

	p := env.params("tick", "@every 1s")
	p.Template.Type, p.Template.TTL, p.Overlap = "digest", time.Minute, queue.OverlapAllowAll
	updated, err := r1.ScheduleUpdate(ctx, p)
	require.NoError(t, err)
	require.Equal(t, "@every 1s", updated.Cron)
	require.True(t, updated.NextFireAt.Before(created.NextFireAt), "a new spec: the next fire time follows it")
	require.True(t, created.CreatedAt.Equal(updated.CreatedAt))

	deadline := time.Now().Add(10 * time.Second)
	for len(env.jobsByFire("tick")) == 0 {
		require.True(t, time.Now().Before(deadline), "the other replica fired nothing")
		time.Sleep(50 * time.Millisecond) // poll
	}
	for _, jobs := range env.jobsByFire("tick") {
		require.Equal(t, "digest", jobs[0].Type)
		require.Equal(t, time.Minute, jobs[0].TTL)
	}
}

// A refused create or update says what is wrong without the schedule's name (the request names it,
// and the CLI says "cannot create schedule <name>"), and what to do.
func TestScheduleRefusalsDoNotRepeatTheName(t *testing.T) {
	t.Parallel()
	env := newSchedEnv(t)
	sch := env.replica(nil, engine.ScheduleOptions{})
	for why, p := range map[string]store.ScheduleParams{
		"cron":        env.params("nightly-x", "bad"),
		"never fires": env.params("nightly-x", "0 0 30 2 *"),
		"label": func() store.ScheduleParams {
			p := env.params("nightly-x", "@hourly")
			p.Template.Labels = map[string]string{engine.ScheduleLabel: "x"}
			return p
		}(),
		"overlap": func() store.ScheduleParams { p := env.params("nightly-x", "@hourly"); p.Overlap = "x"; return p }(),
		"zone": func() store.ScheduleParams {
			p := env.params("nightly-x", "@hourly")
			p.TimeZone = "Nowhere/X"
			return p
		}(),
	} {
		_, err := sch.ScheduleCreate(env.ctx, p)
		require.ErrorIs(t, err, queue.ErrInvalidArgument, why)
		require.NotContains(t, err.Error(), "nightly-x", why)
		_, err = sch.ScheduleUpdate(env.ctx, p)
		require.ErrorIs(t, err, queue.ErrInvalidArgument, why)
		require.NotContains(t, err.Error(), "nightly-x", why)
	}
	_, err := sch.ScheduleCreate(env.ctx, env.params("nightly-x", "0 0 30 2 *"))
	require.Contains(t, err.Error(), "e.g. '0 0 28 2 *'", "what to do")
}
