package schedule

import (
	"time"

	"github.com/jq-dev/jq/queue"
)

// Missed fires. A fire time is on time when a server handles it at most grace after it (the
// servers' schedules.misfire_grace, 1 minute by default): a fire loop that was busy for a moment, a
// replica that took over from one killed mid-tick, a restart or a deploy shorter than the grace lose
// nothing, whatever the policy. A fire time older than that was missed — no server ran for longer
// than the grace — and the schedule's policy decides:
//
//	skip      (default) missed fire times are dropped; the on-time ones are fired
//	catch_up  the most recent CatchUpMax missed fire times are fired too, oldest first
//
// Either way the schedule then waits for its first fire time after now. No fire time later than now
// is ever fired: a schedule never fires early.

// DefaultGrace is the misfire grace when the servers set none.
const DefaultGrace = time.Minute

// maxWalk bounds the fire times Plan walks one by one; past it (a per-second spec after a day
// without servers) it jumps ahead, see Plan.
const maxWalk = 100_000

// Plan is what a fire loop does for one due schedule.
type Plan struct {
	// Fires are the fire times to submit, oldest first.
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
	onTime := now.Add(-grace)
	var missed []time.Time // the most recent keep missed fire times, oldest first
	t, steps := next, 0
	for !t.IsZero() && !t.After(now) {
		if t.Before(onTime) {
			p.Missed++
			if keep > 0 {
				if len(missed) == keep {
					missed = missed[1:]
				}
				missed = append(missed, t)
			}
		} else {
			p.Fires = append(p.Fires, t)
		}
		prev := t
		t = s.Next(t)
		if steps++; steps == maxWalk && !t.IsZero() && t.Before(onTime) {
			// Far behind: jump to about keep average intervals before the grace window and walk
			// from there. Only older missed fire times are passed over, which no policy fires.
			avg := prev.Sub(next) / time.Duration(steps)
			if j := s.Next(onTime.Add(-avg*time.Duration(keep+1) - time.Nanosecond)); j.After(t) {
				t = j
				missed = missed[:0]
			}
		}
	}
	p.Missed -= len(missed)
	p.CaughtUp = len(missed)
	p.Fires = append(missed, p.Fires...)
	p.Next = t
	return p
}
