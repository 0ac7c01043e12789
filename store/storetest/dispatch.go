package storetest

import (
	"cmp"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/jq-dev/jq/queue"
	"github.com/jq-dev/jq/store"
	"github.com/jq-dev/jq/store/internal/sqlstore"
)

// dispatchSuite runs the contract of store.DispatchStore. Subtests run in parallel.
func dispatchSuite(t *testing.T, f Factory) {
	newStore := sharedStore(f)
	t.Run("JobDue", func(t *testing.T) { t.Parallel(); runJobDueTests(t, newStore) })
	t.Run("JobClaim", func(t *testing.T) { t.Parallel(); runJobClaimTests(t, newStore) })
	t.Run("JobClaimWeighted", func(t *testing.T) { t.Parallel(); runJobClaimWeightedTests(t, newStore) })
	t.Run("JobAssignMany", func(t *testing.T) { t.Parallel(); runJobAssignTests(t, newStore) })
	t.Run("JobAckMany", func(t *testing.T) { t.Parallel(); runJobAckTests(t, newStore) })
	t.Run("JobReportMany", func(t *testing.T) { t.Parallel(); runJobReportTests(t, newStore) })
	t.Run("Path", func(t *testing.T) { t.Parallel(); runDispatchPathTests(t, newStore) })
}

// dsBundle is a bundle whose store also implements store.DispatchStore.
type dsBundle struct {
	*bundle
	ds store.DispatchStore
}

func setupDispatchStore(t *testing.T, newStore NewStoreFunc) *dsBundle {
	t.Helper()
	b := setup(t, newStore)
	return &dsBundle{bundle: b, ds: as[store.DispatchStore](t, b.s)}
}

func (b *dsBundle) due(limit int) []store.DueJob {
	b.t.Helper()
	due, err := b.ds.JobDue(b.ctx, store.JobDueParams{Queue: b.queue, Limit: limit})
	require.NoError(b.t, err)
	return due
}

func (b *dsBundle) assign(worker string, ids ...string) []*queue.Job {
	b.t.Helper()
	jobs, err := b.ds.JobAssignMany(b.ctx, store.JobAssignParams{WorkerID: worker, IDs: ids})
	require.NoError(b.t, err)
	return jobs
}

// assignOne assigns a PENDING job that must be assigned.
func (b *dsBundle) assignOne(worker string, j *queue.Job) *queue.Job {
	b.t.Helper()
	jobs := b.assign(worker, j.ID)
	require.Len(b.t, jobs, 1)
	return jobs[0]
}

func (b *dsBundle) ack(leases ...store.JobLease) []store.LeaseOutcome {
	b.t.Helper()
	out, err := b.ds.JobAckMany(b.ctx, leases)
	require.NoError(b.t, err)
	require.Len(b.t, out, len(leases))
	return out
}

func (b *dsBundle) report(reports ...store.JobReportParams) []store.LeaseOutcome {
	b.t.Helper()
	out, err := b.ds.JobReportMany(b.ctx, reports)
	require.NoError(b.t, err)
	require.Len(b.t, out, len(reports))
	return out
}

// insertN inserts n jobs of type "t" in one batch, with keep_result so that their results are stored.
func (b *dsBundle) insertN(n int) []*queue.Job {
	b.t.Helper()
	ps := make([]store.JobInsertParams, n)
	for i := range ps {
		ps[i] = b.job("t")
		ps[i].KeepResult = true
	}
	jobs := make([]*queue.Job, n)
	for i, r := range b.insert(ps...) {
		jobs[i] = r.Job
	}
	return jobs
}

func leaseOf(j *queue.Job) store.JobLease {
	return store.JobLease{ID: j.ID, Attempt: j.Attempt, WorkerID: j.WorkerID}
}

func reportSuccess(j *queue.Job, result string) store.JobReportParams {
	return store.JobReportParams{JobLease: leaseOf(j), Success: true, Result: []byte(result)}
}

func reportFailure(j *queue.Job, msg, reason string) store.JobReportParams {
	return store.JobReportParams{JobLease: leaseOf(j), Error: msg, Reason: reason}
}

// requireApplied checks that an outcome applied and carries the stored job (lean: sqlstore.LeanJob), and
// returns the stored job.
func (b *dsBundle) requireApplied(o store.LeaseOutcome, want queue.State) *queue.Job {
	b.t.Helper()
	require.NoError(b.t, o.Err)
	require.NotNil(b.t, o.Job)
	require.Equal(b.t, o.ID, o.Job.ID)
	require.Equal(b.t, want, o.Job.State)
	stored := b.get(o.ID)
	require.Equal(b.t, sqlstore.LeanJob(stored), o.Job, "the outcome carries the stored job, lean")
	return stored
}

// requireUntouched checks that a job and its history are as before.
func (b *dsBundle) requireUntouched(j *queue.Job, events int) {
	b.t.Helper()
	require.Equal(b.t, j, b.get(j.ID), "nothing changed")
	require.Len(b.t, b.events(j.ID), events, "no event written")
}

// requireEvent checks the last event of a job.
func (b *dsBundle) requireEvent(e queue.Event, seq int64, from, to queue.State, reason, worker string, attempt int) {
	b.t.Helper()
	require.Equal(b.t, seq, e.Seq)
	require.Equal(b.t, from, e.From, "event %d", seq)
	require.Equal(b.t, to, e.To, "event %d", seq)
	require.Equal(b.t, reason, e.Reason, "event %d", seq)
	require.Equal(b.t, worker, e.WorkerID, "event %d", seq)
	require.Equal(b.t, attempt, e.Attempt, "event %d", seq)
	require.Equal(b.t, b.queue, e.Queue)
}

func runJobDueTests(t *testing.T, newStore NewStoreFunc) {
	t.Run("Order", func(t *testing.T) {
		b := setupDispatchStore(t, newStore)
		job := func(prio int, runAt time.Time) store.JobInsertParams {
			p := b.job("t")
			p.Priority, p.RunAt = prio, runAt
			return p
		}
		var (
			past   = time.Now().Add(-time.Minute)
			future = time.Now().Add(time.Hour)
			due    []*queue.Job
		)
		// Three batches: created_at grows within a batch and between batches.
		for _, batch := range [][]int{{0, 5, 9, 5}, {9, 0, 5}, {5, 9, 0, 9}} {
			var ps []store.JobInsertParams
			for _, prio := range batch {
				ps = append(ps, job(prio, time.Time{}))
			}
			for _, r := range b.insert(ps...) {
				due = append(due, r.Job)
			}
		}
		due = append(due, b.insertOne(job(3, past))) // run_at passed: due
		delayed := b.insertOne(job(9, future))
		taken := b.insertOne(job(9, time.Time{}))
		b.assignOne("w", taken)
		other := b.newQueue(store.QueueCreateParams{})
		b.insert(store.JobInsertParams{Queue: other.Name, Type: "t", Priority: 9})

		slices.SortStableFunc(due, func(x, y *queue.Job) int {
			return cmp.Or(cmp.Compare(y.Priority, x.Priority), x.CreatedAt.Compare(y.CreatedAt),
				strings.Compare(x.ID, y.ID))
		})
		got := b.due(100)
		require.Len(t, got, len(due), "only due PENDING jobs of this queue")
		for i, j := range due {
			require.Equal(t, store.DueJob{ID: j.ID, Priority: j.Priority, CreatedAt: j.CreatedAt}, got[i], "position %d", i)
		}
		for _, d := range got {
			require.NotEqual(t, delayed.ID, d.ID, "not_before in the future")
			require.NotEqual(t, taken.ID, d.ID, "not PENDING")
		}

		require.Equal(t, got[:4], b.due(4), "the limit takes the head of the order")
		require.Len(t, b.due(1), 1)
	})

	t.Run("TiesOnCreatedAtByID", func(t *testing.T) {
		b := setupDispatchStore(t, newStore)
		// Equal priority and run_at: the order is created_at, which JobInsertMany makes distinct;
		// the id only breaks ties a backend's clock might produce. Check the order is total.
		jobs := b.insertN(20)
		got := b.due(20)
		require.Len(t, got, 20)
		for i := 1; i < len(got); i++ {
			prev, cur := got[i-1], got[i]
			require.True(t, prev.CreatedAt.Before(cur.CreatedAt) ||
				(prev.CreatedAt.Equal(cur.CreatedAt) && prev.ID < cur.ID), "position %d", i)
		}
		require.Equal(t, ids(jobs), dueIDs(got), "one batch is due in submit order")
	})

	t.Run("PausedQueue", func(t *testing.T) {
		b := setupDispatchStore(t, newStore)
		b.insertN(3)
		_, err := b.s.QueueSetPaused(b.ctx, store.QueueSetPausedParams{Name: b.queue, Paused: true})
		require.NoError(t, err)
		require.Empty(t, b.due(10), "a paused queue has no due jobs")
		_, err = b.s.QueueSetPaused(b.ctx, store.QueueSetPausedParams{Name: b.queue})
		require.NoError(t, err)
		require.Len(t, b.due(10), 3)
	})

	t.Run("UnknownQueue", func(t *testing.T) {
		b := setupDispatchStore(t, newStore)
		got, err := b.ds.JobDue(b.ctx, store.JobDueParams{Queue: uniqueName("missing"), Limit: 10})
		require.NoError(t, err)
		require.Empty(t, got)
	})

	t.Run("Invalid", func(t *testing.T) {
		b := setupDispatchStore(t, newStore)
		for _, p := range []store.JobDueParams{
			{Queue: b.queue, Limit: 0},
			{Queue: b.queue, Limit: -1},
			{Queue: b.queue, Limit: store.MaxDispatchBatch + 1},
			{Queue: "Not A Queue", Limit: 1},
		} {
			_, err := b.ds.JobDue(b.ctx, p)
			require.ErrorIs(t, err, queue.ErrInvalidArgument, "%+v", p)
		}
	})
}

func (b *dsBundle) claim(worker string, limit int) []*queue.Job {
	b.t.Helper()
	jobs, err := b.ds.JobClaim(b.ctx, store.JobClaimParams{Queue: b.queue, WorkerID: worker, Limit: limit})
	require.NoError(b.t, err)
	return jobs
}

func runJobClaimTests(t *testing.T, newStore NewStoreFunc) {
	// A claim takes the head of JobDue's order and assigns it, with its events.
	t.Run("DispatchOrderAndEvents", func(t *testing.T) {
		b := setupDispatchStore(t, newStore)
		var ps []store.JobInsertParams
		for _, prio := range []int{0, 5, 9, 5, 9, 0, 3} {
			p := b.job("t")
			p.Priority = prio
			ps = append(ps, p)
		}
		b.insert(ps...)
		delayed := b.job("t")
		delayed.Priority, delayed.RunAt = 9, time.Now().Add(time.Hour)
		b.insertOne(delayed)
		other := b.newQueue(store.QueueCreateParams{})
		b.insert(store.JobInsertParams{Queue: other.Name, Type: "t", Priority: 9})

		want := dueIDs(b.due(100))
		require.Len(t, want, len(ps), "the delayed job and the other queue's are not due")
		got := b.claim("w1", 3)
		require.Equal(t, want[:3], ids(got))
		for _, j := range got {
			require.Equal(t, queue.StateAssigned, j.State)
			require.Equal(t, 1, j.Attempt)
			require.Equal(t, "w1", j.WorkerID)
			require.NotEmpty(t, j.Payload, "the assignment carries the payload")
			evs := b.events(j.ID)
			require.Len(t, evs, 2)
			b.requireEvent(evs[1], 2, queue.StatePending, queue.StateAssigned, queue.ReasonAssigned, "w1", 1)
		}
		rest := b.claim("w2", 100)
		require.Equal(t, want[3:], ids(rest), "the rest, and nothing else")
		require.Empty(t, b.claim("w3", 100))
	})

	t.Run("PausedQueue", func(t *testing.T) {
		b := setupDispatchStore(t, newStore)
		b.insertN(3)
		_, err := b.s.QueueSetPaused(b.ctx, store.QueueSetPausedParams{Name: b.queue, Paused: true})
		require.NoError(t, err)
		require.Empty(t, b.claim("w", 10), "a paused queue hands out nothing")
		_, err = b.s.QueueSetPaused(b.ctx, store.QueueSetPausedParams{Name: b.queue})
		require.NoError(t, err)
		require.Len(t, b.claim("w", 10), 3)
	})

	// Claims racing for one backlog never take a job twice, and together take every job.
	t.Run("ConcurrentClaimsAreDisjoint", func(t *testing.T) {
		b := setupDispatchStore(t, newStore)
		jobs := b.insertN(300)
		var (
			mu   sync.Mutex
			seen = map[string]string{}
			wg   sync.WaitGroup
		)
		for w := range 6 {
			wg.Go(func() {
				worker := fmt.Sprintf("w%d", w)
				for {
					got, err := b.ds.JobClaim(b.ctx, store.JobClaimParams{Queue: b.queue, WorkerID: worker, Limit: 7})
					if err != nil {
						t.Error(err)
						return
					}
					if len(got) == 0 {
						return
					}
					mu.Lock()
					for _, j := range got {
						if prev, ok := seen[j.ID]; ok {
							t.Errorf("job %s claimed by %s and %s", j.ID, prev, worker)
						}
						seen[j.ID] = worker
					}
					mu.Unlock()
				}
			})
		}
		wg.Wait()
		require.Len(t, seen, len(jobs))
	})

	// A typed claim takes only jobs of its types, in dispatch order, passing over the others, which
	// stay PENDING and untouched (attempt 0); a claim without types takes every type.
	t.Run("Types", func(t *testing.T) {
		b := setupDispatchStore(t, newStore)
		var ps []store.JobInsertParams
		for i, typ := range []string{"a", "b", "c", "a", "b", "c", "a"} {
			p := b.job(typ)
			p.Priority = i % 3
			ps = append(ps, p)
		}
		b.insert(ps...)
		due := dueIDs(b.due(100))
		typeOf := map[string]string{}
		for _, j := range b.listAll(store.JobListParams{Queue: b.queue}) {
			typeOf[j.ID] = j.Type
		}
		inOrder := func(types ...string) []string {
			var out []string
			for _, id := range due {
				if slices.Contains(types, typeOf[id]) {
					out = append(out, id)
				}
			}
			return out
		}

		got, err := b.ds.JobClaim(b.ctx, store.JobClaimParams{Queue: b.queue, WorkerID: "wa", Limit: 2, Types: []string{"a"}})
		require.NoError(t, err)
		first := ids(got)
		require.Equal(t, inOrder("a")[:2], first, "the first two a jobs, past the b and c ahead of them")
		got, err = b.ds.JobClaim(b.ctx, store.JobClaimParams{Queue: b.queue, WorkerID: "wab", Limit: 100, Types: []string{"b", "a", "x"}})
		require.NoError(t, err)
		rest := slices.DeleteFunc(inOrder("a", "b"), func(id string) bool { return slices.Contains(first, id) })
		require.Equal(t, rest, ids(got), "the other a and every b, in dispatch order")
		for _, j := range got {
			require.Contains(t, []string{"a", "b"}, j.Type)
			require.Equal(t, "wab", j.WorkerID)
		}
		for _, id := range inOrder("c") {
			j := b.get(id)
			require.Equal(t, queue.StatePending, j.State, "a type nobody claimed waits")
			require.Zero(t, j.Attempt, "and costs no attempt")
		}
		got, err = b.ds.JobClaim(b.ctx, store.JobClaimParams{Queue: b.queue, WorkerID: "wx", Limit: 100, Types: []string{"x"}})
		require.NoError(t, err)
		require.Empty(t, got)
		require.Equal(t, inOrder("c"), ids(b.claim("any", 100)), "no types: every type")
	})

	t.Run("UnknownQueue", func(t *testing.T) {
		b := setupDispatchStore(t, newStore)
		got, err := b.ds.JobClaim(b.ctx, store.JobClaimParams{Queue: uniqueName("missing"), WorkerID: "w", Limit: 10})
		require.NoError(t, err)
		require.Empty(t, got)
	})

	t.Run("Invalid", func(t *testing.T) {
		b := setupDispatchStore(t, newStore)
		for _, p := range []store.JobClaimParams{
			{Queue: b.queue, WorkerID: "w", Limit: 0},
			{Queue: b.queue, WorkerID: "w", Limit: store.MaxDispatchBatch + 1},
			{Queue: "Not A Queue", WorkerID: "w", Limit: 1},
			{Queue: b.queue, WorkerID: "", Limit: 1},
			{Queue: b.queue, WorkerID: "w", Limit: 1, Types: []string{""}},
			{Queue: b.queue, WorkerID: "w", Limit: 1, Types: []string{"a", "a"}},
			{Queue: b.queue, WorkerID: "w", Limit: 1, Types: make([]string, store.MaxWorkerTypes+1)},
		} {
			_, err := b.ds.JobClaim(b.ctx, p)
			require.ErrorIs(t, err, queue.ErrInvalidArgument, "%+v", p)
		}
	})
}

func dueIDs(due []store.DueJob) []string {
	out := make([]string, len(due))
	for i, d := range due {
		out[i] = d.ID
	}
	return out
}

func runJobAssignTests(t *testing.T, newStore NewStoreFunc) {
	t.Run("Assigns", func(t *testing.T) {
		b := setupDispatchStore(t, newStore)
		jobs := b.insertN(3)
		worker := uniqueName("w")
		got := b.assign(worker, jobs[2].ID, jobs[0].ID, jobs[1].ID)
		require.Equal(t, []string{jobs[2].ID, jobs[0].ID, jobs[1].ID}, ids(got), "in the order of the ids")
		for _, j := range got {
			require.Equal(t, queue.StateAssigned, j.State)
			require.Equal(t, 1, j.Attempt, "the attempt is the new fencing token")
			require.Equal(t, worker, j.WorkerID)
			require.True(t, j.StartedAt.IsZero())
			require.Equal(t, j, b.get(j.ID), "full rows, as stored")
			evs := b.events(j.ID)
			require.Len(t, evs, 2)
			b.requireEvent(evs[1], 2, queue.StatePending, queue.StateAssigned, queue.ReasonAssigned, worker, 1)
			require.Equal(t, j.UpdatedAt, evs[1].At)
			require.False(t, evs[1].At.Before(evs[0].At))
		}
		require.Equal(t, jobs[0].Payload, got[1].Payload)
	})

	t.Run("AbsentIDs", func(t *testing.T) {
		b := setupDispatchStore(t, newStore)
		jobs := b.insertN(5)
		assigned := b.assignOne("w0", jobs[1])
		done := b.advance(jobs[2], queue.StateAssigned, queue.StateRunning, queue.StateDone)
		dead := b.advance(jobs[3], queue.StateDeadLettered)

		got := b.assign("w1", "not-a-uuid", jobs[4].ID, uuid.NewString(), assigned.ID, "", done.ID,
			strings.ToUpper(jobs[4].ID), dead.ID, jobs[0].ID, jobs[4].ID)
		require.Equal(t, []string{jobs[4].ID, jobs[0].ID}, ids(got),
			"PENDING jobs once each, in order; malformed, unknown and non-PENDING ids are absent")
		b.requireUntouched(assigned, 2)
		b.requireUntouched(done, 4)
		b.requireUntouched(dead, 2)

		require.Empty(t, b.assign("w1", "nope", uuid.NewString()), "nothing to assign is no error")
		require.Empty(t, b.assign("w1"))
	})

	t.Run("PausedQueue", func(t *testing.T) {
		b := setupDispatchStore(t, newStore)
		jobs := b.insertN(2)
		_, err := b.s.QueueSetPaused(b.ctx, store.QueueSetPausedParams{Name: b.queue, Paused: true})
		require.NoError(t, err)
		require.Empty(t, b.assign("w1", jobs[0].ID, jobs[1].ID), "a paused queue dispatches nothing, even claimed jobs")
		b.requireUntouched(jobs[0], 1)
		_, err = b.s.QueueSetPaused(b.ctx, store.QueueSetPausedParams{Name: b.queue})
		require.NoError(t, err)
		require.Len(t, b.assign("w1", jobs[0].ID, jobs[1].ID), 2)
	})

	t.Run("AttemptIncrementsOnReassignment", func(t *testing.T) {
		b := setupDispatchStore(t, newStore)
		j := b.assignOne("w1", b.insertOne(b.job("t")))
		j = b.advance(j, queue.StateFailed, queue.StatePending)
		j = b.assignOne("w2", j)
		require.Equal(t, 2, j.Attempt)
		require.Equal(t, "w2", j.WorkerID)
		evs := b.events(j.ID)
		require.Len(t, evs, 5)
		b.requireEvent(evs[4], 5, queue.StatePending, queue.StateAssigned, queue.ReasonAssigned, "w2", 2)
	})

	t.Run("Invalid", func(t *testing.T) {
		b := setupDispatchStore(t, newStore)
		j := b.insertOne(b.job("t"))
		for _, p := range []store.JobAssignParams{
			{WorkerID: "", IDs: []string{j.ID}},
			{WorkerID: "w\x00", IDs: []string{j.ID}},
			{WorkerID: "w", IDs: make([]string, store.MaxDispatchBatch+1)},
		} {
			_, err := b.ds.JobAssignMany(b.ctx, p)
			require.ErrorIs(t, err, queue.ErrInvalidArgument)
		}
		b.requireUntouched(j, 1)
	})

	t.Run("Concurrent", func(t *testing.T) {
		b := setupDispatchStore(t, newStore)
		jobs := b.insertN(200)
		const assigners = 8
		var (
			wg    sync.WaitGroup
			mu    sync.Mutex
			owner = map[string]string{} // job id → worker
			dups  []string
			errs  []error
		)
		start := make(chan struct{})
		for i := range assigners {
			worker := fmt.Sprintf("w%d-%s", i, b.queue)
			order := ids(jobs)
			rand.Shuffle(len(order), func(x, y int) { order[x], order[y] = order[y], order[x] })
			wg.Go(func() {
				<-start
				got, err := b.ds.JobAssignMany(b.ctx, store.JobAssignParams{WorkerID: worker, IDs: order})
				mu.Lock()
				defer mu.Unlock()
				if err != nil {
					errs = append(errs, err)
					return
				}
				for _, j := range got {
					if _, taken := owner[j.ID]; taken {
						dups = append(dups, j.ID)
					}
					owner[j.ID] = worker
				}
			})
		}
		close(start)
		wg.Wait()
		require.Empty(t, errs)
		require.Empty(t, dups, "no job assigned twice")
		require.Len(t, owner, len(jobs), "every job assigned")
		for _, j := range jobs {
			got := b.get(j.ID)
			require.Equal(t, queue.StateAssigned, got.State)
			require.Equal(t, 1, got.Attempt)
			require.Equal(t, owner[j.ID], got.WorkerID)
			evs := b.events(j.ID)
			require.Len(t, evs, 2, "one assignment event")
			require.Equal(t, owner[j.ID], evs[1].WorkerID)
		}
	})
}
