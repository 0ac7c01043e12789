package queue_test

import (
	"math"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/jq-dev/jq/queue"
)

func TestValidateQueueName(t *testing.T) {
	t.Parallel()
	for _, ok := range []string{"default", "a", "0", "emails.high", "img_resize-v2", strings.Repeat("a", 64)} {
		require.NoError(t, queue.ValidateQueueName(ok), ok)
	}
	for _, bad := range []string{"", "Default", "-x", "_x", ".x", "a b", "a/b", "ä", "a:b", "{a}",
		strings.Repeat("a", 65), "a\n"} {
		require.ErrorIs(t, queue.ValidateQueueName(bad), queue.ErrInvalidArgument, "%q", bad)
	}
}

func TestRetryPolicyBackoff(t *testing.T) {
	t.Parallel()
	p := queue.RetryPolicy{Base: 5 * time.Second, Max: 300 * time.Second}
	want := []int{5, 10, 20, 40, 80, 160, 300, 300} // seconds
	for attempt, w := range want {
		require.Equal(t, time.Duration(w)*time.Second, p.Backoff(attempt, nil), "attempt %d", attempt)
	}
	require.Equal(t, 5*time.Second, p.Backoff(-3, nil), "negative attempt counts as 0")

	// Zero values fall back to the queue defaults.
	require.Equal(t, queue.DefaultBackoffBase, queue.RetryPolicy{}.Backoff(0, nil))
	require.Equal(t, queue.DefaultBackoffMax, queue.RetryPolicy{}.Backoff(100, nil))

	// A base above the cap is capped.
	require.Equal(t, time.Second, queue.RetryPolicy{Base: time.Minute, Max: time.Second}.Backoff(0, nil))
}

func TestRetryPolicyBackoffOverflow(t *testing.T) {
	t.Parallel()
	p := queue.RetryPolicy{Base: time.Second, Max: 300 * time.Second}
	for _, attempt := range []int{62, 63, 64, 1000, math.MaxInt} {
		require.Equal(t, 300*time.Second, p.Backoff(attempt, nil), attempt)
	}
	huge := queue.RetryPolicy{Base: time.Second, Max: math.MaxInt64}
	for _, attempt := range []int{30, 62, 63, 64, math.MaxInt} {
		d := huge.Backoff(attempt, func() float64 { return 0.999 })
		require.Positive(t, d, attempt)
	}
	require.Equal(t, time.Duration(math.MaxInt64), huge.Backoff(math.MaxInt, func() float64 { return 1 }))
}

func TestRetryPolicyJitterBounds(t *testing.T) {
	t.Parallel()
	p := queue.RetryPolicy{Base: 5 * time.Second, Max: 300 * time.Second}
	for attempt := 0; attempt < 10; attempt++ {
		capped := p.Backoff(attempt, nil)
		maxJitter := time.Duration(float64(capped) * queue.JitterFraction)
		for _, r := range []float64{0, 0.25, 0.5, 0.999999, 1} {
			d := p.Backoff(attempt, func() float64 { return r })
			require.GreaterOrEqual(t, d, capped)
			require.LessOrEqual(t, d, capped+maxJitter)
		}
		require.Equal(t, capped+maxJitter/2, p.Backoff(attempt, func() float64 { return 0.5 }))
		// Out-of-range generators are clamped, never produce a shorter or unbounded delay.
		require.Equal(t, capped, p.Backoff(attempt, func() float64 { return -1 }))
		require.Equal(t, capped, p.Backoff(attempt, math.NaN))
		require.Equal(t, capped+maxJitter, p.Backoff(attempt, func() float64 { return 7 }))
	}
}

func TestQueueRetryPolicyAndStats(t *testing.T) {
	t.Parallel()
	q := queue.Queue{BackoffBase: time.Second, BackoffMax: time.Minute}
	require.Equal(t, queue.RetryPolicy{Base: time.Second, Max: time.Minute}, q.RetryPolicy())

	s := queue.QueueStats{Pending: 1, Assigned: 2, Running: 3, Done: 4, Failed: 5, DeadLettered: 6}
	for i, st := range queue.States() {
		require.Equal(t, int64(i+1), s.Count(st))
	}
	require.Zero(t, s.Count("bogus"))
}

func TestJobRetriesLeft(t *testing.T) {
	t.Parallel()
	require.True(t, (&queue.Job{MaxRetries: 3, RetryCount: 2}).RetriesLeft())
	require.False(t, (&queue.Job{MaxRetries: 3, RetryCount: 3}).RetriesLeft())
	require.False(t, (&queue.Job{}).RetriesLeft())
}

func TestChecksum(t *testing.T) {
	t.Parallel()
	require.Equal(t, "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855", queue.Checksum(nil))
	require.Equal(t, "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad", queue.Checksum([]byte("abc")))
}

func TestQueueStatsThroughput(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		s    queue.QueueStats
		want float64
	}{
		{queue.QueueStats{FinishedLastMinute: 120, Window: time.Hour}, 2},
		{queue.QueueStats{FinishedLastMinute: 60, Window: 30 * time.Second}, 2},
		{queue.QueueStats{FinishedLastMinute: 5}, 0},
	} {
		require.InDelta(t, c.want, c.s.Throughput(), 1e-9, "%+v", c.s)
	}
}
