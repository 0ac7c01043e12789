package executor

import (
	"slices"
	"strings"
	"time"

	"go.uber.org/zap"

	"github.com/jq-dev/jq/queue"
)

// The executor's side of the circuit breakers (breaker.go has the state machine). A breaker
// changing state sends a heartbeat at once: its list of breakers that are not closed is what
// the server honours when it assigns jobs (no job of an open queue, one at a time of a
// half-open one). The executor itself never refuses a job: one that reaches it anyway (sent
// before the server knew) just runs.

// verdictOf classifies a finished attempt for the breakers. Failures that a retry may cure
// (an error, a timeout, a panic: a downstream outage looks like this) count against the queue;
// permanent failures (a bad payload, an oversized result) are about the job, not the queue,
// and cancellations (by the operator, or at shutdown) and lost leases are about neither.
func verdictOf(done JobDone, rep Report) verdict {
	switch {
	case done.Outcome == OutcomeSucceeded:
		return verdictSuccess
	case done.Outcome != OutcomeFailed, rep.Permanent, rep.Reason == ReasonCancelled:
		return verdictIgnore
	case rep.Reason == ReasonError, rep.Reason == ReasonTimeout:
		return verdictFailure
	}
	return verdictIgnore
}

// breakerStart makes a job starting now the probe of its queue's half-open breaker, if none is
// out yet.
func (e *Executor) breakerStart(t *task) {
	if e.breakers == nil {
		return
	}
	e.breakerMu.Lock()
	defer e.breakerMu.Unlock()
	if b := e.breakers[t.job.Queue]; b != nil {
		t.probe = b.takeProbe()
	}
}

// breakerFinish counts a finished attempt: the probe's outcome is the half-open breaker's
// verdict; any other fills the rolling window of a closed breaker.
func (e *Executor) breakerFinish(t *task, done JobDone, rep Report) {
	if e.breakers == nil {
		return
	}
	e.breakerMu.Lock()
	defer e.breakerMu.Unlock()
	b := e.breakers[t.job.Queue]
	if b == nil {
		return
	}
	v, now := verdictOf(done, rep), time.Now()
	var (
		c       BreakerChange
		changed bool
	)
	if t.probe {
		c, changed = b.probeDone(now, v)
	} else {
		c, changed = b.record(now, v)
	}
	if changed {
		e.breakerChangedLocked(b, c)
	}
}

// breakerCooldown ends an open breaker's cooldown (its timer).
func (e *Executor) breakerCooldown(b *breaker) {
	e.breakerMu.Lock()
	defer e.breakerMu.Unlock()
	if c, ok := b.cooldownOver(time.Now()); ok {
		e.breakerChangedLocked(b, c)
	}
}

// breakerChangedLocked logs a change, tells the server at once, and starts the cooldown of a
// breaker that opened.
func (e *Executor) breakerChangedLocked(b *breaker, c BreakerChange) {
	fields := []zap.Field{
		zap.String("queue", c.Queue), zap.Stringer("from", c.From), zap.Stringer("to", c.To),
		zap.Float64("failure_rate", c.FailureRate), zap.Int("samples", c.Samples),
	}
	switch c.To {
	case queue.BreakerOpen:
		if b.timer != nil {
			b.timer.Stop()
		}
		b.timer = time.AfterFunc(e.opts.CircuitBreaker.Cooldown, func() { e.breakerCooldown(b) })
		e.log.Warn("circuit breaker open: taking no jobs of the queue until the cooldown ends",
			append(fields, zap.Duration("cooldown", e.opts.CircuitBreaker.Cooldown))...)
	case queue.BreakerHalfOpen:
		e.log.Info("circuit breaker half-open: taking one probe job of the queue", fields...)
	default:
		e.log.Info("circuit breaker closed: the probe job succeeded", fields...)
	}
	if h := e.opts.CircuitBreaker.OnChange; h != nil {
		h(c)
	}
	signal(e.hbNow)
}

// Breakers returns the breakers that are not closed, by queue name (what the heartbeats
// carry).
func (e *Executor) Breakers() []queue.QueueBreaker {
	if e.breakers == nil {
		return nil
	}
	e.breakerMu.Lock()
	defer e.breakerMu.Unlock()
	var out []queue.QueueBreaker
	for _, b := range e.breakers {
		if b.state != queue.BreakerClosed {
			out = append(out, b.report())
		}
	}
	slices.SortFunc(out, func(a, b queue.QueueBreaker) int { return strings.Compare(a.Queue, b.Queue) })
	return out
}

// stopBreakers stops the cooldown timers (the worker is leaving).
func (e *Executor) stopBreakers() {
	e.breakerMu.Lock()
	defer e.breakerMu.Unlock()
	for _, b := range e.breakers {
		if b.timer != nil {
			b.timer.Stop()
		}
	}
}
