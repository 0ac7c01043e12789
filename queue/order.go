package queue

import (
	"cmp"
	"slices"
	"time"
)

// DueAt is when a PENDING job became due: its creation, or its not_before when later.
func (j *Job) DueAt() time.Time {
	if j.NotBefore.After(j.CreatedAt) {
		return j.NotBefore
	}
	return j.CreatedAt
}

// DispatchOrder returns the first n of a queue's due jobs in the order the claims take them, the
// order a weighted claim (store.JobClaimParams) executes: the jobs due for maxWait or longer first, oldest
// first (0: no aging); then the weighted levels' jobs in sched's picks (LevelScheduler.Sequence),
// FIFO within a level; then the rest in strict priority. byLevel holds each level's due jobs in
// FIFO order (created_at, id); sched nil means strict priority.
func DispatchOrder(byLevel map[int][]*Job, sched *LevelScheduler, maxWait time.Duration, now time.Time, n int) []*Job {
	out := make([]*Job, 0, n)
	taken := map[string]bool{}
	if maxWait > 0 {
		var aged []*Job
		for _, js := range byLevel {
			for _, j := range js {
				if now.Sub(j.DueAt()) >= maxWait {
					aged = append(aged, j)
				}
			}
		}
		slices.SortFunc(aged, func(a, b *Job) int {
			return cmp.Or(a.DueAt().Compare(b.DueAt()), cmp.Compare(a.ID, b.ID))
		})
		for _, j := range aged[:min(len(aged), n)] {
			out = append(out, j)
			taken[j.ID] = true
		}
	}
	next := map[int]int{} // per level, the index of its next job not taken
	pop := func(p int) *Job {
		js := byLevel[p]
		for next[p] < len(js) {
			j := js[next[p]]
			next[p]++
			if !taken[j.ID] {
				return j
			}
		}
		return nil
	}
	left := func(p int) int {
		k := 0
		for _, j := range byLevel[p][next[p]:] {
			if !taken[j.ID] {
				k++
			}
		}
		return k
	}
	if sched != nil {
		due := map[int]int{}
		for p := range byLevel {
			due[p] = left(p)
		}
		for _, p := range sched.Sequence(n-len(out), due) {
			if j := pop(p); j != nil {
				out = append(out, j)
				taken[j.ID] = true
			}
		}
	}
	for p := MaxPriority; p >= MinPriority && len(out) < n; p-- {
		for len(out) < n {
			j := pop(p)
			if j == nil {
				break
			}
			out = append(out, j)
			taken[j.ID] = true
		}
	}
	return out
}
