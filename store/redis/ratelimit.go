package redisstore

import (
	"context"
	_ "embed"
	"errors"
	"fmt"
	"math"
	"time"

	goredis "github.com/redis/go-redis/v9"
)

var (
	//go:embed rate_limit.lua
	rateLimitSrc    string
	rateLimitScript = goredis.NewScript(rateLimitSrc)
)

// RateLimiter is a rate limit shared by every process that uses the same key: the producers'
// producer.rate_limit_per_sec (seed 004). It is a generic cell rate algorithm (rate_limit.lua) on
// Redis's clock rather than seed 004's INCR + EX window, which lets up to twice the limit through
// around a window boundary: here admissions are spaced evenly, with at most Burst at once.
type RateLimiter struct {
	client   goredis.UniversalClient
	key      string
	interval time.Duration
	burst    int
}

// NewRateLimiter limits the events of everyone using key to perSec a second, admitting at most
// burst at once (burst ≥ 1).
func NewRateLimiter(client goredis.UniversalClient, key string, perSec float64, burst int) (*RateLimiter, error) {
	if client == nil || key == "" {
		return nil, errors.New("redis: rate limiter: client and key are required")
	}
	if perSec <= 0 || math.IsInf(perSec, 0) || math.IsNaN(perSec) || burst < 1 {
		return nil, fmt.Errorf("redis: rate limiter: rate %v and burst %d must be positive", perSec, burst)
	}
	return &RateLimiter{client: client, key: key, interval: time.Duration(float64(time.Second) / perSec), burst: burst}, nil
}

// Burst is the most events one Take may ask for.
func (l *RateLimiter) Burst() int { return l.burst }

// Take asks for n events (1..Burst): it returns 0 when they are admitted now, else how long to wait
// before asking again. Nothing is admitted in part.
func (l *RateLimiter) Take(ctx context.Context, n int) (wait time.Duration, err error) {
	if n < 1 || n > l.burst {
		return 0, fmt.Errorf("redis: rate limiter: %d events asked, want 1..%d", n, l.burst)
	}
	res, err := rateLimitScript.Run(ctx, l.client, []string{l.key},
		l.interval.Microseconds(), (time.Duration(l.burst) * l.interval).Microseconds(), n).Int64Slice()
	if err != nil {
		return 0, fmt.Errorf("redis: rate limit: %w", err)
	}
	if len(res) != 2 {
		return 0, fmt.Errorf("redis: rate limit: unexpected reply %v", res)
	}
	if res[0] == int64(n) {
		return 0, nil
	}
	return time.Duration(res[1]) * time.Microsecond, nil
}
