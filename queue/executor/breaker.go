package executor

import (
	"time"

	"github.com/jq-dev/jq/queue"
)

// Defaults of CircuitBreakerOptions (seed 004).
const (
	DefaultBreakerFailureThreshold = 0.5
	DefaultBreakerWindow           = time.Minute
	DefaultBreakerCooldown         = 30 * time.Second
	DefaultBreakerMinSamples       = 20
)

// breakerBuckets is how many buckets the rolling window is cut into: the window rolls by a
// twentieth of its length (3 s of the default minute).
const breakerBuckets = 20

// CircuitBreakerOptions configure the per-queue circuit breakers. The zero value is off.
type CircuitBreakerOptions struct {
	// Enabled turns the breakers on, one per queue.
	Enabled bool
	// FailureThreshold opens a breaker when the failure rate of the rolling window reaches it
	// (0 < t ≤ 1; default 0.5).
	FailureThreshold float64
	// Window is the length of the rolling window of finished attempts (default 1 minute).
	Window time.Duration
	// Cooldown is how long an open breaker takes no job of its queue before it lets one probe
	// through (default 30 s).
	Cooldown time.Duration
	// MinSamples is the fewest finished attempts in the window for the rate to count
	// (default 20).
	MinSamples int
	// OnChange, when set, is called after each state change (from the goroutine that caused
	// it; keep it fast). Meant for metrics and tests.
	OnChange func(BreakerChange)
}

func (o *CircuitBreakerOptions) setDefaults() {
	if o.FailureThreshold <= 0 || o.FailureThreshold > 1 {
		o.FailureThreshold = DefaultBreakerFailureThreshold
	}
	setDefault(&o.Window, DefaultBreakerWindow)
	setDefault(&o.Cooldown, DefaultBreakerCooldown)
	if o.MinSamples <= 0 {
		o.MinSamples = DefaultBreakerMinSamples
	}
}

// BreakerChange is one state change of a queue's breaker.
type BreakerChange struct {
	Queue string
	From  queue.BreakerState
	To    queue.BreakerState
	// FailureRate and Samples describe the rolling window when the breaker opened from closed;
	// a probe's verdict carries the window of the last opening.
	FailureRate float64
	Samples     int
}

// Verdicts of finished attempts, as the breaker counts them.
type verdict int

const (
	verdictIgnore  verdict = iota // not about the queue's health: cancelled, permanent, abandoned
	verdictSuccess                // the handler succeeded
	verdictFailure                // the handler failed and may succeed later: error, timeout, panic
)

type bucket struct {
	idx             int64 // which window/breakerBuckets slice of time it counts
	total, failures int
}

// breaker is one queue's circuit breaker: a pure state machine, driven by the executor with
// the time passed in (no clock of its own), guarded by the executor's breakerMu.
//
//	CLOSED ──rate ≥ threshold, samples ≥ min──► OPEN ──cooldown over──► HALF_OPEN
//	   ▲                                          ▲                         │ one probe job
//	   └────────────── probe succeeded ───────────┼─────────────────────────┤
//	                                              └──── probe failed ───────┘
//
// Only attempts that finish while it is closed fill the window; while half-open only the probe
// counts. A job started before the breaker opened (running, or prefetched) just runs: its
// outcome changes nothing.
type breaker struct {
	queue   string
	opts    *CircuitBreakerOptions
	width   time.Duration // of a bucket
	buckets [breakerBuckets]bucket

	state   queue.BreakerState
	since   time.Time
	probing bool // half-open: the probe is out
	// rate and samples of the window when the breaker last opened from closed.
	rate    float64
	samples int
	timer   *time.Timer // open: ends the cooldown
}

func newBreaker(q string, opts *CircuitBreakerOptions, now time.Time) *breaker {
	return &breaker{
		queue: q, opts: opts, state: queue.BreakerClosed, since: now,
		width: max(opts.Window/breakerBuckets, time.Millisecond),
	}
}

// window sums the buckets within the rolling window ending at now.
func (b *breaker) window(now time.Time) (total, failures int) {
	cur := now.UnixNano() / int64(b.width)
	for _, k := range b.buckets {
		if k.idx > cur-breakerBuckets && k.idx <= cur {
			total += k.total
			failures += k.failures
		}
	}
	return total, failures
}

// record counts a finished attempt that was not the probe. It reports the change it caused,
// if any (closed → open).
func (b *breaker) record(now time.Time, v verdict) (BreakerChange, bool) {
	if b.state != queue.BreakerClosed || v == verdictIgnore {
		return BreakerChange{}, false
	}
	idx := now.UnixNano() / int64(b.width)
	k := &b.buckets[idx%breakerBuckets]
	if k.idx != idx {
		*k = bucket{idx: idx}
	}
	k.total++
	if v == verdictFailure {
		k.failures++
	}
	total, failures := b.window(now)
	if total < b.opts.MinSamples {
		return BreakerChange{}, false
	}
	rate := float64(failures) / float64(total)
	if rate < b.opts.FailureThreshold {
		return BreakerChange{}, false
	}
	b.rate, b.samples = rate, total
	return b.enter(now, queue.BreakerOpen), true
}

// cooldownOver moves an open breaker whose cooldown has passed to half-open.
func (b *breaker) cooldownOver(now time.Time) (BreakerChange, bool) {
	if b.state != queue.BreakerOpen || now.Before(b.since.Add(b.opts.Cooldown)) {
		return BreakerChange{}, false
	}
	return b.enter(now, queue.BreakerHalfOpen), true
}

// takeProbe makes a job starting now the probe of a half-open breaker, if none is out.
func (b *breaker) takeProbe() bool {
	if b.state != queue.BreakerHalfOpen || b.probing {
		return false
	}
	b.probing = true
	return true
}

// probeDone judges the probe: success closes the breaker (with an empty window), failure opens
// it again for a new cooldown; an outcome that says nothing about the queue (cancelled,
// abandoned, permanent) lets the next job probe.
func (b *breaker) probeDone(now time.Time, v verdict) (BreakerChange, bool) {
	if b.state != queue.BreakerHalfOpen || !b.probing {
		return BreakerChange{}, false
	}
	b.probing = false
	switch v {
	case verdictSuccess:
		b.buckets = [breakerBuckets]bucket{}
		return b.enter(now, queue.BreakerClosed), true
	case verdictFailure:
		return b.enter(now, queue.BreakerOpen), true
	}
	return BreakerChange{}, false
}

func (b *breaker) enter(now time.Time, to queue.BreakerState) BreakerChange {
	c := BreakerChange{Queue: b.queue, From: b.state, To: to, FailureRate: b.rate, Samples: b.samples}
	b.state, b.since, b.probing = to, now, false
	return c
}

// report is the breaker as a heartbeat carries it.
func (b *breaker) report() queue.QueueBreaker {
	return queue.QueueBreaker{Queue: b.queue, State: b.state, FailureRate: b.rate, Samples: b.samples, Since: b.since}
}
