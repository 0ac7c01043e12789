package redis

import (
	"math"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/jq-dev/jq/queue"
)

func mustScore(t *testing.T, priority int, createdAt time.Time) int64 {
	t.Helper()
	s, err := readyScore(priority, createdAt)
	require.NoError(t, err)
	return s
}

func TestReadyScore(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, time.March, 14, 15, 9, 26, 535_897_000, time.UTC)

	t.Run("layout", func(t *testing.T) {
		require.Equal(t, int64(0), mustScore(t, 9, scoreEpoch))
		require.Equal(t, int64(9*400_000_000_000_000), mustScore(t, 0, scoreEpoch))
		require.Equal(t, int64(4*400_000_000_000_000+1), mustScore(t, 5, scoreEpoch.Add(time.Microsecond)))
		// Sub-microsecond parts are dropped, like Postgres's timestamptz.
		require.Equal(t, mustScore(t, 3, now), mustScore(t, 3, now.Add(999*time.Nanosecond)))
	})

	t.Run("priority first, then oldest", func(t *testing.T) {
		for p := queue.MinPriority; p < queue.MaxPriority; p++ {
			// A higher priority wins even against a job created ~12 years earlier.
			require.Less(t, mustScore(t, p+1, scoreEpoch.Add(12*365*24*time.Hour)), mustScore(t, p, scoreEpoch))
			require.Less(t, mustScore(t, p+1, now), mustScore(t, p, now))
		}
		for p := queue.MinPriority; p <= queue.MaxPriority; p++ {
			a, b := mustScore(t, p, now), mustScore(t, p, now.Add(time.Microsecond))
			require.Equal(t, a+1, b, "jobs 1 µs apart are 1 apart")
			// …and stay distinct and ordered once Redis holds them as float64.
			require.Less(t, float64(a), float64(b))
		}
	})

	t.Run("exact in a float64", func(t *testing.T) {
		top := mustScore(t, queue.MinPriority, scoreEpoch.Add(100*365*24*time.Hour))
		require.Equal(t, 10*priorityBand-1, top, "the largest score")
		require.Less(t, top, int64(1)<<53)
		require.Equal(t, top, int64(float64(top)))
		require.Equal(t, top-1, int64(float64(top-1)))
		require.NotEqual(t, float64(top), float64(top-1))
	})

	t.Run("clamped times", func(t *testing.T) {
		require.Equal(t, mustScore(t, 4, scoreEpoch), mustScore(t, 4, scoreEpoch.Add(-time.Microsecond)))
		require.Equal(t, mustScore(t, 4, scoreEpoch), mustScore(t, 4, time.Time{}))
		require.Equal(t, mustScore(t, 4, scoreEpoch), mustScore(t, 4, time.Date(1999, 1, 1, 0, 0, 0, 0, time.UTC)))
		far := scoreEpoch.Add(time.Duration(maxOffset) * time.Microsecond)
		require.Equal(t, mustScore(t, 4, far), mustScore(t, 4, far.Add(time.Hour)))
		require.Less(t, mustScore(t, 4, far), mustScore(t, 3, scoreEpoch), "a clamped time stays in its priority band")
	})

	t.Run("time zone does not matter", func(t *testing.T) {
		require.Equal(t, mustScore(t, 2, now), mustScore(t, 2, now.In(time.FixedZone("X", -7*3600))))
	})

	t.Run("invalid priority", func(t *testing.T) {
		for _, p := range []int{-1, 10, math.MinInt, math.MaxInt} {
			_, err := readyScore(p, now)
			require.ErrorIs(t, err, queue.ErrInvalidArgument, p)
		}
	})
}
