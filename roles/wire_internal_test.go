package roles

import (
	"runtime"
	"strings"
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

// The banner's command to paste works as printed: with authentication on it carries the token
// (on a terminal, where only the person who started jq reads it) or says where the token is —
// never the token itself where stderr may be a log.
func TestBannerSubmitCommandCarriesTheToken(t *testing.T) {
	t.Parallel()
	cfg := config.Default()
	cfg.Auth.Enabled = config.AuthOff
	require.Equal(t, "jq job submit --wait", bannerSubmit("jq", "127.0.0.1:50051", &cfg, true))
	require.Equal(t, "jq --server-addr 10.0.0.1:50051 job submit --wait", bannerSubmit("jq", "10.0.0.1:50051", &cfg, true))

	cfg.Auth.Enabled = config.AuthOn
	cfg.Token = "jq_s3cret"
	require.Equal(t, "JQ_TOKEN=jq_s3cret jq job submit --wait", bannerSubmit("jq", "127.0.0.1:50051", &cfg, true))
	off := bannerSubmit("jq", "127.0.0.1:50051", &cfg, false)
	require.NotContains(t, off, "jq_s3cret", "stderr is no terminal: it may be a log")
	require.Contains(t, off, "JQ_TOKEN=")
	require.Contains(t, off, "this process's token")

	cfg.Token, cfg.TokenFile = "", "/run/secrets/jq-token"
	require.Equal(t, "jq --token-file /run/secrets/jq-token job submit --wait", bannerSubmit("jq", "127.0.0.1:50051", &cfg, true))

	cfg.TokenFile = ""
	none := bannerSubmit("jq", "127.0.0.1:50051", &cfg, true)
	require.Contains(t, none, "JQ_TOKEN=")
	require.Contains(t, none, "token new")
	require.True(t, strings.HasSuffix(none, " jq job submit --wait"), none)
}
