package executor

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/jq-dev/jq/queue"
)

// The breaker's state machine with the time passed in: no clock, no sleeps.

func testBreaker() (*breaker, time.Time) {
	opts := &CircuitBreakerOptions{Enabled: true, FailureThreshold: 0.5, Window: time.Minute, Cooldown: 30 * time.Second, MinSamples: 20}
	opts.setDefaults()
	t0 := time.Date(2026, 11, 24, 10, 0, 0, 0, time.UTC)
	return newBreaker("q", opts, t0), t0
}

// feed records n outcomes a millisecond apart from at, failing those for which fail(i) holds,
// and returns the first change.
func feed(b *breaker, at time.Time, n int, fail func(i int) bool) (BreakerChange, bool, time.Time) {
	for i := range n {
		v := verdictSuccess
		if fail(i) {
			v = verdictFailure
		}
		at = at.Add(time.Millisecond)
		if c, ok := b.record(at, v); ok {
			return c, true, at
		}
	}
	return BreakerChange{}, false, at
}

func TestBreakerMinSamples(t *testing.T) {
	t.Parallel()
	b, t0 := testBreaker()
	_, changed, _ := feed(b, t0, 19, func(int) bool { return true })
	require.False(t, changed, "19 failures out of 19 are below min_samples")
	c, changed, _ := feed(b, t0.Add(time.Second), 1, func(int) bool { return true })
	require.True(t, changed, "the 20th sample opens it")
	require.Equal(t, BreakerChange{Queue: "q", From: queue.BreakerClosed, To: queue.BreakerOpen, FailureRate: 1, Samples: 20}, c)
}

func TestBreakerThreshold(t *testing.T) {
	t.Parallel()
	b, t0 := testBreaker()
	// 40 % failures: never opens, however many samples.
	_, changed, _ := feed(b, t0, 200, func(i int) bool { return i%5 < 2 })
	require.False(t, changed)
	require.Equal(t, queue.BreakerClosed, b.state)

	// Exactly at the threshold opens (≥): 10 failures of 20 in a fresh window.
	b, t0 = testBreaker()
	c, changed, _ := feed(b, t0, 20, func(i int) bool { return i%2 == 0 })
	require.True(t, changed)
	require.InDelta(t, 0.5, c.FailureRate, 1e-9)
	require.Equal(t, 20, c.Samples)

	// Ignored outcomes (cancelled, permanent, abandoned) are not samples.
	b, t0 = testBreaker()
	for i := range 100 {
		_, changed := b.record(t0.Add(time.Duration(i)*time.Millisecond), verdictIgnore)
		require.False(t, changed)
	}
	total, _ := b.window(t0.Add(time.Second))
	require.Zero(t, total)
}

func TestBreakerWindowRolls(t *testing.T) {
	t.Parallel()
	b, t0 := testBreaker()
	// 15 failures, then more than a window later 15 more: the first ones have rolled out, so
	// there are never 20 samples in the window.
	_, changed, _ := feed(b, t0, 15, func(int) bool { return true })
	require.False(t, changed)
	later := t0.Add(time.Minute + 5*time.Second)
	total, _ := b.window(later)
	require.Zero(t, total, "a window later, nothing is left")
	_, changed, _ = feed(b, later, 15, func(int) bool { return true })
	require.False(t, changed)

	// Within one window they add up: 15 + 5 failures = 20 samples, all failed.
	b, t0 = testBreaker()
	_, _, _ = feed(b, t0, 15, func(int) bool { return true })
	c, changed, _ := feed(b, t0.Add(30*time.Second), 5, func(int) bool { return true })
	require.True(t, changed)
	require.Equal(t, 20, c.Samples)

	// Old successes roll out too: 20 successes, then a window later 20 failures open it at rate 1.
	b, t0 = testBreaker()
	_, _, _ = feed(b, t0, 20, func(int) bool { return false })
	c, changed, _ = feed(b, t0.Add(2*time.Minute), 20, func(int) bool { return true })
	require.True(t, changed)
	require.InDelta(t, 1, c.FailureRate, 1e-9)
}

func TestBreakerCooldownProbe(t *testing.T) {
	t.Parallel()
	b, t0 := testBreaker()
	_, changed, opened := feed(b, t0, 20, func(int) bool { return true })
	require.True(t, changed)
	require.Equal(t, queue.BreakerOpen, b.state)

	// Open: outcomes of jobs started earlier change nothing; no probe before the cooldown.
	_, changed = b.record(opened.Add(time.Second), verdictSuccess)
	require.False(t, changed)
	require.False(t, b.takeProbe())
	_, changed = b.cooldownOver(opened.Add(29 * time.Second))
	require.False(t, changed, "cooldown not over")

	c, changed := b.cooldownOver(opened.Add(30 * time.Second))
	require.True(t, changed)
	require.Equal(t, queue.BreakerOpen, c.From)
	require.Equal(t, queue.BreakerHalfOpen, c.To)

	// Half-open: exactly one probe; other outcomes change nothing.
	require.True(t, b.takeProbe())
	require.False(t, b.takeProbe(), "one probe at a time")
	_, changed = b.record(opened.Add(31*time.Second), verdictFailure)
	require.False(t, changed, "only the probe counts while half-open")

	// Probe failed: open again, with a new cooldown from now.
	reopened := opened.Add(32 * time.Second)
	c, changed = b.probeDone(reopened, verdictFailure)
	require.True(t, changed)
	require.Equal(t, queue.BreakerHalfOpen, c.From)
	require.Equal(t, queue.BreakerOpen, c.To)
	_, changed = b.cooldownOver(reopened.Add(29 * time.Second))
	require.False(t, changed, "the new cooldown counts from the probe's failure")
	_, changed = b.cooldownOver(reopened.Add(30 * time.Second))
	require.True(t, changed)

	// A probe that says nothing (cancelled, abandoned) lets the next job probe.
	require.True(t, b.takeProbe())
	_, changed = b.probeDone(reopened.Add(31*time.Second), verdictIgnore)
	require.False(t, changed)
	require.Equal(t, queue.BreakerHalfOpen, b.state)
	require.True(t, b.takeProbe())

	// Probe succeeded: closed, with an empty window (the failures before do not count again).
	closedAt := reopened.Add(32 * time.Second)
	c, changed = b.probeDone(closedAt, verdictSuccess)
	require.True(t, changed)
	require.Equal(t, queue.BreakerClosed, c.To)
	total, _ := b.window(closedAt)
	require.Zero(t, total)
	_, changed, _ = feed(b, closedAt, 19, func(int) bool { return true })
	require.False(t, changed, "min_samples again from scratch")
}

func TestVerdictOf(t *testing.T) {
	t.Parallel()
	failed := JobDone{Outcome: OutcomeFailed}
	for _, c := range []struct {
		done JobDone
		rep  Report
		want verdict
	}{
		{JobDone{Outcome: OutcomeSucceeded}, Report{Success: true}, verdictSuccess},
		{failed, Report{Reason: ReasonError}, verdictFailure},
		{failed, Report{Reason: ReasonTimeout}, verdictFailure},
		{failed, Report{Reason: ReasonError, Permanent: true}, verdictIgnore},          // bad payload
		{failed, Report{Reason: ReasonCancelled, Permanent: true}, verdictIgnore},      // operator
		{failed, Report{Reason: ReasonOutputTooLarge, Permanent: true}, verdictIgnore}, // the job's own
		{JobDone{Outcome: OutcomeAbandoned}, Report{}, verdictIgnore},                  // lease lost, shutdown
	} {
		require.Equal(t, c.want, verdictOf(c.done, c.rep), "%+v %+v", c.done, c.rep)
	}
}
