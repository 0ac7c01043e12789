package storetest

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/jq-dev/jq/queue"
	"github.com/jq-dev/jq/store"
)

// NewDispatcherFunc returns the dispatcher under test. It may return the same dispatcher to every
// test (the suite isolates its data by unique queue names and worker ids, never by emptying
// anything) and is responsible for closing it.
type NewDispatcherFunc func(t *testing.T) store.Dispatcher

// heldLockTTL is long enough never to expire during a test.
const heldLockTTL = time.Minute

// ExerciseDispatcher runs the whole contract of store.Dispatcher against the dispatchers
// newDispatcher returns. Subtests run in parallel. A dispatcher's package calls it from exactly one
// test.
func ExerciseDispatcher(t *testing.T, newDispatcher NewDispatcherFunc) {
	t.Run("Ping", func(t *testing.T) {
		b := dispatcherSetup(t, newDispatcher)
		require.NoError(t, b.d.Ping(b.ctx))
	})
	t.Run("AddListRemove", func(t *testing.T) { testDispatcherAddListRemove(t, newDispatcher) })
	t.Run("AddTwice", func(t *testing.T) { testDispatcherAddTwice(t, newDispatcher) })
	t.Run("OldestFirst", func(t *testing.T) { testDispatcherOldestFirst(t, newDispatcher) })
	t.Run("Concurrent", func(t *testing.T) { testDispatcherConcurrent(t, newDispatcher) })
	t.Run("LargeBatches", func(t *testing.T) { testDispatcherLargeBatches(t, newDispatcher) })
	t.Run("WorkersAndQueuesAreSeparate", func(t *testing.T) { testDispatcherSeparate(t, newDispatcher) })
	t.Run("InvalidArguments", func(t *testing.T) { testDispatcherInvalid(t, newDispatcher) })
	t.Run("Counts", func(t *testing.T) { t.Parallel(); runDispatchCountsTests(t, newDispatcher) })
}

// dispatcherBundle is what a dispatcher test works with: the dispatcher, a bounded context and a queue name
// of its own.
type dispatcherBundle struct {
	t     *testing.T
	d     store.Dispatcher
	ctx   context.Context
	queue string
}

// dispatcherSetup marks the test parallel and returns a fresh bundle with an unused queue name.
func dispatcherSetup(t *testing.T, newDispatcher NewDispatcherFunc) *dispatcherBundle {
	t.Helper()
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
	t.Cleanup(cancel)
	return &dispatcherBundle{t: t, d: newDispatcher(t), ctx: ctx, queue: uniqueName("dq")}
}

// jobIDs returns n fresh job ids.
func jobIDs(n int) []string {
	ids := make([]string, n)
	for i := range ids {
		ids[i] = uuid.NewString()
	}
	return ids
}

func (b *dispatcherBundle) add(worker string, ids ...string) {
	b.t.Helper()
	require.NoError(b.t, b.d.InflightAdd(b.ctx, store.InflightAddParams{Queue: b.queue, WorkerID: worker, IDs: ids, LockTTL: heldLockTTL}))
}

func (b *dispatcherBundle) inflight(worker string) []string {
	b.t.Helper()
	ids, err := b.d.InflightList(b.ctx, b.queue, worker)
	require.NoError(b.t, err)
	return ids
}

func (b *dispatcherBundle) remove(worker string, ids ...string) {
	b.t.Helper()
	require.NoError(b.t, b.d.InflightRemove(b.ctx, store.InflightParams{Queue: b.queue, WorkerID: worker, IDs: ids}))
}

func testDispatcherAddListRemove(t *testing.T, newDispatcher NewDispatcherFunc) {
	b := dispatcherSetup(t, newDispatcher)
	require.Empty(t, b.inflight("w1"), "an unknown worker holds nothing")
	ids := jobIDs(10)
	b.add("w1", ids...)
	require.ElementsMatch(t, ids, b.inflight("w1"))

	b.remove("w1", ids[0], ids[5], uuid.NewString()) // an id not held is ignored
	require.ElementsMatch(t, slices.Concat(ids[1:5], ids[6:]), b.inflight("w1"))
	b.remove("w1")
	b.remove("w1", ids...)
	require.Empty(t, b.inflight("w1"))
	b.remove("w1", ids...) // nothing left: a no-op
}

// Adding an id again (a retried record) keeps one entry.
func testDispatcherAddTwice(t *testing.T, newDispatcher NewDispatcherFunc) {
	b := dispatcherSetup(t, newDispatcher)
	ids := jobIDs(3)
	b.add("w1", ids...)
	b.add("w1", ids[1])
	b.add("w1")
	require.ElementsMatch(t, ids, b.inflight("w1"))
}

// The set lists older assignments first (the reaper and the console read it that way).
func testDispatcherOldestFirst(t *testing.T, newDispatcher NewDispatcherFunc) {
	b := dispatcherSetup(t, newDispatcher)
	first, second := jobIDs(3), jobIDs(3)
	b.add("w1", first...)
	time.Sleep(3 * time.Millisecond) // scores are milliseconds
	b.add("w1", second...)
	got := b.inflight("w1")
	require.ElementsMatch(t, first, got[:3])
	require.ElementsMatch(t, second, got[3:])
}

// Workers adding and removing at once never lose or resurrect each other's entries.
func testDispatcherConcurrent(t *testing.T, newDispatcher NewDispatcherFunc) {
	b := dispatcherSetup(t, newDispatcher)
	var wg sync.WaitGroup
	kept := make([][]string, 8)
	for w := range 8 {
		wg.Go(func() {
			worker := fmt.Sprintf("w%d", w%2) // two workers, four writers each
			for range 20 {
				ids := jobIDs(5)
				if err := b.d.InflightAdd(b.ctx, store.InflightAddParams{Queue: b.queue, WorkerID: worker, IDs: ids, LockTTL: heldLockTTL}); err != nil {
					t.Error(err)
					return
				}
				if err := b.d.InflightRemove(b.ctx, store.InflightParams{Queue: b.queue, WorkerID: worker, IDs: ids[:3]}); err != nil {
					t.Error(err)
					return
				}
				kept[w] = append(kept[w], ids[3:]...)
			}
		})
	}
	wg.Wait()
	var want0, want1 []string
	for w, ids := range kept {
		if w%2 == 0 {
			want0 = append(want0, ids...)
		} else {
			want1 = append(want1, ids...)
		}
	}
	require.ElementsMatch(t, want0, b.inflight("w0"))
	require.ElementsMatch(t, want1, b.inflight("w1"))
}

// Batches far above one dispatch batch go through in one call each.
func testDispatcherLargeBatches(t *testing.T, newDispatcher NewDispatcherFunc) {
	b := dispatcherSetup(t, newDispatcher)
	ids := jobIDs(20000)
	b.add("w1", ids...)
	require.Len(t, b.inflight("w1"), len(ids))
	b.remove("w1", ids...)
	require.Empty(t, b.inflight("w1"))
}

func testDispatcherSeparate(t *testing.T, newDispatcher NewDispatcherFunc) {
	b := dispatcherSetup(t, newDispatcher)
	other := &dispatcherBundle{t: t, d: b.d, ctx: b.ctx, queue: b.queue + "x"} // a name that extends b's
	ids := jobIDs(4)
	b.add("w1", ids[:2]...)
	b.add("w2", ids[2:]...)
	other.add("w1", ids[0])
	require.ElementsMatch(t, ids[:2], b.inflight("w1"))
	require.ElementsMatch(t, ids[2:], b.inflight("w2"))
	require.Equal(t, ids[:1], other.inflight("w1"))
	b.remove("w2", ids[:2]...) // not w2's: nothing happens
	require.ElementsMatch(t, ids[:2], b.inflight("w1"))
	b.remove("w1", ids[0])
	require.Equal(t, ids[:1], other.inflight("w1"), "another queue's entry stays")
}

func testDispatcherInvalid(t *testing.T, newDispatcher NewDispatcherFunc) {
	b := dispatcherSetup(t, newDispatcher)
	id := uuid.NewString()
	for _, p := range []store.InflightAddParams{
		{Queue: "", WorkerID: "w", IDs: []string{id}, LockTTL: time.Second},
		{Queue: "Bad Queue", WorkerID: "w", IDs: []string{id}, LockTTL: time.Second},
		{Queue: b.queue, WorkerID: "", IDs: []string{id}, LockTTL: time.Second},
		{Queue: b.queue, WorkerID: "w", IDs: []string{id}, LockTTL: 0},
		{Queue: b.queue, WorkerID: "w", IDs: []string{id, ""}, LockTTL: time.Second},
	} {
		require.ErrorIs(t, b.d.InflightAdd(b.ctx, p), queue.ErrInvalidArgument, "%+v", p)
	}
	require.Empty(t, b.inflight("w"), "a refused batch records nothing")
	for _, p := range []store.InflightParams{
		{Queue: "", WorkerID: "w", IDs: []string{id}},
		{Queue: b.queue, WorkerID: "", IDs: []string{id}},
		{Queue: b.queue, WorkerID: "w", IDs: []string{""}},
	} {
		require.ErrorIs(t, b.d.InflightRemove(b.ctx, p), queue.ErrInvalidArgument, "%+v", p)
	}
	_, err := b.d.InflightList(b.ctx, "", "w")
	require.ErrorIs(t, err, queue.ErrInvalidArgument)
	_, err = b.d.InflightList(b.ctx, b.queue, "")
	require.ErrorIs(t, err, queue.ErrInvalidArgument)
}

// BenchDispatcher measures the Redis side of one dispatch of a 100-job batch — InflightAdd when
// the jobs are assigned, InflightRemove when they are reported — and reports jobs/s.
func BenchDispatcher(b *testing.B, d store.Dispatcher) {
	const batch = 100
	ctx := context.Background()
	q, worker := uniqueName("bench"), uniqueName("w")
	ids := jobIDs(batch)
	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		if err := d.InflightAdd(ctx, store.InflightAddParams{Queue: q, WorkerID: worker, IDs: ids, LockTTL: heldLockTTL}); err != nil {
			b.Fatal(err)
		}
		if err := d.InflightRemove(ctx, store.InflightParams{Queue: q, WorkerID: worker, IDs: ids}); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(b.N*batch)/b.Elapsed().Seconds(), "jobs/s")
}
