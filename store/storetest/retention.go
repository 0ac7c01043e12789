package storetest

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/jq-dev/jq/queue"
	"github.com/jq-dev/jq/store"
)

// retentionSuite runs the contract of store.RetentionStore. EventsPrune acts on every event of the
// store, so it takes an isolated one, and the subtests run one after the other, each starting with
// no prunable event. The store's store.OutboxStore publishes the events it prunes.
func retentionSuite(t *testing.T, f Factory) {
	s := f.IsolatedStore(t)
	rs := as[interface {
		store.OutboxStore
		store.RetentionStore
	}](t, s)
	b := &rtBundle{bundle: setupShared(t, s), rs: rs}
	for _, tc := range []struct {
		name string
		fn   func(*rtBundle)
	}{
		{"DeletesOnlyExpiredPublished", testPruneExpiredPublished},
		{"NeverDeletesUnpublished", testPruneKeepsUnpublished},
		{"BoundedBatchesOldestFirst", testPruneOldestFirst},
		{"ConcurrentPassesAreDisjoint", testPruneConcurrent},
		{"InvalidArguments", testPruneInvalid},
		// Last: it deletes the unpublished events the other subtests leave.
		{"UnpublishedExpireWithKafkaOff", testPruneUnpublished},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := &rtBundle{bundle: b.with(t), rs: rs}
			c.pruneAll()
			tc.fn(c)
		})
	}
}

// setupShared is a bundle over s with a queue of its own, for suites whose subtests share a store.
func setupShared(t *testing.T, s store.Store) *bundle {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
	t.Cleanup(cancel)
	b := &bundle{t: t, s: s, ctx: ctx}
	b.queue = b.newQueue(store.QueueCreateParams{}).Name
	return b
}

type rtBundle struct {
	*bundle
	rs interface {
		store.OutboxStore
		store.RetentionStore
	}
}

// expiring is the retention of these tests: any event is older than that after a moment.
const expiring = time.Millisecond

func (b *rtBundle) prune(olderThan time.Duration, limit int) int64 {
	b.t.Helper()
	n, err := b.rs.EventsPrune(b.ctx, store.EventsPruneParams{OlderThan: olderThan, Limit: limit})
	require.NoError(b.t, err)
	return n
}

// pruneAll publishes every event and deletes them all, so a test starts clean.
func (b *rtBundle) pruneAll() {
	b.t.Helper()
	b.publish()
	time.Sleep(5 * expiring) // every event is now past the retention
	b.eventually(func() bool { return b.prune(expiring, store.MaxEventsPruneBatch) == 0 })
}

// eventually polls cond, because an event must age past the retention before it can go.
func (b *rtBundle) eventually(cond func() bool) {
	b.t.Helper()
	require.Eventually(b.t, cond, 10*time.Second, 5*time.Millisecond)
}

// publish publishes every event written so far (the relay's cursor moves past them).
func (b *rtBundle) publish() {
	b.t.Helper()
	b.eventually(func() bool {
		c, err := b.rs.EventsClaim(b.ctx, store.EventsClaimParams{Limit: store.MaxOutboxBatch, Lease: time.Minute})
		require.NoError(b.t, err)
		require.NoError(b.t, b.rs.EventsMarkPublished(b.ctx, c))
		bl, err := b.rs.OutboxBacklog(b.ctx)
		require.NoError(b.t, err)
		return bl.Events == 0
	})
}

func seqs(evs []queue.Event) []int64 {
	out := make([]int64, len(evs))
	for i, e := range evs {
		out[i] = e.Seq
	}
	return out
}

// Published events younger than the retention stay; older ones go; the job itself stays, and its
// next event continues the numbering.
func testPruneExpiredPublished(b *rtBundle) {
	t := b.t
	j := b.insertOne(b.job("retention"))
	j = b.move(j, queue.StateAssigned, store.JobTransitionParams{Reason: queue.ReasonAssigned})
	b.publish()
	require.Zero(t, b.prune(time.Hour, 100), "events younger than the retention are kept")
	require.Equal(t, []int64{1, 2}, seqs(b.events(j.ID)))

	var deleted int64
	b.eventually(func() bool { deleted += b.prune(expiring, 100); return deleted == 2 })
	require.Empty(t, b.events(j.ID))
	require.Equal(t, queue.StateAssigned, b.get(j.ID).State, "the job is not touched")

	b.move(j, queue.StateRunning, store.JobTransitionParams{Reason: queue.ReasonAcked})
	require.Equal(t, []int64{3}, seqs(b.events(j.ID)))
}

// An unpublished event is still owed to Kafka: no age makes it prunable, even when the job's
// earlier events are published and go.
func testPruneKeepsUnpublished(b *rtBundle) {
	t := b.t
	mixed := b.insertOne(b.job("retention"))
	b.publish()
	kept := b.insertOne(b.job("retention"))
	b.move(mixed, queue.StateAssigned, store.JobTransitionParams{Reason: queue.ReasonAssigned})

	b.eventually(func() bool { return b.prune(expiring, 100) == 1 })
	time.Sleep(5 * expiring) // every remaining event is now well past the retention
	require.Zero(t, b.prune(expiring, 100))
	require.Equal(t, []int64{1}, seqs(b.events(kept.ID)))
	require.Equal(t, []int64{2}, seqs(b.events(mixed.ID)))
	b.publish() // leave nothing unpublished to the next test
}

// A batch deletes at most its limit, oldest events first.
func testPruneOldestFirst(b *rtBundle) {
	t := b.t
	var jobs []string
	for range 3 {
		jobs = append(jobs, b.insertOne(b.job("retention")).ID)
	}
	b.publish()
	b.eventually(func() bool { return b.prune(expiring, 1) == 1 })
	require.Empty(t, b.events(jobs[0]))
	require.Len(t, b.events(jobs[1]), 1)
	require.Len(t, b.events(jobs[2]), 1)
	require.Equal(t, int64(2), b.prune(expiring, 10))
	require.Empty(t, b.events(jobs[2]))
}

// Passes of several servers at once delete every expired event exactly once between them.
func testPruneConcurrent(b *rtBundle) {
	t := b.t
	var ps []store.JobInsertParams
	for range 200 {
		ps = append(ps, b.job("retention"))
	}
	var jobs []string
	for _, r := range b.insert(ps...) {
		jobs = append(jobs, r.Job.ID)
	}
	b.publish()
	time.Sleep(5 * expiring) // every event is now past the retention

	var (
		total atomic.Int64
		wg    sync.WaitGroup
	)
	for range 4 {
		wg.Go(func() {
			for {
				n, err := b.rs.EventsPrune(b.ctx, store.EventsPruneParams{OlderThan: expiring, Limit: 7})
				if err != nil {
					t.Error(err)
					return
				}
				if n == 0 {
					return
				}
				total.Add(n)
			}
		})
	}
	wg.Wait()
	require.Equal(t, int64(len(jobs)), total.Load())
}

func testPruneInvalid(b *rtBundle) {
	for _, p := range []store.EventsPruneParams{
		{OlderThan: time.Hour, Limit: 0},
		{OlderThan: time.Hour, Limit: store.MaxEventsPruneBatch + 1},
		{OlderThan: 0, Limit: 1},
		{OlderThan: -time.Hour, Limit: 1},
		{OlderThan: time.Microsecond, Limit: 1},
	} {
		_, err := b.rs.EventsPrune(b.ctx, p)
		require.ErrorIs(b.t, err, queue.ErrInvalidArgument, "%+v", p)
	}
}

// With Kafka off (Unpublished) expired unpublished events go too, published ones first, in batches
// bounded by the limit; without it they stay (NeverDeletesUnpublished).
func testPruneUnpublished(b *rtBundle) {
	t := b.t
	pruneU := func(olderThan time.Duration, limit int) int64 {
		t.Helper()
		n, err := b.rs.EventsPrune(b.ctx, store.EventsPruneParams{OlderThan: olderThan, Limit: limit, Unpublished: true})
		require.NoError(t, err)
		require.LessOrEqual(t, n, int64(limit))
		return n
	}
	b.eventually(func() bool { return pruneU(expiring, store.MaxEventsPruneBatch) == 0 })

	var ids []string
	for range 3 {
		ids = append(ids, b.insertOne(b.job("kafka-off")).ID)
	}
	require.Zero(t, pruneU(time.Hour, 100), "events younger than the retention are kept")
	for _, id := range ids {
		require.Len(t, b.events(id), 1)
	}
	var total int64
	b.eventually(func() bool {
		total += pruneU(expiring, 2)
		return total == 3
	})
	for _, id := range ids {
		require.Empty(t, b.events(id), "job %s: its unpublished event expired", id)
	}
	require.Zero(t, pruneU(expiring, 100))
}
