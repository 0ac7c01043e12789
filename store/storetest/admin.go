package storetest

import (
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/jq-dev/jq/internal/testenv"
	"github.com/jq-dev/jq/queue"
	"github.com/jq-dev/jq/store"
)

// adminSuite runs the contract of store.AdminStore. Most checks share the factory's store; those
// that see every queue at once — a purge of all queues, counts of all workers — take an isolated
// one. Subtests run in parallel.
func adminSuite(t *testing.T, f Factory) {
	newStore, newIsolated := sharedStore(f), isolatedStore(f)
	t.Run("JobPeekPending", func(t *testing.T) { testJobPeekPending(t, newStore) })
	t.Run("JobPeekDead", func(t *testing.T) { testJobPeekDead(t, newStore) })
	t.Run("JobPeekInvalid", func(t *testing.T) { testJobPeekInvalid(t, newStore) })
	t.Run("JobPeekByteBudget", func(t *testing.T) { testJobPeekByteBudget(t, newStore) })
	t.Run("JobPurgeQueue", func(t *testing.T) { testJobPurgeQueue(t, newStore) })
	t.Run("JobPurgeInvalid", func(t *testing.T) { testJobPurgeInvalid(t, newStore) })
	t.Run("JobCountDeadLettered", func(t *testing.T) { testJobCountDeadLettered(t, newStore) })
	t.Run("JobDueTypeList", func(t *testing.T) { testJobDueTypeList(t, newStore) })
	t.Run("JobDelete", func(t *testing.T) { testJobDelete(t, newStore) })
	t.Run("JobDeleteRefused", func(t *testing.T) { testJobDeleteRefused(t, newStore) })
	t.Run("JobDeleteUnpublished", func(t *testing.T) { testJobDeleteUnpublished(t, newStore) })
	t.Run("Isolated", func(t *testing.T) {
		t.Run("JobPurgeAll", func(t *testing.T) { testJobPurgeAll(t, newIsolated) })
		t.Run("WorkerCountLive", func(t *testing.T) { testWorkerCountLive(t, newIsolated) })
	})
}

type adminBundle struct {
	*bundle
	a store.AdminStore
}

func setupAdmin(t *testing.T, newStore NewStoreFunc) *adminBundle {
	t.Helper()
	b := setup(t, newStore)
	return &adminBundle{bundle: b, a: as[store.AdminStore](t, b.s)}
}

func (b *adminBundle) peek(p store.JobPeekParams) []*queue.Job {
	b.t.Helper()
	if p.Queue == "" {
		p.Queue = b.queue
	}
	res, err := b.a.JobPeek(b.ctx, p)
	require.NoError(b.t, err)
	return res.Jobs
}

// dead returns a new job of the bundle's queue (or of q) that is DEAD_LETTERED.
func (b *adminBundle) dead(q string) *queue.Job {
	b.t.Helper()
	p := b.job("t")
	if q != "" {
		p.Queue = q
	}
	return b.move(b.insertOne(p), queue.StateDeadLettered, store.JobTransitionParams{Reason: "test"})
}

func (b *adminBundle) requireGone(id string) {
	b.t.Helper()
	_, err := b.s.JobGet(b.ctx, id)
	require.ErrorIs(b.t, err, queue.ErrJobNotFound)
	_, err = b.s.JobEvents(b.ctx, id)
	require.ErrorIs(b.t, err, queue.ErrJobNotFound, "a deleted job has no history")
}

func testJobPeekPending(t *testing.T, newStore NewStoreFunc) {
	b := setupAdmin(t, newStore)
	require.Empty(t, b.peek(store.JobPeekParams{}), "an empty queue")

	var pending []*queue.Job
	for _, prio := range []int{0, 5, 9, 5, 0, 9, 3} {
		p := b.job("t")
		p.Priority = prio
		pending = append(pending, b.insertOne(p))
	}
	later := b.job("t")
	later.Priority = 9
	later.RunAt = time.Now().Add(time.Hour)
	b.insertOne(later) // not due
	b.dead("")
	assigned := b.insertOne(b.job("t"))
	b.move(assigned, queue.StateAssigned, store.JobTransitionParams{})

	// priority DESC, then created_at (insert order here).
	want := []string{pending[2].ID, pending[5].ID, pending[1].ID, pending[3].ID, pending[6].ID, pending[0].ID, pending[4].ID}
	got := b.peek(store.JobPeekParams{WithData: true})
	require.Equal(t, want, ids(got))
	for _, j := range got {
		require.Equal(t, queue.StatePending, j.State)
		require.Equal(t, b.get(j.ID).Payload, j.Payload)
	}
	for _, j := range b.peek(store.JobPeekParams{}) {
		require.Empty(t, j.Payload, "payloads only when asked")
	}
	require.Equal(t, want[:3], ids(b.peek(store.JobPeekParams{Limit: 3})))

	// Peeking changes nothing, and a paused queue still shows what it would dispatch next.
	require.Equal(t, want, ids(b.peek(store.JobPeekParams{})))
	_, err := b.s.QueueSetPaused(b.ctx, store.QueueSetPausedParams{Name: b.queue, Paused: true})
	require.NoError(t, err)
	require.Equal(t, want, ids(b.peek(store.JobPeekParams{})))

	// The default limit.
	for range store.DefaultPeekLimit {
		b.insertOne(b.job("t"))
	}
	require.Len(t, b.peek(store.JobPeekParams{}), store.DefaultPeekLimit)
}

func testJobPeekDead(t *testing.T, newStore NewStoreFunc) {
	b := setupAdmin(t, newStore)
	require.Empty(t, b.peek(store.JobPeekParams{Dead: true}))
	b.insertOne(b.job("t")) // PENDING: not a dead letter
	var dead []*queue.Job
	for range 4 {
		dead = append(dead, b.dead(""))
	}
	got := b.peek(store.JobPeekParams{Dead: true})
	require.Equal(t, []string{dead[3].ID, dead[2].ID, dead[1].ID, dead[0].ID}, ids(got), "most recently dead-lettered first")
	for _, j := range got {
		require.Equal(t, queue.StateDeadLettered, j.State)
		require.False(t, j.CompletedAt.IsZero())
	}
	require.Equal(t, []string{dead[3].ID, dead[2].ID}, ids(b.peek(store.JobPeekParams{Dead: true, Limit: 2})))
}

func testJobPeekInvalid(t *testing.T, newStore NewStoreFunc) {
	b := setupAdmin(t, newStore)
	for _, p := range []store.JobPeekParams{
		{Queue: "Not A Queue"},
		{Queue: ""},
		{Queue: b.queue, Limit: -1},
		{Queue: b.queue, Limit: store.MaxPeekLimit + 1},
	} {
		_, err := b.a.JobPeek(b.ctx, p)
		require.ErrorIs(t, err, queue.ErrInvalidArgument, "%+v", p)
	}
	for _, dead := range []bool{false, true} {
		_, err := b.a.JobPeek(b.ctx, store.JobPeekParams{Queue: uniqueName("missing"), Dead: dead})
		require.ErrorIs(t, err, queue.ErrQueueNotFound)
	}
}

func testJobPurgeQueue(t *testing.T, newStore NewStoreFunc) {
	b := setupAdmin(t, newStore)
	other := b.newQueue(store.QueueCreateParams{}).Name
	var dead []*queue.Job
	for range 3 {
		dead = append(dead, b.dead(""))
	}
	otherDead := b.dead(other)
	pending := b.insertOne(b.job("t"))
	done := b.advance(b.insertOne(b.job("t")), queue.StateAssigned, queue.StateRunning, queue.StateDone)
	// A retried dead letter is PENDING again and not purged.
	retried := b.move(b.dead(""), queue.StatePending, store.JobTransitionParams{Reason: "manual_retry", ResetRetries: true})

	n, err := b.a.JobPurgeDeadLetters(b.ctx, store.JobPurgeDeadLettersParams{Queue: b.queue})
	require.NoError(t, err)
	require.EqualValues(t, 3, n)
	for _, j := range dead {
		b.requireGone(j.ID)
	}
	for _, j := range []*queue.Job{otherDead, pending, done, retried} {
		require.Equal(t, j.State, b.get(j.ID).State, "only the queue's dead letters are deleted")
		require.NotEmpty(t, b.events(j.ID))
	}
	require.Empty(t, b.peek(store.JobPeekParams{Dead: true}))

	n, err = b.a.JobPurgeDeadLetters(b.ctx, store.JobPurgeDeadLettersParams{Queue: b.queue})
	require.NoError(t, err)
	require.Zero(t, n, "nothing left to purge")
	// Once its only job, a dead letter, is purged, a queue is empty and can be deleted.
	_, err = b.a.JobPurgeDeadLetters(b.ctx, store.JobPurgeDeadLettersParams{Queue: other})
	require.NoError(t, err)
	_, err = b.s.QueueDelete(b.ctx, store.QueueDeleteParams{Name: other})
	require.NoError(t, err)
}

func testJobPurgeInvalid(t *testing.T, newStore NewStoreFunc) {
	b := setupAdmin(t, newStore)
	_, err := b.a.JobPurgeDeadLetters(b.ctx, store.JobPurgeDeadLettersParams{Queue: "Not A Queue"})
	require.ErrorIs(t, err, queue.ErrInvalidArgument)
	_, err = b.a.JobPurgeDeadLetters(b.ctx, store.JobPurgeDeadLettersParams{Queue: uniqueName("missing")})
	require.ErrorIs(t, err, queue.ErrQueueNotFound)
}

func testJobDelete(t *testing.T, newStore NewStoreFunc) {
	b := setupAdmin(t, newStore)
	done := b.advance(b.insertOne(b.job("t")), queue.StateAssigned, queue.StateRunning, queue.StateDone)
	dead := b.dead("")
	kept := b.advance(b.insertOne(b.job("t")), queue.StateAssigned, queue.StateRunning, queue.StateDone)
	for _, j := range []*queue.Job{done, dead} {
		require.NoError(t, b.a.JobDelete(b.ctx, store.JobDeleteParams{ID: j.ID, State: j.State}))
		b.requireGone(j.ID)
	}
	require.Equal(t, queue.StateDone, b.get(kept.ID).State, "only the named job is deleted")
	require.NotEmpty(t, b.events(kept.ID))
	err := b.a.JobDelete(b.ctx, store.JobDeleteParams{ID: done.ID, State: queue.StateDone})
	require.ErrorIs(t, err, queue.ErrJobNotFound, "deleted once")
	// Once its jobs are deleted, a queue is empty and can be deleted without force.
	require.NoError(t, b.a.JobDelete(b.ctx, store.JobDeleteParams{ID: kept.ID, State: queue.StateDone}))
	_, err = b.s.QueueDelete(b.ctx, store.QueueDeleteParams{Name: b.queue})
	require.NoError(t, err)
}

// With Kafka off (Unpublished) a deleted job takes every event with it: none is owed to a relay.
// The events are read back through the store's EventFeed, from a reader started before the jobs.
func testJobDeleteUnpublished(t *testing.T, newStore NewStoreFunc) {
	b := setupAdmin(t, newStore)
	feed := as[store.EventFeed](t, b.s)
	p := store.EventsReadParams{Queue: b.queue, Limit: 1000, FromNow: true}
	r, err := feed.EventsRead(b.ctx, p)
	require.NoError(t, err)
	p = r.Next(p)

	gone := b.advance(b.insertOne(b.job("t")), queue.StateAssigned, queue.StateRunning, queue.StateDone)
	dead := b.dead("")
	kept := b.advance(b.insertOne(b.job("t")), queue.StateAssigned, queue.StateRunning, queue.StateDone)
	want := len(b.events(kept.ID))
	for _, j := range []*queue.Job{gone, dead} {
		require.NoError(t, b.a.JobDelete(b.ctx, store.JobDeleteParams{ID: j.ID, State: j.State, Unpublished: true}))
		b.requireGone(j.ID)
	}
	// kept's events are the newest: once they are read, every older one of the queue was too.
	var got []queue.Event
	require.Eventually(t, func() bool {
		r, err := feed.EventsRead(b.ctx, p)
		require.NoError(t, err)
		got, p = append(got, r.Events...), r.Next(p)
		return len(got) >= want
	}, 10*time.Second, 5*time.Millisecond)
	for _, e := range got {
		require.Equal(t, kept.ID, e.JobID, "an event of a deleted job is left: %+v", e)
	}
	require.Len(t, got, want)
}

func testJobDeleteRefused(t *testing.T, newStore NewStoreFunc) {
	b := setupAdmin(t, newStore)
	pending := b.insertOne(b.job("t"))
	// Only a finished state may be named, whatever the job's: refused before any I/O.
	for _, st := range []queue.State{queue.StatePending, queue.StateAssigned, queue.StateRunning, queue.StateFailed, ""} {
		err := b.a.JobDelete(b.ctx, store.JobDeleteParams{ID: pending.ID, State: st})
		require.ErrorIs(t, err, queue.ErrIllegalTransition, "state %q", st)
	}
	// A job that is not (or no longer) in the decided state is kept: the compare-and-set lost.
	err := b.a.JobDelete(b.ctx, store.JobDeleteParams{ID: pending.ID, State: queue.StateDone})
	require.ErrorIs(t, err, queue.ErrStaleAttempt)
	retried := b.move(b.dead(""), queue.StatePending, store.JobTransitionParams{Reason: "manual_retry", ResetRetries: true})
	err = b.a.JobDelete(b.ctx, store.JobDeleteParams{ID: retried.ID, State: queue.StateDeadLettered})
	require.ErrorIs(t, err, queue.ErrStaleAttempt)
	for _, j := range []*queue.Job{pending, retried} {
		require.Equal(t, queue.StatePending, b.get(j.ID).State)
		require.NotEmpty(t, b.events(j.ID))
	}
	err = b.a.JobDelete(b.ctx, store.JobDeleteParams{ID: "not-a-uuid", State: queue.StateDone})
	require.ErrorIs(t, err, queue.ErrInvalidArgument)
	err = b.a.JobDelete(b.ctx, store.JobDeleteParams{ID: "6f1c1c5e-8f5a-4c3e-9d61-3f8e2b7a1c00", State: queue.StateDone})
	require.ErrorIs(t, err, queue.ErrJobNotFound)
}

func testJobCountDeadLettered(t *testing.T, newStore NewStoreFunc) {
	b := setupAdmin(t, newStore)
	empty := b.newQueue(store.QueueCreateParams{}).Name
	b.dead("")
	b.dead("")
	b.insertOne(b.job("t"))
	counts, err := b.a.JobCountDeadLettered(b.ctx)
	require.NoError(t, err)
	require.EqualValues(t, 2, counts[b.queue])
	require.NotContains(t, counts, empty)
}

// JobDueTypeList names the types of the due PENDING jobs, but those excepted; a delayed job, one
// assigned and another queue's are not due here.
func testJobDueTypeList(t *testing.T, newStore NewStoreFunc) {
	b := setupAdmin(t, newStore)
	b.insert(b.job("greet"), b.job("noop"), b.job("email"), b.job("greet"))
	delayed := b.job("later")
	delayed.RunAt = time.Now().Add(time.Hour)
	b.insertOne(delayed)
	b.advance(b.insertOne(b.job("running")), queue.StateAssigned, queue.StateRunning)
	b.insert(store.JobInsertParams{Queue: b.newQueue(store.QueueCreateParams{}).Name, Type: "elsewhere"})

	got, err := b.a.JobDueTypeList(b.ctx, b.queue, nil)
	require.NoError(t, err)
	require.Equal(t, []string{"email", "greet", "noop"}, got)
	got, err = b.a.JobDueTypeList(b.ctx, b.queue, []string{"noop", "email"})
	require.NoError(t, err)
	require.Equal(t, []string{"greet"}, got)
	got, err = b.a.JobDueTypeList(b.ctx, uniqueName("missing"), nil)
	require.NoError(t, err)
	require.Empty(t, got)
}

func testJobPurgeAll(t *testing.T, newIsolated NewStoreFunc) {
	b := setupAdmin(t, newIsolated)
	other := b.newQueue(store.QueueCreateParams{}).Name
	var dead []*queue.Job
	for i := range 5 {
		q := b.queue
		if i%2 == 1 {
			q = other
		}
		dead = append(dead, b.dead(q))
	}
	pending := b.insertOne(b.job("t"))

	n, err := b.a.JobPurgeDeadLetters(b.ctx, store.JobPurgeDeadLettersParams{})
	require.NoError(t, err)
	require.EqualValues(t, len(dead), n)
	for _, j := range dead {
		b.requireGone(j.ID)
	}
	require.Equal(t, queue.StatePending, b.get(pending.ID).State)
	counts, err := b.a.JobCountDeadLettered(b.ctx)
	require.NoError(t, err)
	require.Empty(t, counts)
}

func testWorkerCountLive(t *testing.T, newIsolated NewStoreFunc) {
	b := setupAdmin(t, newIsolated)
	count := func(timeout time.Duration) int64 {
		n, err := b.a.WorkerCountLive(b.ctx, timeout)
		require.NoError(t, err)
		return n
	}
	require.Zero(t, count(time.Hour))
	var workers []string
	for range 3 {
		id := uniqueName("w")
		_, err := b.s.WorkerRegister(b.ctx, store.WorkerRegisterParams{ID: id, Hostname: "h", Concurrency: 1, Queues: []string{b.queue}})
		require.NoError(t, err)
		workers = append(workers, id)
	}
	require.EqualValues(t, 3, count(time.Hour))
	require.NoError(t, b.s.WorkerDeregister(b.ctx, workers[0]))
	_, err := b.s.WorkerSetStatus(b.ctx, store.WorkerSetStatusParams{ID: workers[1], Status: queue.WorkerDraining})
	require.NoError(t, err)
	require.EqualValues(t, 2, count(time.Hour), "OFFLINE workers do not count; DRAINING ones do")
	// Heartbeats age by the store's clock.
	testenv.Eventually(t, 10*time.Second, func() error {
		if n := count(time.Millisecond); n != 0 {
			return fmt.Errorf("%d workers still live with a 1 ms timeout", n)
		}
		return nil
	})
	_, err = b.a.WorkerCountLive(b.ctx, 0)
	require.ErrorIs(t, err, queue.ErrInvalidArgument)
}

// runDispatchCountsTests runs the contract of store.Dispatcher's Counts. Subtests run in parallel.
func runDispatchCountsTests(t *testing.T, newDispatcher NewDispatcherFunc) {
	t.Run("PerQueue", func(t *testing.T) {
		b := dispatcherSetup(t, newDispatcher)
		// A queue whose name extends b.queue's must not be confused with it.
		longer := b.queue + "x"
		empty := uniqueName("dq")

		b.add("w1", jobIDs(2)...)
		b.add("w2", jobIDs(1)...)
		b.add("w{odd}:id", jobIDs(1)...) // worker ids may hold any byte
		(&dispatcherBundle{t: t, d: b.d, ctx: b.ctx, queue: longer}).add("w1", jobIDs(1)...)

		got, err := b.d.Counts(b.ctx, []string{b.queue, empty, longer})
		require.NoError(t, err)
		require.Equal(t, []store.DispatchCounts{
			{Queue: b.queue, Inflight: 4},
			{Queue: empty},
			{Queue: longer, Inflight: 1},
		}, got)

		b.remove("w1", b.inflight("w1")...)
		got, err = b.d.Counts(b.ctx, []string{b.queue})
		require.NoError(t, err)
		require.Equal(t, []store.DispatchCounts{{Queue: b.queue, Inflight: 2}}, got)

		got, err = b.d.Counts(b.ctx, nil)
		require.NoError(t, err)
		require.Empty(t, got)
	})
	t.Run("ManyLists", func(t *testing.T) {
		// More lists than one SCAN page holds.
		b := dispatcherSetup(t, newDispatcher)
		const workers = 1500
		for i := range workers {
			b.add(fmt.Sprintf("w%d", i), jobIDs(1)...)
		}
		got, err := b.d.Counts(b.ctx, []string{b.queue})
		require.NoError(t, err)
		require.Equal(t, []store.DispatchCounts{{Queue: b.queue, Inflight: workers}}, got)
	})
	t.Run("Invalid", func(t *testing.T) {
		b := dispatcherSetup(t, newDispatcher)
		_, err := b.d.Counts(b.ctx, []string{b.queue, "Not A Queue"})
		require.ErrorIs(t, err, queue.ErrInvalidArgument)
	})
}
