package queue

import (
	"fmt"
	"testing"
	"time"
)

func levelJobs(prio, n int, created time.Time) []*Job {
	out := make([]*Job, n)
	for i := range out {
		out[i] = &Job{ID: fmt.Sprintf("p%d-%02d", prio, i), Priority: prio, CreatedAt: created.Add(time.Duration(i) * time.Second)}
	}
	return out
}

func prios(js []*Job) string {
	s := ""
	for _, j := range js {
		s += fmt.Sprint(j.Priority)
	}
	return s
}

func TestDispatchOrder(t *testing.T) {
	now := time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)
	byLevel := map[int][]*Job{9: levelJobs(9, 6, now.Add(-time.Minute)), 0: levelJobs(0, 6, now.Add(-time.Hour)), 4: levelJobs(4, 2, now)}
	for _, tc := range []struct {
		name    string
		sched   *LevelScheduler
		maxWait time.Duration
		want    string
	}{
		{"strict priority", nil, 0, "99999944000000"},
		{"9=3,0=1: the claims' round-robin, unweighted levels last", NewLevelScheduler(map[int]int{9: 3, 0: 1}), 0, "99099909000044"},
		{"aging first, oldest first", nil, 30 * time.Minute, "00000099999944"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := prios(DispatchOrder(byLevel, tc.sched, tc.maxWait, now, 14))
			if got != tc.want {
				t.Fatalf("order %s, want %s", got, tc.want)
			}
		})
	}
	if got := prios(DispatchOrder(byLevel, NewLevelScheduler(map[int]int{9: 3, 0: 1}), 0, now, 4)); got != "9909" {
		t.Fatalf("first 4: %s, want 9909", got)
	}
}
