package redisstore_test

import (
	"context"
	"testing"
	"time"

	goredis "github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/jq-dev/jq/internal/testenv"
	"github.com/jq-dev/jq/store"
	"github.com/jq-dev/jq/store/redis"
	"github.com/jq-dev/jq/store/storetest"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

// newDispatcher returns a Dispatcher on the shared Redis under a key prefix of the test's own,
// whose keys are deleted when the test ends.
func newDispatcher(t *testing.T) store.Dispatcher {
	t.Helper()
	client, prefix := testenv.NewRedis(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	d, err := redisstore.New(ctx, redisstore.Config{Client: client, KeyPrefix: prefix})
	require.NoError(t, err)
	return d
}

// TestDispatcher runs the whole contract of store.Dispatcher (store/storetest).
func TestDispatcher(t *testing.T) {
	t.Parallel()
	storetest.ExerciseDispatcher(t, newDispatcher)
}

func BenchmarkDispatcher(b *testing.B) {
	client, prefix := testenv.NewRedis(b)
	d, err := redisstore.New(context.Background(), redisstore.Config{Client: client, KeyPrefix: prefix})
	require.NoError(b, err)
	storetest.BenchDispatcher(b, d)
}

// privateClient returns a client of the private server, closed when the test ends.
func privateClient(t *testing.T, srv *testenv.RedisProcess) *goredis.Client {
	t.Helper()
	// One dial per attempt instead of five keeps the calls made while the server is down short;
	// command retries stay at go-redis's default, as in production.
	client := goredis.NewClient(&goredis.Options{Addr: srv.Addr(), ContextTimeoutEnabled: true, DialerRetries: 1})
	t.Cleanup(func() { require.NoError(t, client.Close()) })
	return client
}

func testCtx(t *testing.T) context.Context {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	return ctx
}

func dueIDs(n int) []string {
	ids := make([]string, n)
	for i := range ids {
		ids[i] = "job-" + string(rune('a'+i))
	}
	return ids
}

func TestNewChecksConfig(t *testing.T) {
	t.Parallel()
	ctx := testCtx(t)
	_, err := redisstore.New(ctx, redisstore.Config{})
	require.ErrorContains(t, err, "Client is nil")

	client, prefix := testenv.NewRedis(t)
	_, err = redisstore.New(ctx, redisstore.Config{Client: client, KeyPrefix: prefix + "{x}"})
	require.ErrorContains(t, err, "must not contain")

	d, err := redisstore.New(ctx, redisstore.Config{Client: client, KeyPrefix: prefix})
	require.NoError(t, err)
	require.NoError(t, d.Ping(ctx))
}

func TestNewFailsWhenRedisIsDown(t *testing.T) {
	t.Parallel()
	srv := testenv.StartRedis(t)
	client := privateClient(t, srv)
	srv.Kill()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	_, err := redisstore.New(ctx, redisstore.Config{Client: client})
	require.ErrorContains(t, err, "redis: ping")
}

// Open contacts nothing: a server down at start makes Prepare fail with an error Unreachable
// accepts, and once the server is up the Dispatcher works without Prepare (the scripts by EVAL).
// A server that refuses the client is not Unreachable: that needs an operator.
func TestOpenWhileRedisIsDown(t *testing.T) {
	t.Parallel()
	ctx := testCtx(t)
	srv := testenv.StartRedis(t)
	client := privateClient(t, srv)
	srv.Stop()
	_, err := redisstore.Open(redisstore.Config{Client: client, KeyPrefix: "a{b}"})
	require.ErrorContains(t, err, "must not contain")
	require.False(t, redisstore.Unreachable(err))

	d, err := redisstore.Open(redisstore.Config{Client: client})
	require.NoError(t, err)
	err = d.Prepare(ctx)
	require.ErrorContains(t, err, "redis: ping")
	require.True(t, redisstore.Unreachable(err), "%v", err)

	srv.Start()
	ids := dueIDs(3)
	require.NoError(t, d.InflightAdd(ctx, store.InflightAddParams{Queue: "q", WorkerID: "w", IDs: ids, LockTTL: time.Minute}))
	got, err := d.InflightList(ctx, "q", "w")
	require.NoError(t, err)
	require.ElementsMatch(t, ids, got)
	require.NoError(t, d.Prepare(ctx))

	refused := goredis.NewClient(&goredis.Options{Addr: srv.Addr(), Username: "jq-no-such-user", Password: "x", ContextTimeoutEnabled: true})
	t.Cleanup(func() { require.NoError(t, refused.Close()) })
	d, err = redisstore.Open(redisstore.Config{Client: refused})
	require.NoError(t, err)
	err = d.Prepare(ctx)
	require.Error(t, err)
	require.False(t, redisstore.Unreachable(err), "%v", err)
}

// The scripts are loaded by New and run by EVALSHA; a server that has lost them (SCRIPT FLUSH,
// restart, failover) gets them again by EVAL. Done on a private server: flushing the shared one
// would pull scripts from under other tests.
func TestScriptsSurviveScriptFlush(t *testing.T) {
	t.Parallel()
	ctx := testCtx(t)
	srv := testenv.StartRedis(t)
	client := privateClient(t, srv)
	d, err := redisstore.New(ctx, redisstore.Config{Client: client})
	require.NoError(t, err)

	exists := func() []bool {
		t.Helper()
		got, err := client.ScriptExists(ctx, redisstore.ScriptSHAs()...).Result()
		require.NoError(t, err)
		return got
	}
	require.Equal(t, []bool{true, true}, exists(), "New loads every script")

	round := func() {
		t.Helper()
		ids := dueIDs(5)
		require.NoError(t, d.InflightAdd(ctx, store.InflightAddParams{Queue: "q", WorkerID: "w", IDs: ids, LockTTL: time.Minute}))
		got, err := d.InflightList(ctx, "q", "w")
		require.NoError(t, err)
		require.ElementsMatch(t, ids, got)
		require.NoError(t, d.InflightRemove(ctx, store.InflightParams{Queue: "q", WorkerID: "w", IDs: ids}))
	}
	round()
	require.NoError(t, client.ScriptFlush(ctx).Err())
	require.Equal(t, []bool{false, false}, exists())
	round()
}

// Redis dies and comes back empty: while it is down every method returns an error (no panic, no
// hang past the context); afterwards every method works again on the empty server.
func TestRedisRestart(t *testing.T) {
	t.Parallel()
	ctx := testCtx(t)
	srv := testenv.StartRedis(t)
	client := privateClient(t, srv)
	d, err := redisstore.New(ctx, redisstore.Config{Client: client})
	require.NoError(t, err)
	ids := dueIDs(3)
	require.NoError(t, d.InflightAdd(ctx, store.InflightAddParams{Queue: "q", WorkerID: "w", IDs: ids, LockTTL: time.Minute}))

	srv.Kill()
	down, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	require.Error(t, d.Ping(down))
	require.Error(t, d.InflightAdd(down, store.InflightAddParams{Queue: "q", WorkerID: "w", IDs: ids, LockTTL: time.Minute}))
	_, err = d.InflightList(down, "q", "w")
	require.Error(t, err)
	require.Error(t, d.InflightRemove(down, store.InflightParams{Queue: "q", WorkerID: "w", IDs: ids}))

	srv.Start()
	testenv.Eventually(t, 10*time.Second, func() error { return d.Ping(ctx) })
	// The data is gone: nothing in flight, no locks; removing a vanished entry is fine.
	inflight, err := d.InflightList(ctx, "q", "w")
	require.NoError(t, err)
	require.Empty(t, inflight)
	require.NoError(t, d.InflightRemove(ctx, store.InflightParams{Queue: "q", WorkerID: "w", IDs: ids}))
	require.NoError(t, d.InflightAdd(ctx, store.InflightAddParams{Queue: "q", WorkerID: "w", IDs: ids, LockTTL: time.Minute}))
	inflight, err = d.InflightList(ctx, "q", "w")
	require.NoError(t, err)
	require.ElementsMatch(t, ids, inflight)
}

// A deadline that passes while Redis does not answer surfaces as context.DeadlineExceeded, even
// though go-redis sees a socket timeout. CLIENT PAUSE holds every command on the private server.
func TestDeadlineExceeded(t *testing.T) {
	t.Parallel()
	ctx := testCtx(t)
	srv := testenv.StartRedis(t)
	client := privateClient(t, srv)
	d, err := redisstore.New(ctx, redisstore.Config{Client: client})
	require.NoError(t, err)

	expired, cancel := context.WithDeadline(ctx, time.Now().Add(-time.Second))
	defer cancel()
	_, err = d.InflightList(expired, "q", "w")
	require.ErrorIs(t, err, context.DeadlineExceeded)

	admin := privateClient(t, srv)
	calls := map[string]func(context.Context) error{
		"ping": d.Ping,
		"inflight add": func(ctx context.Context) error {
			return d.InflightAdd(ctx, store.InflightAddParams{Queue: "q", WorkerID: "w", IDs: dueIDs(2), LockTTL: time.Minute})
		},
		"inflight list": func(ctx context.Context) error { _, err := d.InflightList(ctx, "q", "w"); return err },
		"inflight remove": func(ctx context.Context) error {
			return d.InflightRemove(ctx, store.InflightParams{Queue: "q", WorkerID: "w", IDs: []string{"x"}})
		},
	}
	for name, call := range calls {
		// A pause cannot be lifted early (CLIENT UNPAUSE is held too), so each lasts well past the
		// call's deadline and no longer; the next PAUSE waits for the previous one to end. The
		// bound below lies between the two: a call that waited for the pause takes 1.4 s more than
		// its deadline, one that kept it is given 1.1 s for a loaded machine to schedule it.
		require.NoError(t, admin.Do(ctx, "CLIENT", "PAUSE", "1500", "ALL").Err())
		short, cancel := context.WithTimeout(ctx, 100*time.Millisecond)
		began := time.Now()
		err := call(short)
		cancel()
		require.ErrorIs(t, err, context.DeadlineExceeded, name)
		require.Less(t, time.Since(began), 1200*time.Millisecond, "%s: the deadline bounds the call", name)
	}
}
