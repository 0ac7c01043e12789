// Package stores opens jq's real stores for tests that need private ones: a Postgres store over a
// migrated database of the test's own, behind store/storewrap as the server has it, and the Redis
// dispatcher under a key prefix of the test's own. Both are closed when the test ends.
package stores

import (
	"context"
	"testing"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/jq-dev/jq/internal/testenv"
	"github.com/jq-dev/jq/migrations"
	"github.com/jq-dev/jq/store/postgres"
	"github.com/jq-dev/jq/store/redis"
	"github.com/jq-dev/jq/store/storewrap"
)

// PG is a Postgres store of a test's own: the store as the server reaches it, behind
// store/storewrap (what a test calls), and the backend itself for what only Postgres has (its pool,
// the schema version). It is the engine's Notifier too.
type PG struct {
	*storewrap.Store
	Backend *postgres.Store
}

// Pool is the backend's connection pool, for a test's own SQL.
func (p *PG) Pool() *pgxpool.Pool { return p.Backend.Pool() }

// Notify implements store.Notifier.
func (p *PG) Notify(ctx context.Context, queues []string) error { return p.Backend.Notify(ctx, queues) }

// Listen implements store.Notifier.
func (p *PG) Listen(ctx context.Context, f func(queueName string)) error {
	return p.Backend.Listen(ctx, f)
}

// Postgres is a store over a new, migrated database with a pool of maxConns.
func Postgres(ctx context.Context, t testing.TB, maxConns int32) *PG {
	t.Helper()
	return PostgresWith(ctx, t, maxConns, storewrap.Options{})
}

// PostgresWith is Postgres with the wrapper's options: a fault hook, instruments.
func PostgresWith(ctx context.Context, t testing.TB, maxConns int32, o storewrap.Options) *PG {
	t.Helper()
	dsn := testenv.NewDatabase(t)
	require.NoError(t, migrations.Up(ctx, dsn))
	st, err := postgres.New(ctx, postgres.Config{DSN: dsn, MaxConns: maxConns})
	require.NoError(t, err)
	t.Cleanup(st.Close)
	return &PG{Store: storewrap.Wrap(st, o), Backend: st}
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
