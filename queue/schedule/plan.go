package schedule

import (
	"time"

	"github.com/jq-dev/jq/queue"
)

// Missed fires. A pass of the fire loop fires at most one fire time of a schedule on time: the
// latest one that has come, provided it came at most grace ago (the servers'
// schedules.misfire_grace, 1 minute by default) — a fire loop that was busy for a moment, a replica
// that took over from one killed mid-tick, a restart or a deploy shorter than the grace still fire
// it. Every other fire time the pass finds is missed: the earlier ones (the loop fell behind a
// schedule firing more often than its passes run, or no server ran), and the latest too when it
// came more than grace ago. The schedule's policy decides what happens to them:
//
//	skip      (default) missed fire times are dropped (counted, never fired)
//	catch_up  the most recent CatchUpMax missed fire times are fired too, oldest first, before
//	          the on-time one; older ones are dropped
//
// So one pass submits at most 1 + CatchUpMax jobs per schedule, however far behind it is: a loop
// that falls behind does less work per schedule, not more. Either way the schedule then waits for
// its first fire time after now. No fire time later than now is ever fired: a schedule never fires
// early.

// DefaultGrace is the misfire grace when the servers set none.
const DefaultGrace = time.Minute

// maxWalk bounds the fire times Plan walks one by one; past it (a per-second spec after a day
// without servers) it jumps ahead, see Plan.
const maxWalk = 100_000

// Plan is what a fire loop does for one due schedule.
type Plan struct {
	// Fires are the fire times to submit, oldest first: the caught-up ones, then the on-time one.
	Fires []time.Time
	// Missed counts the fire times dropped (a lower bound when the walk jumped ahead).
	Missed int
	// CaughtUp counts the missed fire times fired anyway (catch_up): the first CaughtUp of Fires.
	CaughtUp int
	// Next is the first fire time after now (zero: the spec never fires again).
	Next time.Time
}

// PlanFires decides the fires of a schedule whose next unhandled fire time is next, at the time now
// (the store's clock, one for every replica).
func PlanFires(s *Spec, next, now time.Time, grace time.Duration, policy queue.MissedPolicy, catchUpMax int) Plan {
	var p Plan
	if next.IsZero() || next.After(now) {
		p.Next = next
		return p
	}
	keep := 0
	if policy == queue.MissedCatchUp {
		keep = catchUpMax
	}
	// recent holds the keep+1 most recent fire times that have come, oldest first: the latest may
	// be on time, the keep before it are what catch_up would fire.
	recent := make([]time.Time, 0, keep+1)
	t, steps, total := next, 0, 0
	for !t.IsZero() && !t.After(now) {
		total++
		if len(recent) == keep+1 {
			copy(recent, recent[1:])
			recent = recent[:keep]
		}
		recent = append(recent, t)
		prev := t
		t = s.Next(t)
		if steps++; steps == maxWalk && !t.IsZero() {
			// Far behind: jump to about keep+2 average intervals before now and walk from there.
			// Only older missed fire times are passed over, which no policy fires.
			avg := prev.Sub(next) / time.Duration(steps)
			if j := s.Next(now.Add(-avg*time.Duration(keep+2) - time.Nanosecond)); j.After(t) {
				t = j
			}
		}
	}
	p.Next = t
	latest := recent[len(recent)-1]
	var caught []time.Time
	onTime := !latest.Before(now.Add(-grace))
	if onTime {
		caught = recent[:len(recent)-1]
	} else {
		caught = recent[max(len(recent)-keep, 0):]
	}
	missed := total
	if onTime {
		missed--
	}
	p.CaughtUp = len(caught)
	p.Missed = missed - p.CaughtUp
	p.Fires = append(p.Fires, caught...)
	if onTime {
		p.Fires = append(p.Fires, latest)
	}
	return p
}
