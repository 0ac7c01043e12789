package faults

// Schedules with the real binary: server replicas sharing one database fire an
// `@every 1s` schedule while one of them is killed with SIGKILL, and a lone server is killed and
// restarted across fire times under both missed-fire policies. The jobs table is the judge: one
// job per fire time (counted by the fire time in its idempotency key), none created before its
// fire time, and the documented number of jobs for the missed fire times.

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"connectrpc.com/connect"
	"github.com/stretchr/testify/require"

	jqv1 "github.com/jq-dev/jq/api/gen/jq/v1"
	"github.com/jq-dev/jq/internal/testenv"
)

// fireJob is one job of a schedule: its fire time and when it was created.
type fireJob struct {
	at, created time.Time
}

// scheduleJobs returns the jobs of schedule name by fire time, failing on a fire time with two.
func (r *rig) scheduleJobs(ctx context.Context, name string) (map[time.Time]fireJob, []time.Time) {
	r.t.Helper()
	rows, err := r.db.QueryContext(ctx, `SELECT idempotency_key, created_at FROM jobs
		WHERE labels->>'jq.schedule' = $1 AND idempotency_key NOT LIKE $2 ORDER BY idempotency_key`,
		name, "schedule:"+name+":trigger:%")
	require.NoError(r.t, err)
	defer func() { _ = rows.Close() }()
	out := map[time.Time]fireJob{}
	var times []time.Time
	for rows.Next() {
		var key string
		var created time.Time
		require.NoError(r.t, rows.Scan(&key, &created))
		at, err := time.Parse(time.RFC3339, strings.TrimPrefix(key, "schedule:"+name+":"))
		require.NoError(r.t, err, key)
		_, dup := out[at]
		require.False(r.t, dup, "fire time %s of %s has two jobs", at, name)
		out[at] = fireJob{at: at, created: created}
		times = append(times, at)
	}
	require.NoError(r.t, rows.Err())
	slices.SortFunc(times, func(a, b time.Time) int { return a.Compare(b) })
	return out, times
}

func (r *rig) createSchedule(ctx context.Context, req *jqv1.CreateScheduleRequest) {
	r.t.Helper()
	_, err := r.client().Schedules.CreateSchedule(ctx, connect.NewRequest(req))
	require.NoError(r.t, err)
}

// Two replicas, `@every 1s` for 30 s, kill -9 of one replica half-way: exactly one job per second
// of the window, none created before its fire time.
func TestFaultScheduleReplicaKill(t *testing.T) {
	t.Parallel()
	r := newRig(t)
	r.startServer()
	r.startServer()
	ctx := r.ctx()
	// allow_all: no worker runs the jobs, and every fire time is to have its job.
	r.createSchedule(ctx, &jqv1.CreateScheduleRequest{Name: "tick", Cron: "@every 1s",
		Overlap: jqv1.OverlapPolicy_OVERLAP_POLICY_ALLOW_ALL, Template: &jqv1.JobTemplate{Queue: "default", Type: "noop"}})
	start := time.Now()
	time.Sleep(15 * time.Second) // the window is wall-clock time: the schedule's own
	r.servers[0].proc.Signal(t, syscall.SIGKILL)
	r.servers[0].proc.WaitExit(t, 10*time.Second)
	killed := time.Now()
	time.Sleep(time.Until(start.Add(30 * time.Second))) // as above
	_, err := r.servers[1].client.Schedules.PauseSchedule(ctx, connect.NewRequest(&jqv1.PauseScheduleRequest{Name: "tick"}))
	require.NoError(t, err)
	end := time.Now()

	jobs, times := r.scheduleJobs(ctx, "tick")
	require.NotEmpty(t, times)
	first, last := times[0], times[len(times)-1]
	require.WithinDuration(t, start, first, 2*time.Second, "the first fire is the first second after the create")
	require.WithinDuration(t, end, last, 2*time.Second, "fires went on until the pause")
	var lost []time.Time
	var maxLag time.Duration
	for at := first; !at.After(last); at = at.Add(time.Second) {
		j, ok := jobs[at]
		if !ok {
			lost = append(lost, at)
			continue
		}
		require.False(t, j.created.Before(at), "fire time %s: job created %s, early", at, j.created)
		maxLag = max(maxLag, j.created.Sub(at))
	}
	require.Empty(t, lost, "fire times without a job")
	require.Len(t, jobs, int(last.Sub(first)/time.Second)+1)
	t.Logf("schedule replicas: @every 1s for %v, server 0 killed at +%v: %d fire times, %d jobs, lost 0, doubled 0, max lag %v",
		end.Sub(start).Round(time.Second), killed.Sub(start).Round(time.Second), len(times), len(jobs), maxLag.Round(time.Millisecond))
}

// A lone server killed and restarted across fire times (down for longer than the misfire grace):
// with skip the missed fire times have no job; with catch_up 2 exactly the 2 most recent of them
// have one. The number missed is the server's own log line after the restart.
func TestFaultScheduleRestartMissedFires(t *testing.T) {
	t.Parallel()
	const grace = 2 * time.Second
	r := newRig(t, "JQ_SERVER_SCHEDULE_MISFIRE_GRACE_S="+secs(grace),
		`JQ_SCHEDULES=[{"name":"skipper","cron":"@every 2s","queue":"default","type":"noop","overlap":"allow_all"},`+
			`{"name":"catcher","cron":"@every 2s","missed":"catch_up","catch_up_max":2,"queue":"default","type":"noop","overlap":"allow_all"}]`)
	r.startServer()
	ctx := r.ctx()
	testenv.Eventually(t, 20*time.Second, func() error {
		for _, name := range []string{"skipper", "catcher"} {
			if _, times := r.scheduleJobs(ctx, name); len(times) < 2 {
				return fmt.Errorf("%s fired %d times", name, len(times))
			}
		}
		return nil
	})
	r.servers[0].proc.Signal(t, syscall.SIGKILL)
	r.servers[0].proc.WaitExit(t, 10*time.Second)
	time.Sleep(12 * time.Second) // the downtime, in the schedules' own clock
	r.restartServer(0)
	missedLog := map[string]map[string]any{}
	testenv.Eventually(t, 20*time.Second, func() error {
		for _, l := range r.servers[0].proc.Output() {
			if m := logLine(l, "schedule fire times missed"); m != nil {
				missedLog[m["schedule"].(string)] = m
			}
		}
		if len(missedLog) < 2 {
			return fmt.Errorf("missed-fire lines for %d schedules", len(missedLog))
		}
		return nil
	})
	// Two more fires after the restart, then stop the schedules where they are.
	time.Sleep(4 * time.Second) // as above
	for _, name := range []string{"skipper", "catcher"} {
		_, err := r.client().Schedules.PauseSchedule(ctx, connect.NewRequest(&jqv1.PauseScheduleRequest{Name: name}))
		require.NoError(t, err)
	}

	for _, tc := range []struct {
		name     string
		caughtUp int
	}{{"skipper", 0}, {"catcher", 2}} {
		m := missedLog[tc.name]
		missed, dropped, caught := int(m["missed"].(float64)), int(m["dropped"].(float64)), int(m["caught_up"].(float64))
		require.GreaterOrEqual(t, missed, 3, "%s: the downtime spans several fire times", tc.name)
		require.Equal(t, tc.caughtUp, caught, tc.name)
		require.Equal(t, missed-tc.caughtUp, dropped, tc.name)

		jobs, times := r.scheduleJobs(ctx, tc.name)
		var absent []time.Time
		for at := times[0]; !at.After(times[len(times)-1]); at = at.Add(2 * time.Second) {
			if j, ok := jobs[at]; !ok {
				absent = append(absent, at)
			} else {
				require.False(t, j.created.Before(at), "%s: fire time %s created early", tc.name, at)
			}
		}
		require.Len(t, absent, dropped, "%s: fire times without a job are the dropped ones", tc.name)
		for i := 1; i < len(absent); i++ {
			require.Equal(t, 2*time.Second, absent[i].Sub(absent[i-1]), "%s: one gap, oldest first", tc.name)
		}
		// The caught-up fires are the ones right after the gap, each late by more than the grace.
		after := absent[len(absent)-1]
		for i := 1; i <= tc.caughtUp; i++ {
			j := jobs[after.Add(time.Duration(i)*2*time.Second)]
			require.Greater(t, j.created.Sub(j.at), grace, "%s: caught-up fire %d", tc.name, i)
		}
		t.Logf("schedule restart (%s): missed=%d dropped=%d caught_up=%d; jobs=%d over %d fire times, none doubled",
			tc.name, missed, dropped, caught, len(jobs), len(times)+len(absent))
	}
}
