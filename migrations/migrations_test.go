package migrations_test

import (
	"context"
	"sync"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/jq-dev/jq/internal/testenv"
	"github.com/jq-dev/jq/migrations"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

func TestUpFreshDatabase(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dsn := testenv.NewDatabase(t)

	v, dirty, err := migrations.Version(ctx, dsn)
	require.NoError(t, err)
	require.Zero(t, v)
	require.False(t, dirty)

	require.NoError(t, migrations.Up(ctx, dsn))
	require.NoError(t, migrations.Up(ctx, dsn), "a current database is not an error")

	latest, err := migrations.Latest()
	require.NoError(t, err)
	require.GreaterOrEqual(t, latest, uint(1))
	v, dirty, err = migrations.Version(ctx, dsn)
	require.NoError(t, err)
	require.Equal(t, latest, v)
	require.False(t, dirty)

	conn, err := pgx.Connect(ctx, dsn)
	require.NoError(t, err)
	defer conn.Close(ctx)
	for _, table := range []string{"queues", "jobs", "job_events", "event_batches", "workers"} {
		var exists bool
		require.NoError(t, conn.QueryRow(ctx, "SELECT to_regclass($1) IS NOT NULL", table).Scan(&exists))
		require.True(t, exists, table)
	}
}

// Two servers starting at once: golang-migrate's advisory lock serialises them; both succeed.
func TestUpConcurrent(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dsn := testenv.NewDatabase(t)

	const servers = 4
	var wg sync.WaitGroup
	errs := make([]error, servers)
	for i := range servers {
		wg.Go(func() { errs[i] = migrations.Up(ctx, dsn) })
	}
	wg.Wait()
	for _, err := range errs {
		require.NoError(t, err)
	}
	latest, err := migrations.Latest()
	require.NoError(t, err)
	v, dirty, err := migrations.Version(ctx, dsn)
	require.NoError(t, err)
	require.Equal(t, latest, v)
	require.False(t, dirty)
}

func TestDownThenUp(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dsn := testenv.NewDatabase(t)
	require.NoError(t, migrations.Up(ctx, dsn))
	require.NoError(t, migrations.Down(ctx, dsn))
	v, _, err := migrations.Version(ctx, dsn)
	require.NoError(t, err)
	require.Zero(t, v)

	conn, err := pgx.Connect(ctx, dsn)
	require.NoError(t, err)
	defer conn.Close(ctx)
	var tables int
	require.NoError(t, conn.QueryRow(ctx,
		"SELECT count(*) FROM pg_tables WHERE schemaname = 'public' AND tablename <> 'schema_migrations'").Scan(&tables))
	require.Zero(t, tables, "down removes everything up created")

	require.NoError(t, migrations.Up(ctx, dsn))
}

func TestBadDSN(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	for _, dsn := range []string{
		"mysql://root@localhost/x",
		"host=127.0.0.1 port=notaport",
		"postgres://user:s3cret@[::1:5432/x",
	} {
		err := migrations.Up(ctx, dsn)
		require.Error(t, err, dsn)
		require.NotContains(t, err.Error(), "s3cret")
		_, _, err = migrations.Version(ctx, dsn)
		require.Error(t, err, dsn)
	}
	// Unreachable server: fails, and quickly.
	err := migrations.Up(ctx, "postgres://postgres:s3cret@127.0.0.1:1/none?sslmode=disable&connect_timeout=2")
	require.Error(t, err)
	require.NotContains(t, err.Error(), "s3cret")
}

func TestCancelledContext(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	dsn := testenv.NewDatabase(t)
	require.ErrorIs(t, migrations.Up(ctx, dsn), context.Canceled)
	_, _, err := migrations.Version(ctx, dsn)
	require.ErrorIs(t, err, context.Canceled)
}
