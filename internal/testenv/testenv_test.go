package testenv_test

import (
	"context"
	"errors"
	"fmt"
	"net"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/jq-dev/jq/internal/testenv"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

func TestNewDatabase(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	admin := connect(t, testenv.PostgresURL())

	var name string
	t.Run("create", func(t *testing.T) {
		conn := connect(t, testenv.NewDatabase(t))
		require.NoError(t, conn.QueryRow(ctx, "SELECT current_database()").Scan(&name))
		require.Regexp(t, `^jqtest_testnewdatabase_create_[0-9a-f]{12}$`, name)

		var tables int
		require.NoError(t, conn.QueryRow(ctx, `SELECT count(*) FROM pg_tables
			WHERE schemaname NOT IN ('pg_catalog', 'information_schema')`).Scan(&tables))
		require.Zero(t, tables, "a new database is empty")

		_, err := conn.Exec(ctx, "CREATE TABLE t (id int PRIMARY KEY)")
		require.NoError(t, err)
		_, err = conn.Exec(ctx, "INSERT INTO t VALUES (1), (2)")
		require.NoError(t, err)
		require.True(t, databaseExists(t, admin, name))
	})
	require.NotEmpty(t, name)
	require.False(t, databaseExists(t, admin, name), "dropped by the test's cleanup")
}

func TestNewDatabaseLongName(t *testing.T) {
	t.Parallel()
	t.Run(strings.Repeat("Very Long/Name-", 10), func(t *testing.T) {
		conn := connect(t, testenv.NewDatabase(t))
		var name string
		require.NoError(t, conn.QueryRow(t.Context(), "SELECT current_database()").Scan(&name))
		require.LessOrEqual(t, len(name), 63)
		require.Regexp(t, `^jqtest_testnewdatabaselongname_very_long_[a-z_]*_[0-9a-f]{12}$`, name)
	})
}

func TestNewDatabaseForMain(t *testing.T) {
	t.Parallel()
	admin := connect(t, testenv.PostgresURL())

	dsn, cleanup, err := testenv.NewDatabaseForMain("Store Package")
	require.NoError(t, err)
	conn, err := pgx.Connect(t.Context(), dsn)
	require.NoError(t, err)
	var name string
	require.NoError(t, conn.QueryRow(t.Context(), "SELECT current_database()").Scan(&name))
	require.NoError(t, conn.Close(t.Context()))
	require.Regexp(t, `^jqtest_store_package_[0-9a-f]{12}$`, name)

	require.True(t, databaseExists(t, admin, name))
	cleanup()
	require.False(t, databaseExists(t, admin, name))
	cleanup() // a second call is harmless
}

func TestNewDatabaseIsUnique(t *testing.T) {
	t.Parallel()
	require.NotEqual(t, testenv.NewDatabase(t), testenv.NewDatabase(t))
}

// Not parallel: it changes the environment of the whole test binary.
func TestUnreachableServersFailTheTest(t *testing.T) {
	port := closedPort(t)
	t.Setenv("JQ_TEST_DATABASE_URL", "postgres://postgres:secret@127.0.0.1:"+port+"/test?sslmode=disable")
	t.Setenv("JQ_TEST_REDIS_ADDR", "127.0.0.1:"+port)

	for name, use := range map[string]func(testing.TB){
		"postgres": func(tb testing.TB) { testenv.NewDatabase(tb) },
		"redis":    func(tb testing.TB) { testenv.NewRedis(tb) },
	} {
		t.Run(name, func(t *testing.T) {
			f := runFake(use)
			require.True(t, f.failed)
			require.Len(t, f.messages, 1)
			msg := f.messages[0]
			require.NotContains(t, msg, "\n")
			require.Contains(t, msg, "127.0.0.1:"+port)
			require.Contains(t, msg, "go tool -modfile=tools/go.mod task test")
			require.NotContains(t, msg, "secret")
		})
	}
}

func TestNewRedis(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	other, otherPrefix := testenv.NewRedis(t)
	require.NoError(t, other.Set(ctx, otherPrefix+":keep", "1", 0).Err())

	var prefix string
	var client *redis.Client
	t.Run("prefixed", func(t *testing.T) {
		client, prefix = testenv.NewRedis(t)
		require.Regexp(t, `^jqtest:[0-9a-f]{16}$`, prefix)
		require.NotEqual(t, otherPrefix, prefix)

		// More keys than one SCAN page, of several types.
		pipe := client.Pipeline()
		for i := range 2500 {
			pipe.Set(ctx, prefix+":k:"+strconv.Itoa(i), i, 0)
		}
		pipe.RPush(ctx, prefix+":{q}:ready", "a", "b")
		pipe.HSet(ctx, prefix+":{q}:job:1", "state", "ready")
		_, err := pipe.Exec(ctx)
		require.NoError(t, err)
		require.Len(t, scanAll(t, client, prefix), 2502)
	})

	require.Empty(t, scanAll(t, other, prefix), "the test's keys are deleted")
	require.Equal(t, int64(1), other.Exists(ctx, otherPrefix+":keep").Val(), "other keys stay")
	require.ErrorIs(t, client.Ping(ctx).Err(), redis.ErrClosed)
}

func TestStartPostgres(t *testing.T) {
	t.Parallel()
	pg := testenv.StartPostgres(t)
	ctx := t.Context()

	_, err := connect(t, pg.DSN()).Exec(ctx, "CREATE TABLE t (v int); INSERT INTO t VALUES (1)")
	require.NoError(t, err)

	pg.Kill()
	_, err = pgx.Connect(ctx, pg.DSN())
	require.Error(t, err, "a killed server refuses connections")

	pg.Start()
	var n int
	require.NoError(t, connect(t, pg.DSN()).QueryRow(ctx, "SELECT count(*) FROM t").Scan(&n))
	require.Equal(t, 1, n, "a committed row survives a crash")

	pg.Stop()
	_, err = pgx.Connect(ctx, pg.DSN())
	require.Error(t, err)
	pg.Start()
	require.NoError(t, connect(t, pg.DSN()).Ping(ctx))
}

func TestStartRedis(t *testing.T) {
	t.Parallel()
	rp := testenv.StartRedis(t)
	ctx := t.Context()
	// No retries: a command to a dead server fails at once instead of after backoff.
	client := redis.NewClient(&redis.Options{
		Addr: rp.Addr(), ContextTimeoutEnabled: true, MaxRetries: -1, DialerRetries: 1,
	})
	t.Cleanup(func() { _ = client.Close() })
	require.NoError(t, client.Set(ctx, "k", "v", 0).Err())

	rp.Kill()
	require.Error(t, client.Ping(ctx).Err(), "a killed server does not answer")

	rp.Start()
	require.NoError(t, client.Ping(ctx).Err())
	require.Zero(t, client.Exists(ctx, "k").Val(), "a restarted server is empty")

	rp.Stop()
	require.Error(t, client.Ping(ctx).Err())
	rp.Start()
	require.NoError(t, client.Ping(ctx).Err())
}

func TestEventually(t *testing.T) {
	t.Parallel()
	t.Run("succeeds", func(t *testing.T) {
		t.Parallel()
		calls := 0
		testenv.Eventually(t, 5*time.Second, func() error {
			if calls++; calls < 3 {
				return errors.New("not yet")
			}
			return nil
		})
		require.Equal(t, 3, calls)
	})
	t.Run("fails with the last error", func(t *testing.T) {
		t.Parallel()
		calls := 0
		f := runFake(func(tb testing.TB) {
			testenv.Eventually(tb, 50*time.Millisecond, func() error {
				calls++
				return fmt.Errorf("attempt %d", calls)
			})
		})
		require.True(t, f.failed)
		require.Greater(t, calls, 1)
		require.Equal(t, []string{fmt.Sprintf("condition not met within 50ms: attempt %d", calls)}, f.messages)
	})
}

// connect opens a connection closed by the test's cleanup.
func connect(t *testing.T, dsn string) *pgx.Conn {
	t.Helper()
	conn, err := pgx.Connect(t.Context(), dsn)
	require.NoError(t, err)
	t.Cleanup(func() { _ = conn.Close(context.Background()) })
	return conn
}

func databaseExists(t *testing.T, admin *pgx.Conn, name string) bool {
	t.Helper()
	var exists bool
	require.NoError(t, admin.QueryRow(context.Background(),
		"SELECT EXISTS (SELECT 1 FROM pg_database WHERE datname = $1)", name).Scan(&exists))
	return exists
}

func scanAll(t *testing.T, client *redis.Client, prefix string) []string {
	t.Helper()
	var all []string
	iter := client.Scan(context.Background(), 0, prefix+"*", 1000).Iterator()
	for iter.Next(context.Background()) {
		all = append(all, iter.Val())
	}
	require.NoError(t, iter.Err())
	return all
}

// closedPort returns a local TCP port nothing listens on.
func closedPort(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	_, port, err := net.SplitHostPort(l.Addr().String())
	require.NoError(t, err)
	require.NoError(t, l.Close())
	return port
}

// fakeTB records failures of helpers under test instead of failing the real test.
type fakeTB struct {
	testing.TB // nil: a method not overridden here panics, flagging an unexpected call

	mu       sync.Mutex
	failed   bool
	messages []string
	cleanups []func()
}

func (f *fakeTB) Helper()      {}
func (f *fakeTB) Name() string { return "TestFake" }

func (f *fakeTB) Cleanup(fn func()) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.cleanups = append(f.cleanups, fn)
}

func (f *fakeTB) Errorf(format string, args ...any) { f.fail(fmt.Sprintf(format, args...)) }

func (f *fakeTB) Fatal(args ...any) {
	f.fail(fmt.Sprint(args...))
	runtime.Goexit()
}

func (f *fakeTB) Fatalf(format string, args ...any) {
	f.fail(fmt.Sprintf(format, args...))
	runtime.Goexit()
}

func (f *fakeTB) fail(msg string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.failed = true
	f.messages = append(f.messages, msg)
}

// runFake runs fn on its own goroutine, as the testing package runs a test, so Fatal can
// end it with runtime.Goexit; then it runs the registered cleanups.
func runFake(fn func(testing.TB)) *fakeTB {
	f := &fakeTB{}
	done := make(chan struct{})
	go func() {
		defer close(done)
		fn(f)
	}()
	<-done
	for i := len(f.cleanups) - 1; i >= 0; i-- {
		f.cleanups[i]()
	}
	return f
}
