package schedule_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/jq-dev/jq/queue"
	"github.com/jq-dev/jq/queue/schedule"
)

func utc(s string) time.Time {
	t, err := time.Parse(time.RFC3339, s)
	if err != nil {
		panic(err)
	}
	return t.UTC()
}

// Cron parsing and next-fire computation over the DST changes of 2026 in two zones: Europe/Berlin
// (forward 29 Mar 02:00 CET→03:00 CEST, back 25 Oct 03:00 CEST→02:00 CET) and America/New_York
// (forward 8 Mar 02:00 EST→03:00 EDT, back 1 Nov 02:00 EDT→01:00 EST). The expectations are the
// parser's rules, as docs/schedules.md states them: a wall-clock time that does not exist is not
// fired that day; one that occurs twice is fired at both instants.
func TestNextAcrossDST(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name, cron, tz, from string
		want                 []string // the next fire times, UTC
	}{
		{"berlin nightly 03:00 over spring forward", "0 3 * * *", "Europe/Berlin", "2026-03-27T12:00:00Z",
			[]string{"2026-03-28T02:00:00Z", "2026-03-29T01:00:00Z", "2026-03-30T01:00:00Z"}},
		{"berlin 02:30 does not exist on 29 Mar", "30 2 * * *", "Europe/Berlin", "2026-03-27T12:00:00Z",
			[]string{"2026-03-28T01:30:00Z", "2026-03-30T00:30:00Z", "2026-03-31T00:30:00Z"}},
		{"berlin 02:30 occurs twice on 25 Oct", "30 2 * * *", "Europe/Berlin", "2026-10-24T12:00:00Z",
			[]string{"2026-10-25T00:30:00Z", "2026-10-25T01:30:00Z", "2026-10-26T01:30:00Z"}},
		{"berlin nightly 03:00 over fall back", "0 3 * * *", "Europe/Berlin", "2026-10-24T12:00:00Z",
			[]string{"2026-10-25T02:00:00Z", "2026-10-26T02:00:00Z"}},
		{"berlin six fields with seconds", "15 0 3 * * *", "Europe/Berlin", "2026-03-28T12:00:00Z",
			[]string{"2026-03-29T01:00:15Z", "2026-03-30T01:00:15Z"}},
		{"new york 02:30 does not exist on 8 Mar", "30 2 * * *", "America/New_York", "2026-03-07T12:00:00Z",
			[]string{"2026-03-09T06:30:00Z", "2026-03-10T06:30:00Z"}},
		{"new york 01:30 occurs twice on 1 Nov", "30 1 * * *", "America/New_York", "2026-10-31T12:00:00Z",
			[]string{"2026-11-01T05:30:00Z", "2026-11-01T06:30:00Z", "2026-11-02T06:30:00Z"}},
		{"new york weekdays 09:00 over spring forward", "0 9 * * MON-FRI", "America/New_York", "2026-03-06T15:00:00Z",
			[]string{"2026-03-09T13:00:00Z", "2026-03-10T13:00:00Z"}},
		{"utc by default", "0 3 * * *", "", "2026-03-28T12:00:00Z",
			[]string{"2026-03-29T03:00:00Z", "2026-03-30T03:00:00Z"}},
		{"@daily in berlin is local midnight", "@daily", "Europe/Berlin", "2026-03-28T12:00:00Z",
			[]string{"2026-03-28T23:00:00Z", "2026-03-29T22:00:00Z"}},
		{"@every ignores the zone and counts from the epoch", "@every 30s", "Europe/Berlin", "2026-03-29T00:59:50Z",
			[]string{"2026-03-29T01:00:00Z", "2026-03-29T01:00:30Z", "2026-03-29T01:01:00Z"}},
		{"@every 1h from the epoch", "@every 1h", "America/New_York", "2026-11-01T05:10:00Z",
			[]string{"2026-11-01T06:00:00Z", "2026-11-01T07:00:00Z"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			s, err := schedule.Parse(tc.cron, tc.tz)
			require.NoError(t, err)
			got := s.Upcoming(utc(tc.from), len(tc.want))
			want := make([]time.Time, len(tc.want))
			for i, w := range tc.want {
				want[i] = utc(w)
			}
			require.Equal(t, want, got)
		})
	}
}

// Hourly specs fire on real hours: 23 on the day clocks go forward, 25 on the day they go back.
func TestHourlyOnDSTDays(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		tz, day string
		want    int
	}{
		{"Europe/Berlin", "2026-03-29", 23}, {"Europe/Berlin", "2026-10-25", 25}, {"Europe/Berlin", "2026-06-01", 24},
		{"America/New_York", "2026-03-08", 23}, {"America/New_York", "2026-11-01", 25},
	} {
		s, err := schedule.Parse("@hourly", tc.tz)
		require.NoError(t, err)
		day, err := time.ParseInLocation("2006-01-02", tc.day, s.Location())
		require.NoError(t, err)
		end := day.AddDate(0, 0, 1)
		n := 0
		for at := s.Next(day.Add(-time.Nanosecond)); at.Before(end); at = s.Next(at) {
			n++
		}
		require.Equal(t, tc.want, n, "%s %s", tc.tz, tc.day)
	}
}

func TestParseRefuses(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct{ cron, tz string }{
		{"", ""}, {"* * * *", ""}, {"61 * * * *", ""}, {"0 3 * * *", "Mars/Olympus"}, {"0 3 * * *", "Local"},
		{"CRON_TZ=Europe/Berlin 0 3 * * *", ""}, {"TZ=UTC 0 3 * * *", ""}, {"@every 0s", ""}, {"@every 1500ms", ""},
		{"@every -5s", ""}, {"@every", ""}, {"@sometimes", ""}, {"0 0 0 0 0 0 0", ""},
	} {
		_, err := schedule.Parse(tc.cron, tc.tz)
		require.ErrorIs(t, err, queue.ErrInvalidArgument, "%q in %q", tc.cron, tc.tz)
	}
}

func TestNeverFires(t *testing.T) {
	t.Parallel()
	s, err := schedule.Parse("0 0 30 2 *", "UTC") // 30 February
	require.NoError(t, err)
	require.True(t, s.Next(utc("2026-01-01T00:00:00Z")).IsZero())
	require.Empty(t, s.Upcoming(utc("2026-01-01T00:00:00Z"), 5))
}

func TestIdempotencyKey(t *testing.T) {
	t.Parallel()
	at := time.Date(2026, 3, 29, 3, 0, 0, 0, time.FixedZone("CEST", 2*3600))
	require.Equal(t, "schedule:nightly:2026-03-29T01:00:00Z", schedule.IdempotencyKey("nightly", at))
}

func FuzzParse(f *testing.F) {
	for _, s := range []string{"0 3 * * *", "*/5 * * * * *", "@every 30s", "@hourly", "0 0 30 2 *", "1-5/2 * ? JAN-MAR SUN"} {
		f.Add(s, "Europe/Berlin")
	}
	f.Fuzz(func(t *testing.T, expr, tz string) {
		s, err := schedule.Parse(expr, tz)
		if err != nil {
			require.ErrorIs(t, err, queue.ErrInvalidArgument)
			return
		}
		from := utc("2026-03-29T00:00:00Z")
		if n := s.Next(from); !n.IsZero() {
			require.True(t, n.After(from))
			require.Zero(t, n.Nanosecond())
		}
	})
}
