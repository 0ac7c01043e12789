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
// every level's weight to its credit and takes the level with the most credit (ties: the higher
// priority), which then pays the total weight. With weights 9=3,0=1 the picks run 9,9,0,9 and repeat:
// 3:1 in every 4 consecutive picks.
//
// A claim takes a batch, so the scheduler works in two steps: Plan turns the next n picks into a
// quota per level without changing anything, and Served charges what the claim actually took. A
// level with fewer due jobs than its quota leaves the rest to the others (the store is
// work-conserving), and since only what was served is charged, the shares of the levels that were
// due stay in proportion. A level that is not due keeps earning credit, bounded by the total weight,
// so after an idle spell it gets at most a short head start, never a burst.
//
// Priorities without a weight are not planned: the store serves them only with what the weighted
// levels leave (dispatch order, strict priority). A LevelScheduler is not safe for concurrent use.
type LevelScheduler struct {
	levels  []int // priorities with a weight > 0, highest first
	weight  map[int]int
	credit  map[int]int
	total   int
	weights map[int]int // as given, to tell a change (Same)
}

// NewLevelScheduler returns a scheduler over the levels with a positive weight; nil when there are
// none (strict priority).
func NewLevelScheduler(weights map[int]int) *LevelScheduler {
	s := &LevelScheduler{weight: map[int]int{}, credit: map[int]int{}, weights: maps.Clone(weights)}
	for p, w := range weights {
		if w > 0 {
			s.levels = append(s.levels, p)
			s.weight[p] = w
			s.total += w
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

// next returns the level the next job should come from under credit c.
func (s *LevelScheduler) next(c map[int]int) int {
	best, most := s.levels[0], 0
	for i, p := range s.levels {
		if v := min(c[p]+s.weight[p], s.total); i == 0 || v > most {
			best, most = p, v
		}
	}
	return best
}

// charge records in c that a job of level p was served.
func (s *LevelScheduler) charge(c map[int]int, p int) {
	for _, l := range s.levels {
		c[l] = min(c[l]+s.weight[l], s.total)
	}
	c[p] = max(c[p]-s.total, -s.total)
}

// Plan returns the quotas of a claim of up to n jobs: every weighted level, in the order of their
// first pick among the next n (then the unpicked ones, highest priority first, with quota 0, so that
// a share left over can still reach them). The quotas add up to n.
func (s *LevelScheduler) Plan(n int) []LevelQuota {
	c := maps.Clone(s.credit)
	count := map[int]int{}
	var order []int
	for range n {
		p := s.next(c)
		s.charge(c, p)
		if count[p] == 0 {
			order = append(order, p)
		}
		count[p]++
	}
	for _, p := range s.levels {
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

// Served charges the jobs a claim took, by priority, in the order taken. A job of a level without a
// weight changes nothing.
func (s *LevelScheduler) Served(priorities ...int) {
	for _, p := range priorities {
		if _, ok := s.weight[p]; !ok {
			continue
		}
		s.charge(s.credit, p)
	}
}
