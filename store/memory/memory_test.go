package memory_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/jq-dev/jq/store"
	"github.com/jq-dev/jq/store/memory"
	"github.com/jq-dev/jq/store/storetest"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

var (
	_ store.Dispatcher = (*memory.Dispatcher)(nil)
)

// newDispatcher returns a fresh Dispatcher on the real clock, closed when the test ends.
func newDispatcher(t *testing.T) store.Dispatcher {
	t.Helper()
	d := memory.NewDispatcher(memory.DispatcherConfig{})
	t.Cleanup(func() { require.NoError(t, d.Close()) })
	return d
}

// TestDispatcher runs the whole contract of store.Dispatcher (store/storetest).
func TestDispatcher(t *testing.T) {
	t.Parallel()
	storetest.ExerciseDispatcher(t, newDispatcher)
}

func BenchmarkDispatcher(b *testing.B) {
	storetest.BenchDispatcher(b, memory.NewDispatcher(memory.DispatcherConfig{}))
}

// fakeClock is a clock the test moves by hand.
type fakeClock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *fakeClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *fakeClock) Advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(d)
}

type bundle struct {
	d     *memory.Dispatcher
	clock *fakeClock
	ctx   context.Context
}

// setup marks the test parallel and returns a fresh Dispatcher on a fake clock.
func setup(t *testing.T) *bundle {
	t.Helper()
	t.Parallel()
	clock := &fakeClock{now: time.Date(2026, 11, 27, 12, 0, 0, 0, time.UTC)}
	d := memory.NewDispatcher(memory.DispatcherConfig{Clock: clock.Now})
	t.Cleanup(func() { require.NoError(t, d.Close()) })
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	return &bundle{d: d, clock: clock, ctx: ctx}
}

func (b *bundle) add(t *testing.T, worker string, ttl time.Duration, ids ...string) {
	t.Helper()
	require.NoError(t, b.d.InflightAdd(b.ctx, store.InflightAddParams{Queue: "q", WorkerID: worker, IDs: ids, LockTTL: ttl}))
}

func (b *bundle) remove(t *testing.T, worker string, ids ...string) {
	t.Helper()
	require.NoError(t, b.d.InflightRemove(b.ctx, store.InflightParams{Queue: "q", WorkerID: worker, IDs: ids}))
}

func (b *bundle) list(t *testing.T, worker string) []string {
	t.Helper()
	ids, err := b.d.InflightList(b.ctx, "q", worker)
	require.NoError(t, err)
	return ids
}

// A lock lasts LockTTL on the injected clock and then vanishes; the in-flight entry stays (entries
// wait for the reaper, as in Redis).
func TestLockExpires(t *testing.T) {
	b := setup(t)
	b.add(t, "w1", time.Minute, "a", "b")
	require.True(t, b.d.LockHeld("q", "a"))
	require.False(t, b.d.LockHeld("other", "a"), "locks are per queue")

	b.clock.Advance(time.Minute - time.Millisecond)
	require.True(t, b.d.LockHeld("q", "a"))
	b.clock.Advance(time.Millisecond)
	require.False(t, b.d.LockHeld("q", "a"))
	require.Equal(t, 1, b.d.Locks(), "the expired lock was dropped when looked at")
	require.Equal(t, []string{"a", "b"}, b.list(t, "w1"))
}

// Adding an id again renews its lock and keeps its place in the set.
func TestAddAgainRenewsLockInPlace(t *testing.T) {
	b := setup(t)
	b.add(t, "w1", time.Minute, "a", "b", "c")
	b.clock.Advance(50 * time.Second)
	b.add(t, "w1", time.Minute, "a")
	b.clock.Advance(50 * time.Second)
	require.True(t, b.d.LockHeld("q", "a"))
	require.False(t, b.d.LockHeld("q", "b"))
	require.Equal(t, []string{"a", "b", "c"}, b.list(t, "w1"))
}

// A removal releases the lock of an id the worker held, never of one it did not.
func TestRemoveReleasesOnlyHeldLocks(t *testing.T) {
	b := setup(t)
	b.add(t, "w1", time.Minute, "a")
	b.remove(t, "w2", "a")
	require.True(t, b.d.LockHeld("q", "a"), "w2 never held a")
	b.remove(t, "w1", "a")
	require.False(t, b.d.LockHeld("q", "a"))
	require.Zero(t, b.d.Locks())
}

// Expired locks nobody looks at are swept once the lock table has grown enough.
func TestExpiredLocksAreSwept(t *testing.T) {
	b := setup(t)
	ids := make([]string, memory.MinSweep-1)
	for i := range ids {
		ids[i] = fmt.Sprintf("job-%d", i)
	}
	b.add(t, "w1", time.Second, ids...)
	require.Equal(t, len(ids), b.d.Locks())
	b.clock.Advance(2 * time.Second)
	b.add(t, "w2", time.Minute, "fresh")
	require.Equal(t, 1, b.d.Locks(), "only the live lock is left")
	require.True(t, b.d.LockHeld("q", "fresh"))
	require.Len(t, b.list(t, "w1"), len(ids))
}

// A set goes with its last id and a queue with its last set.
func TestEmptySetsAreDeleted(t *testing.T) {
	b := setup(t)
	b.add(t, "w1", time.Minute, "a", "b")
	b.add(t, "w2", time.Minute, "c")
	sets, queues := b.d.Sets()
	require.Equal(t, 2, sets)
	require.Equal(t, 1, queues)
	b.remove(t, "w1", "a", "b")
	sets, _ = b.d.Sets()
	require.Equal(t, 1, sets)
	b.remove(t, "w2", "c")
	sets, queues = b.d.Sets()
	require.Zero(t, sets)
	require.Zero(t, queues)
	require.Zero(t, b.d.Locks())
}

func TestClosed(t *testing.T) {
	b := setup(t)
	b.add(t, "w1", time.Minute, "a")
	require.NoError(t, b.d.Ping(b.ctx))
	require.NoError(t, b.d.Close())
	require.NoError(t, b.d.Close(), "Close is idempotent")
	require.ErrorIs(t, b.d.Ping(b.ctx), memory.ErrClosed)
	require.ErrorIs(t, b.d.InflightAdd(b.ctx, store.InflightAddParams{Queue: "q", WorkerID: "w1", IDs: []string{"b"}, LockTTL: time.Minute}), memory.ErrClosed)
	require.ErrorIs(t, b.d.InflightRemove(b.ctx, store.InflightParams{Queue: "q", WorkerID: "w1", IDs: []string{"a"}}), memory.ErrClosed)
	_, err := b.d.InflightList(b.ctx, "q", "w1")
	require.ErrorIs(t, err, memory.ErrClosed)
	_, err = b.d.Counts(b.ctx, []string{"q"})
	require.ErrorIs(t, err, memory.ErrClosed)
}

// An ended context fails the call, as it would against Redis, and changes nothing.
func TestEndedContext(t *testing.T) {
	b := setup(t)
	ctx, cancel := context.WithCancel(b.ctx)
	cancel()
	require.ErrorIs(t, b.d.Ping(ctx), context.Canceled)
	require.ErrorIs(t, b.d.InflightAdd(ctx, store.InflightAddParams{Queue: "q", WorkerID: "w1", IDs: []string{"a"}, LockTTL: time.Minute}), context.Canceled)
	require.Empty(t, b.list(t, "w1"))
	_, err := b.d.InflightList(ctx, "q", "w1")
	require.ErrorIs(t, err, context.Canceled)
}
