package storetest

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/jq-dev/jq/queue"
	"github.com/jq-dev/jq/store"
)

// RunOutboxStore runs the contract of store.OutboxStore. Its statements act on every event of the
// store, so newStore must return a store of its own (a private database), and the subtests run one
// after the other, each starting with nothing unpublished.
func RunOutboxStore[S interface {
	store.Store
	store.OutboxStore
}](t *testing.T, newStore func(t *testing.T) S) {
	s := newStore(t)
	ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
	t.Cleanup(cancel)
	b := &obBundle{bundle: &bundle{t: t, s: s, ctx: ctx}, os: s, claimed: new([]int64)}
	b.queue = b.newQueue(store.QueueCreateParams{}).Name
	for _, tc := range []struct {
		name string
		fn   func(*obBundle)
	}{
		{"ClaimLeasesInIDOrder", testOutboxClaim},
		{"MarkPublished", testOutboxMarkPublished},
		{"LeaseExpires", testOutboxLeaseExpires},
		{"Release", testOutboxRelease},
		{"JobOrderAcrossClaims", testOutboxJobOrder},
		{"ConcurrentClaimsAreDisjoint", testOutboxConcurrent},
		{"Backlog", testOutboxBacklog},
		{"InvalidArguments", testOutboxInvalid},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := &obBundle{bundle: b.with(t), os: s, claimed: b.claimed}
			c.drain()
			tc.fn(c)
		})
	}
}

type obBundle struct {
	*bundle
	os      store.OutboxStore
	claimed *[]int64 // every id claimed so far, so drain need not wait for leases to expire
}

const outboxLease = time.Minute

func (b *obBundle) claim(limit int, lease time.Duration) []store.OutboxEvent {
	b.t.Helper()
	evs, err := b.os.EventsClaim(b.ctx, store.EventsClaimParams{Limit: limit, Lease: lease})
	require.NoError(b.t, err)
	*b.claimed = append(*b.claimed, outboxIDs(evs)...)
	return evs
}

// drain publishes everything unpublished.
func (b *obBundle) drain() {
	b.t.Helper()
	require.NoError(b.t, b.os.EventsMarkPublished(b.ctx, *b.claimed))
	require.Eventually(b.t, func() bool {
		evs := b.claim(store.MaxOutboxBatch, outboxLease)
		require.NoError(b.t, b.os.EventsMarkPublished(b.ctx, outboxIDs(evs)))
		bl, err := b.os.OutboxBacklog(b.ctx)
		require.NoError(b.t, err)
		return bl.Events == 0
	}, 10*time.Second, 20*time.Millisecond, "the outbox does not drain")
}

func outboxIDs(evs []store.OutboxEvent) []int64 {
	ids := make([]int64, len(evs))
	for i, e := range evs {
		ids[i] = e.ID
	}
	return ids
}

type jobSeq struct {
	job string
	seq int64
}

func keys(evs []store.OutboxEvent) []jobSeq {
	out := make([]jobSeq, len(evs))
	for i, e := range evs {
		out[i] = jobSeq{e.JobID, e.Seq}
	}
	return out
}

// Events come back in id order with every field of the job_events row and the job's trace context.
func testOutboxClaim(b *obBundle) {
	t := b.t
	p := b.job("outbox")
	p.TraceContext = map[string]string{"traceparent": "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"}
	j1 := b.insertOne(p)
	j2 := b.insertOne(b.job("outbox"))
	j1 = b.move(j1, queue.StateAssigned, store.JobTransitionParams{Reason: store.ReasonAssigned, WorkerID: "w-outbox"})

	evs := b.claim(100, outboxLease)
	require.Equal(t, []jobSeq{{j1.ID, 1}, {j2.ID, 1}, {j1.ID, 2}}, keys(evs))
	for i := 1; i < len(evs); i++ {
		require.Less(t, evs[i-1].ID, evs[i].ID)
	}
	want := b.events(j1.ID)
	require.Equal(t, want[0], evs[0].Event)
	require.Equal(t, want[1], evs[2].Event)
	require.Equal(t, queue.StatePending, evs[0].To)
	require.Equal(t, queue.State(""), evs[0].From)
	require.Equal(t, "w-outbox", evs[2].WorkerID)
	require.Equal(t, j1.Attempt, evs[2].Attempt)
	require.Equal(t, p.TraceContext, evs[0].TraceContext)
	require.Empty(t, evs[1].TraceContext)

	require.Empty(t, b.claim(100, outboxLease), "leased events are not claimed again")
}

func testOutboxMarkPublished(b *obBundle) {
	t := b.t
	b.insert(b.job("outbox"), b.job("outbox"))
	evs := b.claim(100, outboxLease)
	require.Len(t, evs, 2)
	require.NoError(t, b.os.EventsMarkPublished(b.ctx, outboxIDs(evs)))
	require.NoError(t, b.os.EventsMarkPublished(b.ctx, outboxIDs(evs)), "idempotent")
	require.NoError(t, b.os.EventsMarkPublished(b.ctx, []int64{-1}), "unknown ids are ignored")
	require.NoError(t, b.os.EventsMarkPublished(b.ctx, nil))
	bl, err := b.os.OutboxBacklog(b.ctx)
	require.NoError(t, err)
	require.Zero(t, bl.Events)
	require.Empty(t, b.claim(100, time.Millisecond), "published events are never claimed, lease or not")
}

// A relay that dies mid-batch leaves its lease; once it expires the events are claimed again, with
// the same sequence numbers.
func testOutboxLeaseExpires(b *obBundle) {
	t := b.t
	b.insertOne(b.job("outbox"))
	first := b.claim(100, 200*time.Millisecond)
	require.Len(t, first, 1)
	require.Empty(t, b.claim(100, outboxLease))
	var again []store.OutboxEvent
	require.Eventually(t, func() bool {
		again = b.claim(100, outboxLease)
		return len(again) > 0
	}, 5*time.Second, 20*time.Millisecond)
	require.Equal(t, first[0].ID, again[0].ID)
	require.Equal(t, first[0].Event, again[0].Event)
}

func testOutboxRelease(b *obBundle) {
	t := b.t
	b.insert(b.job("outbox"), b.job("outbox"))
	evs := b.claim(100, outboxLease)
	require.Len(t, evs, 2)
	require.NoError(t, b.os.EventsRelease(b.ctx, outboxIDs(evs[:1])))
	require.NoError(t, b.os.EventsRelease(b.ctx, nil))
	again := b.claim(100, outboxLease)
	require.Equal(t, outboxIDs(evs[:1]), outboxIDs(again), "only the released event is claimable")
	// Releasing a published event changes nothing.
	require.NoError(t, b.os.EventsMarkPublished(b.ctx, outboxIDs(again)))
	require.NoError(t, b.os.EventsRelease(b.ctx, outboxIDs(again)))
	require.Empty(t, b.claim(100, outboxLease))
}

// While one relay holds a job's earlier event, no other claim takes the job's later events: they
// could overtake it in the job's partition.
func testOutboxJobOrder(b *obBundle) {
	t := b.t
	a := b.insertOne(b.job("outbox"))
	a = b.advance(a, queue.StateAssigned, queue.StateRunning) // seq 1..3
	other := b.insertOne(b.job("outbox"))                     // after a's seq 3

	first := b.claim(1, outboxLease)
	require.Equal(t, []jobSeq{{a.ID, 1}}, keys(first))
	second := b.claim(100, outboxLease)
	require.Equal(t, []jobSeq{{other.ID, 1}}, keys(second), "a's later events wait for its first")

	require.NoError(t, b.os.EventsMarkPublished(b.ctx, outboxIDs(first)))
	third := b.claim(100, outboxLease)
	require.Equal(t, []jobSeq{{a.ID, 2}, {a.ID, 3}}, keys(third))
}

// Relays claiming at once never get the same event and together get every event.
func testOutboxConcurrent(b *obBundle) {
	t := b.t
	var ps []store.JobInsertParams
	for range 300 {
		ps = append(ps, b.job("outbox"))
	}
	res := b.insert(ps...)
	var (
		mu   sync.Mutex
		seen = map[int64]int{}
		wg   sync.WaitGroup
	)
	for range 6 {
		wg.Go(func() {
			for {
				evs, err := b.os.EventsClaim(b.ctx, store.EventsClaimParams{Limit: 7, Lease: outboxLease})
				if err != nil {
					t.Error(err)
					return
				}
				if len(evs) == 0 {
					return
				}
				mu.Lock()
				for _, e := range evs {
					seen[e.ID]++
				}
				*b.claimed = append(*b.claimed, outboxIDs(evs)...)
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	require.Len(t, seen, len(res))
	for id, n := range seen {
		require.Equal(t, 1, n, "event %d claimed %d times", id, n)
	}
}

func testOutboxBacklog(b *obBundle) {
	t := b.t
	bl, err := b.os.OutboxBacklog(b.ctx)
	require.NoError(t, err)
	require.Equal(t, store.OutboxBacklog{}, bl)

	j := b.insertOne(b.job("outbox"))
	b.advance(j, queue.StateAssigned)
	b.insertOne(b.job("outbox"))
	time.Sleep(20 * time.Millisecond) // the age must be measurably positive
	bl, err = b.os.OutboxBacklog(b.ctx)
	require.NoError(t, err)
	require.Equal(t, int64(3), bl.Events)
	require.GreaterOrEqual(t, bl.OldestAge, 20*time.Millisecond)
	require.Less(t, bl.OldestAge, time.Minute)

	claimed := b.claim(100, outboxLease)
	bl, err = b.os.OutboxBacklog(b.ctx)
	require.NoError(t, err)
	require.Equal(t, int64(3), bl.Events, "claimed but unpublished events are backlog")
	require.NoError(t, b.os.EventsMarkPublished(b.ctx, outboxIDs(claimed[:1])))
	bl, err = b.os.OutboxBacklog(b.ctx)
	require.NoError(t, err)
	require.Equal(t, int64(2), bl.Events)
}

func testOutboxInvalid(b *obBundle) {
	for _, p := range []store.EventsClaimParams{
		{Limit: 0, Lease: time.Second},
		{Limit: store.MaxOutboxBatch + 1, Lease: time.Second},
		{Limit: 1, Lease: 0},
		{Limit: 1, Lease: time.Microsecond},
	} {
		_, err := b.os.EventsClaim(b.ctx, p)
		require.ErrorIs(b.t, err, queue.ErrInvalidArgument, "%+v", p)
	}
}
