package storetest

import (
	"cmp"
	"context"
	"fmt"
	"math/rand/v2"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/jq-dev/jq/internal/testenv"
	"github.com/jq-dev/jq/queue"
	"github.com/jq-dev/jq/store"
)

// NewDispatcherFunc returns the dispatcher under test. It may return the same dispatcher to every
// test (the suite isolates its data by unique queue names and worker ids, never by emptying
// anything) and is responsible for closing it.
type NewDispatcherFunc func(t *testing.T) store.Dispatcher

// heldLockTTL is long enough never to expire during a test, except where a test says otherwise.
const heldLockTTL = time.Minute

// RunDispatcher runs the contract of store.Dispatcher against the dispatcher newDispatcher returns.
// Subtests run in parallel.
func RunDispatcher(t *testing.T, newDispatcher NewDispatcherFunc) {
	t.Run("Ping", func(t *testing.T) {
		b := dispatcherSetup(t, newDispatcher)
		require.NoError(t, b.d.Ping(b.ctx))
	})
	t.Run("ClaimOrder", func(t *testing.T) { testDispatcherClaimOrder(t, newDispatcher) })
	t.Run("PushTwice", func(t *testing.T) { testDispatcherPushTwice(t, newDispatcher) })
	t.Run("ClaimedOnce", func(t *testing.T) { testDispatcherClaimedOnce(t, newDispatcher) })
	t.Run("ClaimEmpty", func(t *testing.T) { testDispatcherClaimEmpty(t, newDispatcher) })
	t.Run("ConcurrentClaims", func(t *testing.T) { testDispatcherConcurrentClaims(t, newDispatcher) })
	t.Run("InflightRemove", func(t *testing.T) { testDispatcherInflightRemove(t, newDispatcher) })
	t.Run("LockExpiry", func(t *testing.T) { testDispatcherLockExpiry(t, newDispatcher) })
	t.Run("LargeBatches", func(t *testing.T) { testDispatcherLargeBatches(t, newDispatcher) })
	t.Run("ReadyLen", func(t *testing.T) { testDispatcherReadyLen(t, newDispatcher) })
	t.Run("QueuesAreSeparate", func(t *testing.T) { testDispatcherQueuesAreSeparate(t, newDispatcher) })
	t.Run("InvalidArguments", func(t *testing.T) { testDispatcherInvalid(t, newDispatcher) })
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

// readyJobs returns n jobs with fresh ids, priority 0 and creation times 1 ms apart.
func readyJobs(n int) []store.DueJob {
	base := time.Now().UTC().Truncate(time.Microsecond)
	jobs := make([]store.DueJob, n)
	for i := range jobs {
		jobs[i] = store.DueJob{ID: uuid.NewString(), CreatedAt: base.Add(time.Duration(i) * time.Millisecond)}
	}
	return jobs
}

func readyJobIDs(jobs []store.DueJob) []string {
	ids := make([]string, len(jobs))
	for i, j := range jobs {
		ids[i] = j.ID
	}
	return ids
}

// claimOrder sorts jobs as Claim must return them: priority DESC, created_at, id (JobDue's order).
func claimOrder(jobs []store.DueJob) []store.DueJob {
	sorted := slices.Clone(jobs)
	slices.SortFunc(sorted, func(a, b store.DueJob) int {
		return cmp.Or(
			cmp.Compare(b.Priority, a.Priority),
			a.CreatedAt.Compare(b.CreatedAt),
			cmp.Compare(a.ID, b.ID),
		)
	})
	return sorted
}

func (b *dispatcherBundle) push(jobs []store.DueJob, ttl time.Duration) int {
	b.t.Helper()
	n, err := b.d.ReadyPush(b.ctx, store.ReadyPushParams{Queue: b.queue, Jobs: jobs, LockTTL: ttl})
	require.NoError(b.t, err)
	return n
}

func (b *dispatcherBundle) claim(worker string, maxJobs int) []string {
	b.t.Helper()
	ids, err := b.d.Claim(b.ctx, store.ClaimParams{Queue: b.queue, WorkerID: worker, Max: maxJobs})
	require.NoError(b.t, err)
	return ids
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

func (b *dispatcherBundle) readyLen() int64 {
	b.t.Helper()
	n, err := b.d.ReadyLen(b.ctx, b.queue)
	require.NoError(b.t, err)
	return n
}

func testDispatcherClaimOrder(t *testing.T, newDispatcher NewDispatcherFunc) {
	b := dispatcherSetup(t, newDispatcher)
	base := time.Now().UTC().Truncate(time.Microsecond)
	jobs := make([]store.DueJob, 200)
	for i := range jobs {
		jobs[i] = store.DueJob{
			ID:        uuid.NewString(),
			Priority:  rand.IntN(queue.MaxPriority + 1),
			CreatedAt: base.Add(-time.Duration(rand.IntN(1_000_000)) * time.Microsecond),
		}
	}
	// Neighbours one microsecond apart at the same priority must keep their order.
	for i := 0; i < 20; i += 2 {
		jobs[i+1].Priority = jobs[i].Priority
		jobs[i+1].CreatedAt = jobs[i].CreatedAt.Add(time.Microsecond)
	}
	want := readyJobIDs(claimOrder(jobs))

	// Pushed shuffled, in several batches: the order comes from the jobs, not from the pushes.
	shuffled := slices.Clone(jobs)
	rand.Shuffle(len(shuffled), func(i, j int) { shuffled[i], shuffled[j] = shuffled[j], shuffled[i] })
	added := 0
	for chunk := range slices.Chunk(shuffled, 45) {
		added += b.push(chunk, heldLockTTL)
	}
	require.Equal(t, len(jobs), added)

	worker := uniqueName("w")
	var got []string
	for {
		ids := b.claim(worker, 7)
		require.LessOrEqual(t, len(ids), 7)
		if len(ids) == 0 {
			break
		}
		got = append(got, ids...)
	}
	require.Equal(t, want, got)
	require.Equal(t, want, b.inflight(worker), "the in-flight list keeps claim order")
}

func testDispatcherPushTwice(t *testing.T, newDispatcher NewDispatcherFunc) {
	b := dispatcherSetup(t, newDispatcher)
	jobs := readyJobs(3)
	require.Equal(t, 2, b.push(jobs[:2], heldLockTTL))
	require.Equal(t, 0, b.push(jobs[:2], heldLockTTL), "locked jobs are skipped")
	require.Equal(t, 1, b.push(jobs, heldLockTTL), "only the new job is added")
	require.EqualValues(t, 3, b.readyLen())

	dup := readyJobs(1)
	dup[0].CreatedAt = jobs[2].CreatedAt.Add(time.Microsecond)
	require.Equal(t, 1, b.push([]store.DueJob{dup[0], dup[0], dup[0]}, heldLockTTL), "a job repeated in one batch counts once")
	require.EqualValues(t, 4, b.readyLen())

	require.Equal(t, 0, b.push(nil, heldLockTTL), "an empty batch adds nothing")
	got := b.claim(uniqueName("w"), 10)
	require.Equal(t, append(readyJobIDs(jobs), dup[0].ID), got)
}

func testDispatcherClaimedOnce(t *testing.T, newDispatcher NewDispatcherFunc) {
	b := dispatcherSetup(t, newDispatcher)
	jobs := readyJobs(5)
	require.Equal(t, 5, b.push(jobs, heldLockTTL))
	w1, w2 := uniqueName("w"), uniqueName("w")

	got := b.claim(w1, 100)
	require.Equal(t, readyJobIDs(jobs), got, "Max above the ready count takes everything")
	require.Empty(t, b.claim(w2, 100), "a claimed job is not claimable again")
	require.Equal(t, 0, b.push(jobs, heldLockTTL), "a claimed job keeps its lock")
	require.Empty(t, b.claim(w2, 100))
	require.EqualValues(t, 0, b.readyLen())

	require.Equal(t, got, b.inflight(w1))
	require.Empty(t, b.inflight(w2))
}

func testDispatcherClaimEmpty(t *testing.T, newDispatcher NewDispatcherFunc) {
	b := dispatcherSetup(t, newDispatcher)
	worker := uniqueName("w")
	ids := b.claim(worker, 10)
	require.NotNil(t, ids)
	require.Empty(t, ids)
	require.Empty(t, b.inflight(worker))
	require.EqualValues(t, 0, b.readyLen())

	require.Equal(t, 2, b.push(readyJobs(2), heldLockTTL))
	require.Len(t, b.claim(worker, 10), 2)
	require.Empty(t, b.claim(worker, 10), "a drained queue is empty again")
}

func testDispatcherConcurrentClaims(t *testing.T, newDispatcher NewDispatcherFunc) {
	b := dispatcherSetup(t, newDispatcher)
	const total, workers = 1000, 8
	jobs := readyJobs(total)
	added := 0
	for chunk := range slices.Chunk(jobs, 250) {
		added += b.push(chunk, heldLockTTL)
	}
	require.Equal(t, total, added)

	ids := make([]string, workers)
	got := make([][]string, workers)
	errs := make([]error, workers)
	var wg sync.WaitGroup
	for w := range workers {
		ids[w] = uniqueName("w")
		wg.Go(func() {
			for {
				claimed, err := b.d.Claim(b.ctx, store.ClaimParams{Queue: b.queue, WorkerID: ids[w], Max: 1 + rand.IntN(13)})
				if err != nil {
					errs[w] = err
					return
				}
				if len(claimed) == 0 {
					return
				}
				got[w] = append(got[w], claimed...)
			}
		})
	}
	wg.Wait()

	seen := make(map[string]string, total)
	for w := range workers {
		require.NoError(t, errs[w], "worker %d", w)
		for _, id := range got[w] {
			other, dup := seen[id]
			require.Falsef(t, dup, "job %s claimed by %s and %s", id, other, ids[w])
			seen[id] = ids[w]
		}
		require.Equal(t, got[w], nilIfNone(b.inflight(ids[w])), "in-flight list of worker %d", w)
	}
	require.Len(t, seen, total, "every job claimed exactly once")
	require.EqualValues(t, 0, b.readyLen())
}

func nilIfNone(s []string) []string {
	if len(s) == 0 {
		return nil
	}
	return s
}

func testDispatcherInflightRemove(t *testing.T, newDispatcher NewDispatcherFunc) {
	b := dispatcherSetup(t, newDispatcher)
	jobs := readyJobs(6)
	require.Equal(t, 6, b.push(jobs, heldLockTTL))
	worker, other := uniqueName("w"), uniqueName("w")
	ids := b.claim(worker, 6)
	require.Equal(t, readyJobIDs(jobs), ids)

	b.remove(worker, ids[0], ids[2], ids[4])
	require.Equal(t, []string{ids[1], ids[3], ids[5]}, b.inflight(worker), "only the named ids go")

	// Removed jobs are unlocked and can be pushed again; the others are still locked.
	require.Equal(t, 3, b.push(jobs, heldLockTTL))
	require.Equal(t, []string{ids[0], ids[2], ids[4]}, b.claim(other, 10))

	// Removing what is not (or no longer) in a worker's list changes nothing and is no error: not
	// that worker's entries, nor the locks of jobs held elsewhere.
	b.remove(worker, ids[0], uuid.NewString())
	b.remove(worker)
	b.remove(uniqueName("w"), ids[1])
	require.Equal(t, []string{ids[1], ids[3], ids[5]}, b.inflight(worker))
	require.Equal(t, []string{ids[0], ids[2], ids[4]}, b.inflight(other))
	require.Equal(t, 0, b.push(jobs, heldLockTTL), "every job is still locked by its holder")

	b.remove(worker, ids[1], ids[3], ids[5])
	b.remove(other, ids[0], ids[2], ids[4])
	require.Empty(t, b.inflight(worker))
	require.Empty(t, b.inflight(other))
	require.Equal(t, 6, b.push(jobs, heldLockTTL), "the attempts ended: every job can be dispatched again")

	// The same with a batch, mixed with ids the worker does not hold and repeated ids.
	elsewhere := b.claim(other, 6)
	require.Equal(t, ids, elsewhere)
	many := readyJobs(40)
	require.Equal(t, 40, b.push(many, heldLockTTL))
	big := b.claim(worker, 40)
	require.Equal(t, readyJobIDs(many), big)
	var drop, keep []string
	for i, id := range big {
		if i%2 == 0 {
			drop = append(drop, id)
		} else {
			keep = append(keep, id)
		}
	}
	request := append(slices.Clone(drop), uuid.NewString(), drop[0], elsewhere[0], uuid.NewString())
	b.remove(worker, request...)
	require.Equal(t, keep, b.inflight(worker), "only the named ids go; the rest keep their order")
	require.Equal(t, elsewhere, b.inflight(other))
	require.Equal(t, len(drop), b.push(many, heldLockTTL), "exactly the removed jobs are unlocked")
	require.Equal(t, 0, b.push(jobs, heldLockTTL), "a job held by another worker stays locked")
}

func testDispatcherLockExpiry(t *testing.T, newDispatcher NewDispatcherFunc) {
	b := dispatcherSetup(t, newDispatcher)
	const short = 50 * time.Millisecond
	job := readyJobs(1)
	require.Equal(t, 1, b.push(job, short))
	held := readyJobs(1)
	require.Equal(t, 1, b.push(held, heldLockTTL))

	// Not claimed: once the lock expires a push takes it again, without duplicating the entry.
	testenv.Eventually(t, 10*time.Second, func() error {
		if n := b.push(job, short); n != 1 {
			return fmt.Errorf("push added %d, want 1 once the %v lock has expired", n, short)
		}
		return nil
	})
	require.Equal(t, 0, b.push(held, heldLockTTL), "a lock within its TTL still holds")
	require.EqualValues(t, 2, b.readyLen(), "re-locking a waiting job does not duplicate it")
	require.ElementsMatch(t, []string{job[0].ID, held[0].ID}, b.claim(uniqueName("w"), 10))
}

func testDispatcherLargeBatches(t *testing.T, newDispatcher NewDispatcherFunc) {
	b := dispatcherSetup(t, newDispatcher)
	const n = 3000 // above any small fixed limit on arguments per command or script call
	jobs := readyJobs(n)
	require.Equal(t, n, b.push(jobs, heldLockTTL))
	worker := uniqueName("w")
	ids := b.claim(worker, 10_000)
	require.Equal(t, readyJobIDs(jobs), ids)
	require.Equal(t, ids, b.inflight(worker))
	b.remove(worker, ids...)
	require.Empty(t, b.inflight(worker))
	require.Equal(t, n, b.push(jobs, heldLockTTL))
}

func testDispatcherReadyLen(t *testing.T, newDispatcher NewDispatcherFunc) {
	b := dispatcherSetup(t, newDispatcher)
	require.EqualValues(t, 0, b.readyLen())
	require.Equal(t, 10, b.push(readyJobs(10), heldLockTTL))
	require.EqualValues(t, 10, b.readyLen())
	require.Len(t, b.claim(uniqueName("w"), 3), 3)
	require.EqualValues(t, 7, b.readyLen())
	require.Len(t, b.claim(uniqueName("w"), 7), 7)
	require.EqualValues(t, 0, b.readyLen())
}

func testDispatcherQueuesAreSeparate(t *testing.T, newDispatcher NewDispatcherFunc) {
	b := dispatcherSetup(t, newDispatcher)
	other := &dispatcherBundle{t: t, d: b.d, ctx: b.ctx, queue: uniqueName("dq")}
	jobs := readyJobs(3)
	require.Equal(t, 3, b.push(jobs, heldLockTTL))
	require.EqualValues(t, 0, other.readyLen())
	worker := uniqueName("w")
	require.Empty(t, other.claim(worker, 10))

	// Locks are per queue: the same job id offered to another queue is not blocked.
	require.Equal(t, 3, other.push(jobs, heldLockTTL))
	require.Equal(t, readyJobIDs(jobs), b.claim(worker, 10))
	require.Empty(t, other.inflight(worker), "in-flight lists are per queue")
	require.Equal(t, readyJobIDs(jobs), other.claim(worker, 10))
}

func testDispatcherInvalid(t *testing.T, newDispatcher NewDispatcherFunc) {
	b := dispatcherSetup(t, newDispatcher)
	ok := readyJobs(2)
	worker := uniqueName("w")
	badPriority := store.DueJob{ID: uuid.NewString(), Priority: queue.MaxPriority + 1, CreatedAt: time.Now()}

	for name, p := range map[string]store.ReadyPushParams{
		"bad queue":    {Queue: "Not A Queue", Jobs: ok, LockTTL: heldLockTTL},
		"empty queue":  {Queue: "", Jobs: ok, LockTTL: heldLockTTL},
		"zero ttl":     {Queue: b.queue, Jobs: ok, LockTTL: 0},
		"negative ttl": {Queue: b.queue, Jobs: ok, LockTTL: -time.Second},
		"priority":     {Queue: b.queue, Jobs: append(slices.Clone(ok), badPriority), LockTTL: heldLockTTL},
		"negative":     {Queue: b.queue, Jobs: []store.DueJob{{ID: uuid.NewString(), Priority: -1}}, LockTTL: heldLockTTL},
		"empty id":     {Queue: b.queue, Jobs: []store.DueJob{{ID: ""}}, LockTTL: heldLockTTL},
	} {
		n, err := b.d.ReadyPush(b.ctx, p)
		require.ErrorIs(t, err, queue.ErrInvalidArgument, name)
		require.Zero(t, n, name)
	}
	require.EqualValues(t, 0, b.readyLen(), "a refused batch adds nothing")
	require.Equal(t, 2, b.push(ok, heldLockTTL), "and takes no locks")

	for name, p := range map[string]store.ClaimParams{
		"bad queue":    {Queue: "Not A Queue", WorkerID: worker, Max: 1},
		"empty worker": {Queue: b.queue, WorkerID: "", Max: 1},
		"zero max":     {Queue: b.queue, WorkerID: worker, Max: 0},
		"negative max": {Queue: b.queue, WorkerID: worker, Max: -1},
	} {
		_, err := b.d.Claim(b.ctx, p)
		require.ErrorIs(t, err, queue.ErrInvalidArgument, name)
	}
	require.EqualValues(t, 2, b.readyLen(), "a refused claim takes nothing")

	for name, p := range map[string]store.InflightParams{
		"bad queue":    {Queue: "Not A Queue", WorkerID: worker, IDs: []string{ok[0].ID}},
		"empty worker": {Queue: b.queue, WorkerID: "", IDs: []string{ok[0].ID}},
		"empty id":     {Queue: b.queue, WorkerID: worker, IDs: []string{""}},
	} {
		require.ErrorIs(t, b.d.InflightRemove(b.ctx, p), queue.ErrInvalidArgument, name)
	}
	_, err := b.d.InflightList(b.ctx, b.queue, "")
	require.ErrorIs(t, err, queue.ErrInvalidArgument)
	_, err = b.d.InflightList(b.ctx, "Not A Queue", worker)
	require.ErrorIs(t, err, queue.ErrInvalidArgument)
	_, err = b.d.ReadyLen(b.ctx, "Not A Queue")
	require.ErrorIs(t, err, queue.ErrInvalidArgument)
}

// BenchDispatcher measures one dispatch round trip set — ReadyPush, Claim and InflightRemove of a
// 100-job batch — and reports jobs/s. The same ids cycle through: InflightRemove releases their
// locks, so every push adds all of them again.
func BenchDispatcher(b *testing.B, d store.Dispatcher) {
	const batch = 100
	ctx := context.Background()
	q, worker := uniqueName("bench"), uniqueName("w")
	jobs := readyJobs(batch)
	for i := range jobs {
		jobs[i].Priority = i % (queue.MaxPriority + 1)
	}
	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		n, err := d.ReadyPush(ctx, store.ReadyPushParams{Queue: q, Jobs: jobs, LockTTL: heldLockTTL})
		if err != nil {
			b.Fatal(err)
		}
		if n != batch {
			b.Fatalf("pushed %d, want %d", n, batch)
		}
		ids, err := d.Claim(ctx, store.ClaimParams{Queue: q, WorkerID: worker, Max: batch})
		if err != nil {
			b.Fatal(err)
		}
		if len(ids) != batch {
			b.Fatalf("claimed %d, want %d", len(ids), batch)
		}
		if err := d.InflightRemove(ctx, store.InflightParams{Queue: q, WorkerID: worker, IDs: ids}); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(b.N*batch)/b.Elapsed().Seconds(), "jobs/s")
}
