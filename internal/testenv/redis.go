package testenv

import (
	"context"
	"fmt"
	"testing"

	"github.com/redis/go-redis/v9"
)

// NewRedis returns a client for the Redis at RedisAddr and a key prefix unique to this
// test, "jqtest:<16 hex digits>". Keep every key the test writes under that prefix: when
// the test ends, all keys starting with it are deleted (SCAN MATCH + UNLINK; never
// FLUSHDB, the server is shared) and the client is closed. The client has
// ContextTimeoutEnabled set, so blocking commands honour their context.
func NewRedis(tb testing.TB) (*redis.Client, string) {
	tb.Helper()
	addr := RedisAddr()
	client := newRedisClient(addr)
	ctx, cancel := context.WithTimeout(context.Background(), opTimeout)
	defer cancel()
	if err := client.Ping(ctx).Err(); err != nil {
		_ = client.Close()
		tb.Fatalf("testenv: Redis at %s is unreachable (%v); "+howToRun, addr, oneLine(err), "JQ_TEST_REDIS_ADDR")
	}
	prefix := "jqtest:" + randomHex(8)
	tb.Cleanup(func() {
		if err := deleteKeys(client, prefix); err != nil {
			tb.Errorf("testenv: delete Redis keys %s*: %v", prefix, err)
		}
		if err := client.Close(); err != nil {
			tb.Errorf("testenv: close Redis client: %v", err)
		}
	})
	return client, prefix
}

func newRedisClient(addr string) *redis.Client {
	return redis.NewClient(&redis.Options{
		Addr:                  addr,
		ContextTimeoutEnabled: true,
	})
}

// deleteKeys unlinks every key beginning with prefix. The prefix holds no glob
// metacharacters (it is "jqtest:" and hex digits).
func deleteKeys(client *redis.Client, prefix string) error {
	ctx, cancel := context.WithTimeout(context.Background(), opTimeout)
	defer cancel()
	var cursor uint64
	for {
		keys, next, err := client.Scan(ctx, cursor, prefix+"*", 1000).Result()
		if err != nil {
			return fmt.Errorf("scan: %w", err)
		}
		if len(keys) > 0 {
			if err := client.Unlink(ctx, keys...).Err(); err != nil {
				return fmt.Errorf("unlink: %w", err)
			}
		}
		if next == 0 {
			return nil
		}
		cursor = next
	}
}
