// Package stores opens jq's real stores for tests that need private ones: a Postgres store over a
// migrated database of the test's own, and the Redis dispatcher under a key prefix of the test's
// own. Both are closed when the test ends.
package stores

import (
	"context"
	"testing"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/jq-dev/jq/internal/testenv"
	"github.com/jq-dev/jq/migrations"
	"github.com/jq-dev/jq/store/postgres"
	"github.com/jq-dev/jq/store/redis"
)

// Postgres is a store over a new, migrated database with a pool of maxConns.
func Postgres(ctx context.Context, t testing.TB, maxConns int32) *postgres.Store {
	t.Helper()
	dsn := testenv.NewDatabase(t)
	require.NoError(t, migrations.Up(ctx, dsn))
	st, err := postgres.New(ctx, postgres.Config{DSN: dsn, MaxConns: maxConns})
	require.NoError(t, err)
	t.Cleanup(st.Close)
	return st
}

// Dispatcher is the Redis dispatcher under a new key prefix on the test Redis.
func Dispatcher(ctx context.Context, t testing.TB) *redisstore.Dispatcher {
	t.Helper()
	rdb, prefix := testenv.NewRedis(t)
	return DispatcherOn(ctx, t, rdb, prefix)
}

// DispatcherOn is the Redis dispatcher over a client the test made itself (a private redis-server
// it may stop, say).
func DispatcherOn(ctx context.Context, t testing.TB, rdb *redis.Client, prefix string) *redisstore.Dispatcher {
	t.Helper()
	disp, err := redisstore.New(ctx, redisstore.Config{Client: rdb, KeyPrefix: prefix})
	require.NoError(t, err)
	return disp
}
