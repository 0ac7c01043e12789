package queue

import (
	"math"
	"time"
)

// JitterFraction bounds the random part of a backoff: up to 10 % of the capped delay.
const JitterFraction = 0.1

// RetryPolicy computes the delay before an automatic retry (FR-033):
// min(Base·2^attempt, Max) + jitter, jitter uniform in [0, JitterFraction·capped).
type RetryPolicy struct {
	Base time.Duration // zero or negative: DefaultBackoffBase
	Max  time.Duration // zero or negative: DefaultBackoffMax
}

// Backoff returns the delay before retry number attempt (0 for the first retry). rnd returns a value
// in [0,1) — pass rand.Float64, or nil for no jitter; out-of-range values are clamped. The result never
// overflows, whatever attempt is.
func (p RetryPolicy) Backoff(attempt int, rnd func() float64) time.Duration {
	base, maxDelay := p.Base, p.Max
	if base <= 0 {
		base = DefaultBackoffBase
	}
	if maxDelay <= 0 {
		maxDelay = DefaultBackoffMax
	}
	d := min(base, maxDelay)
	// Doubling stops as soon as the cap is reached, so the loop runs at most ~63 times.
	for i := 0; i < attempt && d < maxDelay; i++ {
		if d > maxDelay/2 {
			d = maxDelay
			break
		}
		d *= 2
	}
	if rnd == nil {
		return d
	}
	r := rnd()
	if !(r > 0) { // also catches NaN
		return d
	}
	r = min(r, 1)
	jitter := time.Duration(float64(d) * JitterFraction * r)
	if jitter > math.MaxInt64-d {
		return math.MaxInt64
	}
	return d + jitter
}
