package postgres_test

import (
	"context"
	"fmt"
	"os"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/jq-dev/jq/internal/testenv"
	"github.com/jq-dev/jq/internal/testenv/stores"
	"github.com/jq-dev/jq/migrations"
	"github.com/jq-dev/jq/store"
	"github.com/jq-dev/jq/store/postgres"
	"github.com/jq-dev/jq/store/storetest"
	"github.com/jq-dev/jq/store/storewrap"
)

// One database for the package, migrated once; tests isolate their data by unique names.
var (
	testDSN   string
	testStore *postgres.Store
)

func TestMain(m *testing.M) {
	os.Exit(runMain(m))
}

func runMain(m *testing.M) int {
	dsn, cleanup, err := testenv.NewDatabaseForMain("store_postgres")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer cleanup()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := migrations.Up(ctx, dsn); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	testDSN = dsn
	testStore, err = postgres.New(ctx, postgres.Config{DSN: dsn, MaxConns: 16})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	code := m.Run()
	testStore.Close()
	if code == 0 {
		if err := goleak.Find(); err != nil {
			fmt.Fprintln(os.Stderr, "goleak:", err)
			return 1
		}
	}
	return code
}

// privateStore is a store over a migrated database of its own, for contracts whose statements act
// on every row of the database (the reaper's, the outbox's, retention, purges).
func privateStore(t testing.TB) *postgres.Store {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	return stores.Postgres(ctx, t, 8).Backend
}

// The store implements every interface of package store, so Exercise runs every suite.
var (
	_ store.Store           = (*postgres.Store)(nil)
	_ store.DispatchStore   = (*postgres.Store)(nil)
	_ store.RecoveryStore   = (*postgres.Store)(nil)
	_ store.OperatorStore   = (*postgres.Store)(nil)
	_ store.ProgressStore   = (*postgres.Store)(nil)
	_ store.RetentionStore  = (*postgres.Store)(nil)
	_ store.OutboxStore     = (*postgres.Store)(nil)
	_ store.EventFeed       = (*postgres.Store)(nil)
	_ store.ScheduleStore   = (*postgres.Store)(nil)
	_ store.AdminStore      = (*postgres.Store)(nil)
	_ store.DepthStore      = (*postgres.Store)(nil)
	_ store.ConstraintStore = (*postgres.Store)(nil)
)

// factory gives the contract the package's shared store and private databases, as production code
// reaches a store: behind store/storewrap, which validates the arguments.
type factory struct{}

func (factory) Store(testing.TB) store.Store { return storewrap.Wrap(testStore, storewrap.Options{}) }
func (factory) IsolatedStore(t testing.TB) store.Store {
	return storewrap.Wrap(privateStore(t), storewrap.Options{})
}

// TestStore runs the whole contract (store/storetest); one suite: -run '^TestStore$/^DispatchStore$'.
func TestStore(t *testing.T) {
	t.Parallel()
	storetest.Exercise(t, factory{})
}

func TestNewFailsFast(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	for _, cfg := range []postgres.Config{
		{},
		{DSN: "mysql://nope"},
		{DSN: "postgres://postgres:s3cret@127.0.0.1:1/none?sslmode=disable", ConnectTimeout: 2 * time.Second},
	} {
		s, err := postgres.New(ctx, cfg)
		require.Error(t, err, cfg.DSN)
		require.Nil(t, s)
		require.NotContains(t, err.Error(), "s3cret")
	}
}

func TestNewAndClose(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s, err := postgres.New(ctx, postgres.Config{DSN: testDSN, MaxConns: 2, ConnectTimeout: 5 * time.Second})
	require.NoError(t, err)
	require.NoError(t, s.Ping(ctx))
	require.EqualValues(t, 2, s.Pool().Config().MaxConns)
	s.Close()
	require.Error(t, s.Ping(ctx), "a closed store fails")
}

// BenchmarkStore runs the shared benchmarks (storetest.Benchmark).
func BenchmarkStore(b *testing.B) {
	storetest.Benchmark(b, factory{})
}
