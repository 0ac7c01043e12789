package queue

import (
	"maps"
	"slices"
)

// LevelQuota is how many due jobs of one priority level a claim may take.
type LevelQuota struct {
	Priority int
	Max      int
}

// LevelScheduler shares dispatch among a queue's priority levels in proportion to their weights
// (Queue.PriorityWeights): a smooth weighted round-robin (nginx's), deterministic. Each pick adds
// every active level's weight to its credit and takes the level with the most credit (ties: the
// higher priority), which then pays the active levels' total weight. With weights 9=3,0=1 the picks
// run 9,9,0,9 and repeat: 3:1 in every 4 consecutive picks.
//
// A claim takes a batch, so the scheduler works in steps: Plan turns the next n picks into a quota
// per level without changing anything; Served charges what the claim actually took; Idle tells it a
// planned level had fewer due jobs than its quota. The store is work-conserving (a level short of
// its quota leaves the rest to the others), and an idle level is left out of the picks until it is
// served again or Wake, so the levels that are due share in proportion to their own weights (9=3,
// 5=2, 0=1 with 5 empty: 9 and 0 at 3:1). Credit is bounded by the total weight: after an idle spell
// a level gets at most a short head start, never a burst.
//
// Priorities without a weight are not planned: the store serves them only with what the weighted
// levels leave (strict priority). A LevelScheduler is not safe for concurrent use.
type LevelScheduler struct {
	levels  []int // priorities with a weight > 0, highest first
	weight  map[int]int
	credit  map[int]int
	idle    map[int]bool
	weights map[int]int // as given, to tell a change (Same)
}

// NewLevelScheduler returns a scheduler over the levels with a positive weight; nil when there are
// none (strict priority).
func NewLevelScheduler(weights map[int]int) *LevelScheduler {
	s := &LevelScheduler{weight: map[int]int{}, credit: map[int]int{}, idle: map[int]bool{}, weights: maps.Clone(weights)}
	for p, w := range weights {
		if w > 0 {
			s.levels = append(s.levels, p)
			s.weight[p] = w
		}
	}
	if len(s.levels) == 0 {
		return nil
	}
	slices.SortFunc(s.levels, func(a, b int) int { return b - a })
	return s
}

// Same reports whether the scheduler was made from these weights.
func (s *LevelScheduler) Same(weights map[int]int) bool {
	return s != nil && maps.Equal(s.weights, weights)
}

// active returns the levels taking part in the picks and their total weight. When every level is
// idle they all take part again (the only change Plan makes): a claim must plan something, and the
// store's rest step serves whatever is due anyway.
func (s *LevelScheduler) active() ([]int, int) {
	var act []int
	total := 0
	for _, p := range s.levels {
		if !s.idle[p] {
			act = append(act, p)
			total += s.weight[p]
		}
	}
	if len(act) == 0 {
		clear(s.idle)
		return s.active()
	}
	return act, total
}

// next returns the level the next job should come from under credit c.
func (s *LevelScheduler) next(c map[int]int, act []int, total int) int {
	best, most := act[0], 0
	for i, p := range act {
		if v := min(c[p]+s.weight[p], total); i == 0 || v > most {
			best, most = p, v
		}
	}
	return best
}

// charge records in c that a job of level p was served.
func (s *LevelScheduler) charge(c map[int]int, p int, act []int, total int) {
	for _, l := range act {
		c[l] = min(c[l]+s.weight[l], total)
	}
	c[p] = max(c[p]-total, -total)
}

// Plan returns the quotas of a claim of up to n jobs: every active level, in the order of their
// first pick among the next n (then the unpicked ones, highest priority first, with quota 0, so that
// a share left over can still reach them). The quotas add up to n.
func (s *LevelScheduler) Plan(n int) []LevelQuota {
	act, total := s.active()
	c := maps.Clone(s.credit)
	count := map[int]int{}
	var order []int
	for range n {
		p := s.next(c, act, total)
		s.charge(c, p, act, total)
		if count[p] == 0 {
			order = append(order, p)
		}
		count[p]++
	}
	for _, p := range act {
		if count[p] == 0 {
			order = append(order, p)
		}
	}
	out := make([]LevelQuota, len(order))
	for i, p := range order {
		out[i] = LevelQuota{Priority: p, Max: count[p]}
	}
	return out
}

// Served charges the jobs a claim took, by priority, in the order taken. A served level is active
// again; a job of a level without a weight changes nothing.
func (s *LevelScheduler) Served(priorities ...int) {
	for _, p := range priorities {
		if _, ok := s.weight[p]; !ok {
			continue
		}
		delete(s.idle, p)
		act, total := s.active()
		s.charge(s.credit, p, act, total)
	}
}

// Idle leaves level p out of the picks: a claim found fewer of its jobs due than its quota. It is
// active again once served (through another level's leftover or the claim's rest) or after Wake.
func (s *LevelScheduler) Idle(p int) {
	if _, ok := s.weight[p]; ok {
		s.idle[p] = true
	}
}

// Wake makes every level active again (the engine calls it now and then, so that a level whose
// jobs became due gets its share back even while the others keep every claim full).
func (s *LevelScheduler) Wake() { clear(s.idle) }

// Sequence returns the levels of the next picks, up to n, as the claims would make them from the
// scheduler's current credit, without changing it: due tells how many jobs each level has due, and
// a level whose jobs are used up leaves the picks (a level without due jobs takes no part, as an
// idle one). It stops early when no weighted level has a job left. Peek and the console show a
// weighted queue's order with it, so they cannot drift from dispatch.
func (s *LevelScheduler) Sequence(n int, due map[int]int) []int {
	left := maps.Clone(due)
	c := maps.Clone(s.credit)
	var out []int
	for len(out) < n {
		var act []int
		total := 0
		for _, p := range s.levels {
			if left[p] > 0 {
				act = append(act, p)
				total += s.weight[p]
			}
		}
		if len(act) == 0 {
			break
		}
		p := s.next(c, act, total)
		s.charge(c, p, act, total)
		left[p]--
		out = append(out, p)
	}
	return out
}
