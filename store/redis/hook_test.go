package redisstore_test

import (
	"sync"
	"testing"
	"time"

	goredis "github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/jq-dev/jq/internal/testenv"
	"github.com/jq-dev/jq/store"
	"github.com/jq-dev/jq/store/redis"
)

// TestHookNamesOperations: commands by name, the package's scripts by their names (EVALSHA, and
// EVAL after the server lost them), pipelines as one operation.
func TestHookNamesOperations(t *testing.T) {
	t.Parallel()
	client, prefix := testenv.NewRedis(t)
	var (
		mu  sync.Mutex
		ops = map[string]int{}
	)
	client.AddHook(redisstore.NewHook(func(op string, d time.Duration, err error) {
		require.GreaterOrEqual(t, d, time.Duration(0))
		mu.Lock()
		ops[op]++
		mu.Unlock()
	}))
	ctx := testCtx(t)
	d, err := redisstore.New(ctx, redisstore.Config{Client: client, KeyPrefix: prefix})
	require.NoError(t, err)
	q := "hook"
	ids := []string{"0b8f4a0e-4c1b-4a53-9a57-a1f1b1c2d3e4"}
	require.NoError(t, d.InflightAdd(ctx, store.InflightAddParams{Queue: q, WorkerID: "w", IDs: ids, LockTTL: time.Minute}))
	require.NoError(t, d.InflightRemove(ctx, store.InflightParams{Queue: q, WorkerID: "w", IDs: ids}))
	_, err = d.Counts(ctx, []string{q})
	require.NoError(t, err)
	require.ErrorIs(t, client.Get(ctx, prefix+":missing").Err(), goredis.Nil)

	mu.Lock()
	defer mu.Unlock()
	for _, op := range []string{"ping", "script", "inflight_add", "inflight_remove", "scan", "get"} {
		require.Positive(t, ops[op], "operation %q in %v", op, ops)
	}
	require.Zero(t, ops["evalsha"], "scripts are named")
}

func TestOperationOfEval(t *testing.T) {
	t.Parallel()
	for sha, name := range redisstore.ScriptNames {
		require.Equal(t, name, redisstore.Operation(goredis.NewCmd(t.Context(), "EVALSHA", sha, 0)))
	}
	require.Equal(t, "evalsha", redisstore.Operation(goredis.NewCmd(t.Context(), "evalsha", "deadbeef", 0)))
	require.Equal(t, "eval", redisstore.Operation(goredis.NewCmd(t.Context(), "eval", "return 1", 0)))
	require.Equal(t, "zadd", redisstore.Operation(goredis.NewCmd(t.Context(), "ZADD", "k", 1, "m")))
}
