package roles

import (
	"runtime"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/jq-dev/jq/config"
)

// Seed 004's Redis settings reach the client: ACL user, pool, idle connections, timeouts, retries.
func TestNewRedisUsesTheRedisSettings(t *testing.T) {
	t.Parallel()
	cfg := config.Default()
	cfg.Redis.Username, cfg.Redis.Password = "jq-dispatch", "s3cret"
	cfg.Redis.PoolSizeMultiplier, cfg.Redis.MinIdleConns = 3, 2
	cfg.Redis.ReadTimeoutMS, cfg.Redis.WriteTimeoutMS, cfg.Redis.MaxRetries = 1500, 2500, 5
	rdb := newRedis(&cfg)
	defer func() { _ = rdb.Close() }()
	o := rdb.Options()
	require.Equal(t, "jq-dispatch", o.Username)
	require.Equal(t, "s3cret", o.Password)
	require.Equal(t, 3*runtime.GOMAXPROCS(0), o.PoolSize)
	require.Equal(t, 2, o.MinIdleConns)
	require.Equal(t, 1500*time.Millisecond, o.ReadTimeout)
	require.Equal(t, 2500*time.Millisecond, o.WriteTimeout)
	require.Equal(t, 5, o.MaxRetries)
	require.True(t, o.ContextTimeoutEnabled)

	cfg.Redis.MaxRetries = 0
	none := newRedis(&cfg)
	defer func() { _ = none.Close() }()
	// Passed as -1 (go-redis reads 0 as its default of 3), which the built client holds as 0: none.
	require.Equal(t, 0, none.Options().MaxRetries, "0 is no retries, not go-redis's default")

	def := config.Default()
	dflt := newRedis(&def)
	defer func() { _ = dflt.Close() }()
	require.Equal(t, 10*runtime.GOMAXPROCS(0), dflt.Options().PoolSize, "the defaults are go-redis's own")
	require.Equal(t, 3, dflt.Options().MaxRetries)
	require.Equal(t, 3*time.Second, dflt.Options().ReadTimeout)
}
