package queue

import (
	"reflect"
	"testing"
)

// picks serves n jobs one claim at a time, every level always due, and returns the levels served.
func picks(s *LevelScheduler, n int) []int {
	var out []int
	for range n {
		plan := s.Plan(1)
		p := plan[0].Priority
		s.Served(p)
		out = append(out, p)
	}
	return out
}

func TestLevelSchedulerSequence(t *testing.T) {
	got := picks(NewLevelScheduler(map[int]int{9: 3, 0: 1}), 400)
	want := []int{9, 9, 0, 9}
	for i := range got {
		if got[i] != want[i%4] {
			t.Fatalf("pick %d: got %d, want %d (sequence %v…)", i, got[i], want[i%4], got[:8])
		}
	}
	// 3:1 in every window of 4 consecutive picks, not only the aligned ones.
	for i := 0; i+4 <= len(got); i++ {
		n9 := 0
		for _, p := range got[i : i+4] {
			if p == 9 {
				n9++
			}
		}
		if n9 != 3 {
			t.Fatalf("window %d: %v has %d of 9, want 3", i, got[i:i+4], n9)
		}
	}
}

func TestLevelSchedulerPlan(t *testing.T) {
	s := NewLevelScheduler(map[int]int{9: 3, 0: 1})
	// A batch of 8: the quotas are the next 8 picks, in the order of their first pick.
	if got, want := s.Plan(8), []LevelQuota{{9, 6}, {0, 2}}; !reflect.DeepEqual(got, want) {
		t.Fatalf("Plan(8) = %v, want %v", got, want)
	}
	// Plan changes nothing: the same again.
	if got, want := s.Plan(1), []LevelQuota{{9, 1}, {0, 0}}; !reflect.DeepEqual(got, want) {
		t.Fatalf("Plan(1) = %v, want %v", got, want)
	}
	// Served charges what was taken: two of 9, then 0 is next.
	s.Served(9, 9)
	if got, want := s.Plan(1), []LevelQuota{{0, 1}, {9, 0}}; !reflect.DeepEqual(got, want) {
		t.Fatalf("after 9,9: Plan(1) = %v, want %v", got, want)
	}
	// A level without a weight is never planned and serving it changes nothing.
	s.Served(5, 5, 5)
	if got, want := s.Plan(1), []LevelQuota{{0, 1}, {9, 0}}; !reflect.DeepEqual(got, want) {
		t.Fatalf("after unweighted: Plan(1) = %v, want %v", got, want)
	}
}

func TestLevelSchedulerTiesAndZeroWeights(t *testing.T) {
	if s := NewLevelScheduler(nil); s != nil {
		t.Fatal("no weights: want nil (strict priority)")
	}
	if s := NewLevelScheduler(map[int]int{3: 0}); s != nil {
		t.Fatal("only zero weights: want nil (strict priority)")
	}
	// Equal weights alternate, the higher priority first; a zero weight is no level.
	s := NewLevelScheduler(map[int]int{2: 1, 7: 1, 4: 0})
	if got, want := picks(s, 6), []int{7, 2, 7, 2, 7, 2}; !reflect.DeepEqual(got, want) {
		t.Fatalf("equal weights: %v, want %v", got, want)
	}
	if got := s.Plan(4); len(got) != 2 {
		t.Fatalf("Plan over a zero weight: %v, want levels 7 and 2 only", got)
	}
	if !s.Same(map[int]int{2: 1, 7: 1, 4: 0}) || s.Same(map[int]int{2: 1, 7: 2}) {
		t.Fatal("Same: wrong")
	}
}

// TestLevelSchedulerIdleLevel: a level that was not due for a long time earns bounded credit, so it
// comes back with at most a short head start, not a burst of everything it missed.
func TestLevelSchedulerIdleLevel(t *testing.T) {
	s := NewLevelScheduler(map[int]int{9: 3, 0: 1})
	for range 1000 {
		s.Served(9) // only 9 was due
	}
	got := picks(s, 12)
	n0 := 0
	for _, p := range got {
		if p == 0 {
			n0++
		}
	}
	if n0 > 5 {
		t.Fatalf("after an idle spell level 0 got %d of 12 (%v): a burst", n0, got)
	}
	// And it settles back to 3:1.
	got = picks(s, 400)
	n0 = 0
	for _, p := range got {
		if p == 0 {
			n0++
		}
	}
	if n0 < 95 || n0 > 105 {
		t.Fatalf("after recovery: %d of 400 at level 0, want ~100", n0)
	}
}

// TestLevelSchedulerEmptyLevel: a weighted level with no due jobs is marked idle by the engine and
// left out; the levels that are due share in proportion to their own weights.
func TestLevelSchedulerEmptyLevel(t *testing.T) {
	s := NewLevelScheduler(map[int]int{9: 3, 5: 2, 0: 1})
	due := map[int]bool{9: true, 0: true}
	count := map[int]int{}
	for range 400 {
		plan := s.Plan(1)
		// The store: the first level of the plan with due jobs takes the slot; a short level is idle.
		for _, q := range plan {
			if due[q.Priority] {
				s.Served(q.Priority)
				count[q.Priority]++
				break
			}
			if q.Max > 0 {
				s.Idle(q.Priority)
			}
		}
	}
	if count[9] != 300 || count[0] != 100 {
		t.Fatalf("9=3,5=2,0=1 with 5 empty: %v, want 300 and 100", count)
	}
	// Woken, 5 is planned again; still empty, it is idle again after one claim.
	s.Wake()
	if plan := s.Plan(6); len(plan) != 3 {
		t.Fatalf("after Wake: %v, want the three levels", plan)
	}
	// Every level idle: all take part again rather than none.
	s.Idle(9)
	s.Idle(5)
	s.Idle(0)
	if plan := s.Plan(6); len(plan) != 3 {
		t.Fatalf("all idle: %v, want the three levels", plan)
	}
}
