package schedule_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/jq-dev/jq/queue"
	"github.com/jq-dev/jq/queue/schedule"
)

func TestPlanFires(t *testing.T) {
	t.Parallel()
	hourly, err := schedule.Parse("0 * * * *", "UTC")
	require.NoError(t, err)
	everySec, err := schedule.Parse("@every 1s", "UTC")
	require.NoError(t, err)
	const grace = time.Minute
	times := func(ss ...string) []time.Time {
		out := []time.Time{}
		for _, s := range ss {
			out = append(out, utc(s))
		}
		return out
	}
	cases := []struct {
		name       string
		spec       *schedule.Spec
		next, now  string
		policy     queue.MissedPolicy
		catchUp    int
		wantFires  []time.Time
		wantMissed int
		wantNext   string
	}{
		{"not due yet: never early", hourly, "2026-01-01T03:00:00Z", "2026-01-01T02:59:59.999Z", queue.MissedSkip, 0,
			times(), 0, "2026-01-01T03:00:00Z"},
		{"due exactly now", hourly, "2026-01-01T03:00:00Z", "2026-01-01T03:00:00Z", queue.MissedSkip, 0,
			times("2026-01-01T03:00:00Z"), 0, "2026-01-01T04:00:00Z"},
		{"late within the grace fires", hourly, "2026-01-01T03:00:00Z", "2026-01-01T03:00:59Z", queue.MissedSkip, 0,
			times("2026-01-01T03:00:00Z"), 0, "2026-01-01T04:00:00Z"},
		{"skip: missed past the grace", hourly, "2026-01-01T03:00:00Z", "2026-01-01T03:01:01Z", queue.MissedSkip, 0,
			times(), 1, "2026-01-01T04:00:00Z"},
		{"skip: a day without servers", hourly, "2026-01-01T03:00:00Z", "2026-01-02T03:00:30Z", queue.MissedSkip, 0,
			times("2026-01-02T03:00:00Z"), 24, "2026-01-02T04:00:00Z"},
		{"catch_up: one missed fire", hourly, "2026-01-01T03:00:00Z", "2026-01-01T03:30:00Z", queue.MissedCatchUp, 5,
			times("2026-01-01T03:00:00Z"), 0, "2026-01-01T04:00:00Z"},
		{"catch_up: the most recent 3 of 24", hourly, "2026-01-01T03:00:00Z", "2026-01-02T02:30:00Z", queue.MissedCatchUp, 3,
			times("2026-01-02T00:00:00Z", "2026-01-02T01:00:00Z", "2026-01-02T02:00:00Z"), 21, "2026-01-02T03:00:00Z"},
		{"catch_up: missed then on time", hourly, "2026-01-01T03:00:00Z", "2026-01-01T05:00:10Z", queue.MissedCatchUp, 10,
			times("2026-01-01T03:00:00Z", "2026-01-01T04:00:00Z", "2026-01-01T05:00:00Z"), 0, "2026-01-01T06:00:00Z"},
		{"every second: one fire a pass, the latest", everySec, "2026-01-01T00:00:00Z", "2026-01-01T00:00:02.5Z", queue.MissedSkip, 0,
			times("2026-01-01T00:00:02Z"), 2, "2026-01-01T00:00:03Z"},
		{"every second: catch_up within the grace", everySec, "2026-01-01T00:00:00Z", "2026-01-01T00:00:02.5Z", queue.MissedCatchUp, 1,
			times("2026-01-01T00:00:01Z", "2026-01-01T00:00:02Z"), 1, "2026-01-01T00:00:03Z"},
		{"every second: a minute behind, one fire", everySec, "2026-01-01T00:00:00Z", "2026-01-01T00:00:59Z", queue.MissedSkip, 0,
			times("2026-01-01T00:00:59Z"), 59, "2026-01-01T00:01:00Z"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			p := schedule.PlanFires(tc.spec, utc(tc.next), mustTime(tc.now), grace, tc.policy, tc.catchUp)
			require.Equal(t, tc.wantFires, nonNil(p.Fires))
			require.Equal(t, tc.wantMissed, p.Missed)
			if tc.policy == queue.MissedSkip {
				require.Zero(t, p.CaughtUp)
			}
			require.Equal(t, utc(tc.wantNext), p.Next)
		})
	}
}

// A per-second schedule after two days without servers: the walk jumps ahead and still fires
// exactly the most recent missed fire times and the on-time one.
func TestPlanFarBehind(t *testing.T) {
	t.Parallel()
	s, err := schedule.Parse("* * * * * *", "UTC")
	require.NoError(t, err)
	next, now := utc("2026-01-01T00:00:00Z"), utc("2026-01-03T00:00:00Z")
	p := schedule.PlanFires(s, next, now, 10*time.Second, queue.MissedCatchUp, 5)
	require.Len(t, p.Fires, 5+1) // 5 missed (23:59:55..59) and the on-time one (00:00:00)
	require.Equal(t, 5, p.CaughtUp)
	require.Equal(t, utc("2026-01-02T23:59:55Z"), p.Fires[0])
	require.Equal(t, now, p.Fires[len(p.Fires)-1])
	require.Equal(t, now.Add(time.Second), p.Next)
	for i := 1; i < len(p.Fires); i++ {
		require.Equal(t, time.Second, p.Fires[i].Sub(p.Fires[i-1]))
	}

	p = schedule.PlanFires(s, next, now, 10*time.Second, queue.MissedSkip, 0)
	require.Equal(t, []time.Time{now}, p.Fires)
	require.Equal(t, now.Add(time.Second), p.Next)
}

func TestPlanNeverAgain(t *testing.T) {
	t.Parallel()
	s, err := schedule.Parse("0 0 29 2 *", "UTC") // leap days only
	require.NoError(t, err)
	p := schedule.PlanFires(s, utc("2028-02-29T00:00:00Z"), utc("2028-02-29T00:00:01Z"), time.Minute, queue.MissedSkip, 0)
	require.Equal(t, []time.Time{utc("2028-02-29T00:00:00Z")}, p.Fires)
	require.Equal(t, utc("2032-02-29T00:00:00Z"), p.Next)
}

func TestValidateMissed(t *testing.T) {
	t.Parallel()
	n, err := queue.ValidateMissed(queue.MissedSkip, 0)
	require.NoError(t, err)
	require.Zero(t, n)
	n, err = queue.ValidateMissed(queue.MissedCatchUp, 0)
	require.NoError(t, err)
	require.Equal(t, queue.DefaultCatchUp, n)
	n, err = queue.ValidateMissed(queue.MissedCatchUp, 7)
	require.NoError(t, err)
	require.Equal(t, 7, n)
	for _, tc := range []struct {
		p queue.MissedPolicy
		n int
	}{{queue.MissedSkip, 3}, {queue.MissedCatchUp, -1}, {queue.MissedCatchUp, queue.MaxCatchUp + 1}, {"later", 0}, {"", 0}} {
		_, err := queue.ValidateMissed(tc.p, tc.n)
		require.ErrorIs(t, err, queue.ErrInvalidArgument)
	}
	require.NoError(t, queue.ValidateScheduleName("nightly-report.v2"))
	require.ErrorIs(t, queue.ValidateScheduleName("Nightly"), queue.ErrInvalidArgument)
}

func mustTime(s string) time.Time {
	t, err := time.Parse(time.RFC3339Nano, s)
	if err != nil {
		panic(err)
	}
	return t.UTC()
}

func nonNil(ts []time.Time) []time.Time {
	if ts == nil {
		return []time.Time{}
	}
	return ts
}
