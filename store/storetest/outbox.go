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

// outboxSuite runs the contract of store.OutboxStore. Its statements act on every event of the
// store, so it takes an isolated one, and the subtests run one after the other, each starting with
// nothing unpublished.
func outboxSuite(t *testing.T, f Factory) {
	s := f.IsolatedStore(t)
	ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
	t.Cleanup(cancel)
	b := &obBundle{bundle: &bundle{t: t, s: s, ctx: ctx}, os: as[store.OutboxStore](t, s), last: new(store.OutboxClaim)}
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
		{"ConcurrentRelaysPublishEachEventOnce", testOutboxConcurrent},
		{"Backlog", testOutboxBacklog},
		{"InvalidArguments", testOutboxInvalid},
		{"ReportWithImplicitAck", testOutboxImplicitAck},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := &obBundle{bundle: b.with(t), os: b.os, last: b.last}
			c.drain()
			tc.fn(c)
		})
	}
}

type obBundle struct {
	*bundle
	os   store.OutboxStore
	last *store.OutboxClaim // the latest claim, so drain need not wait for its lease to expire
}

const outboxLease = time.Minute

func (b *obBundle) claimFull(limit int, lease time.Duration) store.OutboxClaim {
	b.t.Helper()
	c, err := b.os.EventsClaim(b.ctx, store.EventsClaimParams{Limit: limit, Lease: lease})
	require.NoError(b.t, err)
	if c.Lease != 0 {
		*b.last = c
	}
	return c
}

// claim is one claim. It may find nothing while a transaction older than the newest events runs
// anywhere in the cluster (the horizon is not final yet): where events are expected, use next.
func (b *obBundle) claim(limit int, lease time.Duration) []store.OutboxEvent {
	b.t.Helper()
	return b.claimFull(limit, lease).Events
}

// next claims until a claim returns events.
func (b *obBundle) next(limit int, lease time.Duration) store.OutboxClaim {
	b.t.Helper()
	var c store.OutboxClaim
	require.Eventually(b.t, func() bool {
		c = b.claimFull(limit, lease)
		return len(c.Events) > 0
	}, 10*time.Second, 5*time.Millisecond, "no events to claim")
	return c
}

// mark publishes the latest claim.
func (b *obBundle) mark() {
	b.t.Helper()
	require.NoError(b.t, b.os.EventsMarkPublished(b.ctx, *b.last))
}

// drain publishes everything unpublished.
func (b *obBundle) drain() {
	b.t.Helper()
	require.NoError(b.t, b.os.EventsRelease(b.ctx, *b.last))
	require.Eventually(b.t, func() bool {
		c := b.claimFull(store.MaxOutboxBatch, outboxLease)
		require.NoError(b.t, b.os.EventsMarkPublished(b.ctx, c))
		bl, err := b.os.OutboxBacklog(b.ctx)
		require.NoError(b.t, err)
		return bl.Events == 0
	}, 10*time.Second, 20*time.Millisecond, "the outbox does not drain")
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
	j1 = b.move(j1, queue.StateAssigned, store.JobTransitionParams{Reason: queue.ReasonAssigned, WorkerID: "w-outbox"})

	evs := b.next(100, outboxLease).Events
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

	require.Empty(t, b.claim(100, outboxLease), "a live lease keeps every other claim off")
}

func testOutboxMarkPublished(b *obBundle) {
	t := b.t
	b.insert(b.job("outbox"), b.job("outbox"))
	c := b.next(100, outboxLease)
	require.Len(t, c.Events, 2)
	require.NoError(t, b.os.EventsMarkPublished(b.ctx, c))
	require.ErrorIs(t, b.os.EventsMarkPublished(b.ctx, c), queue.ErrStaleAttempt, "a claim is marked once")
	require.NoError(t, b.os.EventsMarkPublished(b.ctx, store.OutboxClaim{}), "an empty claim is a no-op")
	bl, err := b.os.OutboxBacklog(b.ctx)
	require.NoError(t, err)
	require.Zero(t, bl.Events)
	require.Empty(t, b.claim(100, time.Millisecond), "published events are never claimed again")

	// Later events come after the cursor.
	j := b.insertOne(b.job("outbox"))
	evs := b.next(100, outboxLease).Events
	require.Equal(t, []jobSeq{{j.ID, 1}}, keys(evs))
	b.mark()
}

// A relay that dies mid-batch leaves its lease; once it expires the events are claimed again, with
// the same sequence numbers, and the dead relay's late mark changes nothing.
func testOutboxLeaseExpires(b *obBundle) {
	t := b.t
	b.insertOne(b.job("outbox"))
	first := b.next(100, 200*time.Millisecond)
	require.Len(t, first.Events, 1)
	require.Empty(t, b.claim(100, outboxLease))
	var again []store.OutboxEvent
	require.Eventually(t, func() bool {
		again = b.claim(100, outboxLease)
		return len(again) > 0
	}, 5*time.Second, 20*time.Millisecond)
	require.Equal(t, first.Events[0].ID, again[0].ID)
	require.Equal(t, first.Events[0].Event, again[0].Event)
	require.ErrorIs(t, b.os.EventsMarkPublished(b.ctx, first), queue.ErrStaleAttempt)
	bl, err := b.os.OutboxBacklog(b.ctx)
	require.NoError(t, err)
	require.Equal(t, int64(1), bl.Events, "the expired claim's mark did not move the cursor")
	b.mark()
}

func testOutboxRelease(b *obBundle) {
	t := b.t
	b.insert(b.job("outbox"), b.job("outbox"))
	c := b.next(100, outboxLease)
	require.Len(t, c.Events, 2)
	require.NoError(t, b.os.EventsRelease(b.ctx, c))
	require.NoError(t, b.os.EventsRelease(b.ctx, store.OutboxClaim{}))
	again := b.next(100, outboxLease)
	require.Equal(t, keys(c.Events), keys(again.Events), "released events are claimable at once")
	// Releasing an old claim leaves the new lease alone.
	require.NoError(t, b.os.EventsRelease(b.ctx, c))
	require.Empty(t, b.claim(100, outboxLease))
	b.mark()
	require.Empty(t, b.claim(100, outboxLease))
}

// A job's events are published in seq order, across claims.
func testOutboxJobOrder(b *obBundle) {
	t := b.t
	a := b.insertOne(b.job("outbox"))
	a = b.advance(a, queue.StateAssigned, queue.StateRunning) // seq 1..3
	other := b.insertOne(b.job("outbox"))                     // after a's seq 3

	var got []jobSeq
	for range 4 {
		got = append(got, keys(b.next(1, outboxLease).Events)...)
		b.mark()
	}
	require.Equal(t, []jobSeq{{a.ID, 1}, {a.ID, 2}, {a.ID, 3}, {other.ID, 1}}, got)
	require.Empty(t, b.claim(1, outboxLease))
}

// Relays claiming and marking at once publish every event, each once: one holds the cursor at a
// time.
func testOutboxConcurrent(b *obBundle) {
	t := b.t
	var ps []store.JobInsertParams
	for range 300 {
		ps = append(ps, b.job("outbox"))
	}
	res := b.insert(ps...)
	var (
		mu   sync.Mutex
		seen = map[jobSeq]int{}
		wg   sync.WaitGroup
	)
	for range 6 {
		wg.Go(func() {
			for range 1000 {
				c, err := b.os.EventsClaim(b.ctx, store.EventsClaimParams{Limit: 7, Lease: outboxLease})
				if err != nil {
					t.Error(err)
					return
				}
				if len(c.Events) > 0 {
					mu.Lock()
					for _, e := range c.Events {
						seen[jobSeq{e.JobID, e.Seq}]++
					}
					mu.Unlock()
					if err := b.os.EventsMarkPublished(b.ctx, c); err != nil {
						t.Error(err)
						return
					}
				}
				bl, err := b.os.OutboxBacklog(b.ctx)
				if err != nil {
					t.Error(err)
					return
				}
				if bl.Events == 0 {
					return
				}
			}
		})
	}
	wg.Wait()
	require.Len(t, seen, len(res))
	for k, n := range seen {
		require.Equal(t, 1, n, "event %v claimed %d times", k, n)
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

	b.next(1, outboxLease)
	bl, err = b.os.OutboxBacklog(b.ctx)
	require.NoError(t, err)
	require.Equal(t, int64(3), bl.Events, "claimed but unpublished events are backlog")
	b.mark()
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

// A report that also acknowledges the start (a short job) records two transitions: the relay gets
// both, the start first, in seq order, each with its own time and reason — in one claim even when
// the limit is 1 — and the backlog counts both.
func testOutboxImplicitAck(b *obBundle) {
	t := b.t
	ds := as[store.DispatchStore](t, b.s)
	p := b.job("outbox")
	p.Queue = b.newQueue(store.QueueCreateParams{}).Name // nothing else pending in it
	j := b.insertOne(p)
	claimed, err := ds.JobClaim(b.ctx, store.JobClaimParams{Queue: p.Queue, WorkerID: "w-outbox", Limit: 1})
	require.NoError(t, err)
	require.Len(t, claimed, 1)
	require.Equal(t, j.ID, claimed[0].ID)
	lease := store.JobLease{ID: j.ID, Attempt: 1, WorkerID: "w-outbox", StartedAgo: 300 * time.Millisecond}
	out, err := ds.JobReportMany(b.ctx, []store.JobReportParams{{JobLease: lease, Success: true, Runtime: 200 * time.Millisecond}})
	require.NoError(t, err)
	require.NoError(t, out[0].Err)
	done := out[0].Job

	require.Equal(t, []jobSeq{{j.ID, 1}, {j.ID, 2}}, keys(b.next(2, outboxLease).Events))
	b.mark()
	bl, err := b.os.OutboxBacklog(b.ctx)
	require.NoError(t, err)
	require.Equal(t, int64(2), bl.Events, "one row, two transitions")
	evs := b.next(1, outboxLease).Events
	require.Equal(t, []jobSeq{{j.ID, 3}, {j.ID, 4}}, keys(evs), "a row's transitions are never split")
	require.Equal(t, evs[0].ID, evs[1].ID)
	require.Equal(t, queue.StateAssigned, evs[0].From)
	require.Equal(t, queue.StateRunning, evs[0].To)
	require.Equal(t, queue.ReasonImplicitAck, evs[0].Reason)
	require.Equal(t, done.StartedAt, evs[0].At)
	require.Equal(t, queue.StateRunning, evs[1].From)
	require.Equal(t, queue.StateDone, evs[1].To)
	require.Equal(t, queue.ReasonSucceeded, evs[1].Reason)
	require.Equal(t, done.CompletedAt, evs[1].At)
	// The worker says it started 300 ms ago, but the job was assigned only just now: the start is
	// the assignment, and the outcome the start plus the runtime, not after the report.
	require.Equal(t, claimed[0].UpdatedAt, done.StartedAt, "not before the assignment")
	require.LessOrEqual(t, done.CompletedAt.Sub(done.StartedAt), 200*time.Millisecond)
	for _, e := range evs {
		require.Equal(t, "w-outbox", e.WorkerID)
		require.Equal(t, 1, e.Attempt)
	}
	b.mark()

	logged, err := b.s.JobEvents(b.ctx, j.ID)
	require.NoError(t, err)
	require.Len(t, logged, 4, "job logs show every transition")
	for i, e := range evs {
		require.Equal(t, e.Event, logged[2+i])
	}
}
