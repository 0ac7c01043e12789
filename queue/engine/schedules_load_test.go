package engine_test

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/jq-dev/jq/queue"
	"github.com/jq-dev/jq/queue/engine"
	"github.com/jq-dev/jq/store"
)

// allJobsByFire returns the jobs of env's queue by schedule and fire time (from their keys).
func (s *schedEnv) allJobsByFire() map[string]map[time.Time]int {
	s.t.Helper()
	out := map[string]map[time.Time]int{}
	p := store.JobListParams{Queue: s.queue, Limit: store.MaxListLimit}
	for {
		res, err := s.st.JobList(s.ctx, p)
		require.NoError(s.t, err)
		for _, j := range res.Jobs {
			name := j.Labels[engine.ScheduleLabel]
			at, ok := strings.CutPrefix(j.IdempotencyKey, "schedule:"+name+":")
			require.True(s.t, ok, j.IdempotencyKey)
			ft, err := time.Parse(time.RFC3339, at)
			require.NoError(s.t, err)
			if out[name] == nil {
				out[name] = map[time.Time]int{}
			}
			out[name][ft.UTC()]++
		}
		if res.NextCursor == "" {
			return out
		}
		p.Cursor = res.NextCursor
	}
}

func (s *schedEnv) jobCount() int64 {
	s.t.Helper()
	n, err := s.st.JobCountReady(s.ctx, []string{s.queue})
	require.NoError(s.t, err)
	return n[s.queue]
}

// lagObserver records every fire's lag and the missed fire times per schedule.
type lagObserver struct {
	mu     sync.Mutex
	lags   []time.Duration
	missed map[string]int
}

func (o *lagObserver) ScheduleFired(_ string, lag time.Duration) {
	o.mu.Lock()
	o.lags = append(o.lags, lag)
	o.mu.Unlock()
}
func (o *lagObserver) ScheduleFireFailed(string) {}
func (o *lagObserver) ScheduleMissed(name string, n int) {
	o.mu.Lock()
	o.missed[name] += n
	o.mu.Unlock()
}

// createMany creates n schedules named <prefix>-<i> with spec cron through sch, and returns their
// names and first fire times. They submit every fire (allow_all): no worker runs their jobs, and
// the tests count one job per fire time.
func (s *schedEnv) createMany(sch *engine.Schedules, prefix, cron string, n int) ([]string, map[string]time.Time) {
	s.t.Helper()
	names := make([]string, n)
	firsts := make(map[string]time.Time, n)
	for i := range names {
		names[i] = fmt.Sprintf("%s-%04d", prefix, i)
		p := s.params(names[i], cron)
		p.Overlap = queue.OverlapAllowAll
		sc, err := sch.ScheduleCreate(s.ctx, p)
		require.NoError(s.t, err)
		firsts[names[i]] = sc.NextFireAt
	}
	return names, firsts
}

// A pass is bounded per schedule however far behind it is: 200 @every 1s schedules whose last 30
// fire times (all within the misfire grace) passed unhandled get one job each from one pass, and the
// other 29 fire times each are counted as missed (skip). Before, the pass submitted all 30 of each,
// one schedule after the other.
func TestSchedulePassBoundedPerSchedule(t *testing.T) {
	t.Parallel()
	env := newSchedEnv(t)
	const n, behind = 200, 30
	past := env.replica(func() time.Time { return time.Now().Add(-behind * time.Second) }, engine.ScheduleOptions{})
	names, firsts := env.createMany(past, "behind", "@every 1s", n)
	obs := &lagObserver{missed: map[string]int{}}
	sch := env.replica(nil, engine.ScheduleOptions{Observer: obs})
	_, err := sch.Pass(env.ctx)
	require.NoError(t, err)

	byFire := env.allJobsByFire()
	for _, name := range names {
		require.Len(t, byFire[name], 1, "one job per schedule from a pass: %s", name)
		sc, err := env.st.ScheduleGet(env.ctx, name)
		require.NoError(t, err)
		var at time.Time
		for ft := range byFire[name] {
			at = ft
		}
		require.True(t, sc.NextFireAt.After(at))
		// Every fire time from the first up to the next one is a job or counted missed.
		total := int(sc.NextFireAt.Sub(firsts[name]) / time.Second)
		require.Equal(t, total, 1+obs.missed[name], name)
		require.GreaterOrEqual(t, obs.missed[name], behind-2, name)
	}
}

// A deleted schedule creates nothing after DeleteSchedule returns, even while the loop is in the
// middle of a pass over many schedules: 300 @every 1s schedules fire for a while, then all are
// deleted while the loop runs; after the deletes returned and two more passes ran, no job was
// added. (Before, the pass in progress kept submitting the deleted schedules' fires.)
func TestScheduleDeleteStopsFires(t *testing.T) {
	t.Parallel()
	env := newSchedEnv(t)
	const n = 300
	sch := env.replica(nil, engine.ScheduleOptions{})
	names, _ := env.createMany(sch, "del", "@every 1s", n)

	ctx, cancel := context.WithCancel(env.ctx)
	var passes atomic.Int64
	done := make(chan struct{})
	go func() {
		defer close(done)
		for ctx.Err() == nil {
			_, _ = sch.Pass(ctx)
			passes.Add(1)
		}
	}()
	t.Cleanup(func() { cancel(); <-done })
	require.Eventually(t, func() bool { return env.jobCount() >= 2*n }, time.Minute, 20*time.Millisecond, "the schedules fire")

	for _, name := range names {
		require.NoError(t, sch.ScheduleDelete(env.ctx, name))
	}
	after := env.jobCount()
	p := passes.Load()
	require.Eventually(t, func() bool { return passes.Load() >= p+2 }, time.Minute, 5*time.Millisecond)
	cancel()
	<-done
	require.Equal(t, after, env.jobCount(), "jobs created after every DeleteSchedule returned")
	t.Logf("jobs when the deletes returned: %d; after two more passes: %d", after, env.jobCount())
}

// 1,000 @every 1s schedules on one replica for a few seconds: every fire time of every schedule is
// either a job (one) or counted missed by its policy, and the lags are reported (docs/schedules.md,
// Figures). The bound of 2 s is a figure measured here, not asserted: the machine is shared.
func TestScheduleThousandEverySecond(t *testing.T) {
	if testing.Short() {
		t.Skip("runs 1,000 schedules for 8 s")
	}
	t.Parallel()
	env := newSchedEnv(t)
	const n = 1000
	setup := env.replica(nil, engine.ScheduleOptions{})
	names, firsts := env.createMany(setup, "k", "@every 1s", n)
	obs := &lagObserver{missed: map[string]int{}}
	sch := env.replica(nil, engine.ScheduleOptions{Observer: obs})
	stop := runLoop(t, sch)
	time.Sleep(8 * time.Second) // the schedules' own clock is what is measured
	stop()

	byFire := env.allJobsByFire()
	fires, missed := 0, 0
	for _, name := range names {
		sc, err := env.st.ScheduleGet(env.ctx, name)
		require.NoError(t, err)
		total := int(sc.NextFireAt.Sub(firsts[name]) / time.Second)
		for at, c := range byFire[name] {
			require.Equal(t, 1, c, "%s fire time %s", name, at)
		}
		require.Equal(t, total, len(byFire[name])+obs.missed[name], "%s: every fire time is a job or missed", name)
		require.Positive(t, len(byFire[name]), name)
		fires += len(byFire[name])
		missed += obs.missed[name]
	}
	obs.mu.Lock()
	lags := slices.Clone(obs.lags)
	obs.mu.Unlock()
	slices.Sort(lags)
	over := len(lags) - sort2s(lags)
	t.Logf("1000 @every 1s, 8 s: %d fires, %d missed; lag p50 %s, p99 %s, max %s; %d fires later than 2 s",
		fires, missed, lags[len(lags)/2], lags[len(lags)*99/100], lags[len(lags)-1], over)
}

// sort2s returns how many of the sorted lags are at most 2 s.
func sort2s(lags []time.Duration) int {
	i, _ := slices.BinarySearch(lags, 2*time.Second+1)
	return i
}
