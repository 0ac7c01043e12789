package redisstore_test

import (
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/jq-dev/jq/internal/testenv"
	"github.com/jq-dev/jq/store/redis"
)

func TestRateLimiterValidates(t *testing.T) {
	t.Parallel()
	client, prefix := testenv.NewRedis(t)
	_, err := redisstore.NewRateLimiter(client, prefix+":rl", 0, 1)
	require.ErrorContains(t, err, "must be positive")
	_, err = redisstore.NewRateLimiter(client, "", 10, 1)
	require.ErrorContains(t, err, "client and key are required")
	l, err := redisstore.NewRateLimiter(client, prefix+":rl", 10, 2)
	require.NoError(t, err)
	_, err = l.Take(testCtx(t), 3)
	require.ErrorContains(t, err, "want 1..2")
}

// Two limiters on one key (two producers) together never get more than the rate plus one burst,
// and a refused Take says how long to wait.
func TestRateLimiterIsShared(t *testing.T) {
	t.Parallel()
	client, prefix := testenv.NewRedis(t)
	ctx := testCtx(t)
	const perSec, burst = 100, 10
	var admitted atomic.Int64
	start := time.Now()
	const span = 2 * time.Second
	var wg sync.WaitGroup
	for range 2 {
		l, err := redisstore.NewRateLimiter(client, prefix+":shared", perSec, burst)
		require.NoError(t, err)
		wg.Go(func() {
			for time.Since(start) < span {
				wait, err := l.Take(ctx, 5)
				if !assertNoErr(t, err) {
					return
				}
				if wait == 0 {
					admitted.Add(5)
					continue
				}
				if wait > time.Second/perSec*burst {
					t.Errorf("asked to wait %v, more than a burst's worth", wait)
					return
				}
				time.Sleep(wait) // the limiter's own instruction, not synchronisation
			}
		})
	}
	wg.Wait()
	elapsed := time.Since(start)
	limit := int64(perSec*elapsed.Seconds()) + burst
	// The limit is the guarantee, bounded tightly from above. From below, how near the two come to
	// it is how fast this machine answers Takes and wakes sleepers (each Take is a Redis round trip):
	// only progress, well above the first burst, is asserted.
	require.LessOrEqual(t, admitted.Load(), limit, "admitted in %v", elapsed)
	require.Greater(t, admitted.Load(), limit/4, "the limit admits, too")
}

func assertNoErr(t *testing.T, err error) bool {
	t.Helper()
	if err != nil {
		t.Error(err)
		return false
	}
	return true
}
