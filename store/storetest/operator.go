package storetest

import (
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/jq-dev/jq/queue"
	"github.com/jq-dev/jq/store"
)

// operatorSuite runs the contract of store.OperatorStore and of JobLeasesToCancel. Subtests run in parallel.
//
// The store also implements store.DispatchStore (to bring jobs into the states those act on) and
// store.RecoveryStore, whose JobLeasesToCancel is the heartbeat's lease check.
func operatorSuite(t *testing.T, f Factory) {
	newStore := sharedStore(f)
	t.Run("JobCancel", func(t *testing.T) { t.Parallel(); runJobCancelTests(t, newStore) })
	t.Run("JobRetry", func(t *testing.T) { t.Parallel(); runJobRetryTests(t, newStore) })
	t.Run("WorkerRequestShutdown", func(t *testing.T) { t.Parallel(); runWorkerShutdownTests(t, newStore) })
	t.Run("JobLeasesToCancel", func(t *testing.T) { t.Parallel(); runLeasesToCancelTests(t, newStore) })
}

type opBundle struct {
	*dsBundle
	op interface {
		store.JobStore
		store.OperatorStore
		store.RecoveryStore
	}
}

func setupOperator(t *testing.T, newStore NewStoreFunc) *opBundle {
	t.Helper()
	b := setupDispatchStore(t, newStore)
	return &opBundle{dsBundle: b, op: as[interface {
		store.JobStore
		store.OperatorStore
		store.RecoveryStore
	}](t, b.s)}
}

// assigned returns a new job ASSIGNED to worker at attempt 1.
func (b *opBundle) assigned(worker string) *queue.Job {
	b.t.Helper()
	return b.assignOne(worker, b.insertOne(b.job("t")))
}

// running returns a new job RUNNING on worker at attempt 1.
func (b *opBundle) running(worker string) *queue.Job {
	b.t.Helper()
	return b.requireApplied(b.ack(leaseOf(b.assigned(worker)))[0], queue.StateRunning)
}

// inState returns a new job in state s, reached the way the system gets there.
func (b *opBundle) inState(s queue.State) *queue.Job {
	b.t.Helper()
	w := uniqueName("w")
	switch s {
	case queue.StatePending:
		return b.insertOne(b.job("t"))
	case queue.StateAssigned:
		return b.assigned(w)
	case queue.StateRunning:
		return b.running(w)
	case queue.StateDone:
		return b.requireApplied(b.report(reportSuccess(b.running(w), "r"))[0], queue.StateDone)
	case queue.StateFailed:
		return b.requireApplied(b.report(reportFailure(b.running(w), "boom", "error"))[0], queue.StateFailed)
	case queue.StateDeadLettered:
		return b.move(b.insertOne(b.job("t")), queue.StateDeadLettered, store.JobTransitionParams{Reason: "test"})
	}
	b.t.Fatalf("no path to %s", s)
	return nil
}

// requireHistory checks that a job's events form one chain ending in its current state.
func (b *opBundle) requireHistory(id string) []queue.Event {
	b.t.Helper()
	j := b.get(id)
	evs := b.events(id)
	require.NotEmpty(b.t, evs)
	for i, e := range evs {
		require.Equal(b.t, int64(i+1), e.Seq, "events are numbered 1..n")
		if i > 0 {
			require.Equal(b.t, evs[i-1].To, e.From, "event %d leaves the state event %d entered", i+1, i)
		}
	}
	require.Equal(b.t, j.State, evs[len(evs)-1].To, "the last event enters the job's state")
	return evs
}

func runJobCancelTests(t *testing.T, newStore NewStoreFunc) {
	for _, from := range []queue.State{queue.StatePending, queue.StateAssigned, queue.StateFailed} {
		t.Run("From"+string(from), func(t *testing.T) {
			b := setupOperator(t, newStore)
			j := b.inState(from)
			before := b.events(j.ID)

			got, err := cancelJob(b.ctx, b.op, j.ID)
			require.NoError(t, err)
			require.Equal(t, got, b.get(j.ID), "the stored job is returned")
			require.Equal(t, queue.StateDeadLettered, got.State)
			require.Equal(t, queue.ReasonCancelled, got.FailureReason)
			require.Equal(t, got.UpdatedAt, got.CompletedAt)
			require.False(t, got.CancelRequested)
			require.Equal(t, j.Attempt, got.Attempt)
			require.Equal(t, j.WorkerID, got.WorkerID)
			require.Equal(t, j.LastError, got.LastError, "the last error is kept")

			evs := b.requireHistory(j.ID)
			require.Len(t, evs, len(before)+1, "one event")
			e := evs[len(evs)-1]
			b.requireEvent(e, int64(len(evs)), from, queue.StateDeadLettered, queue.ReasonCancelled, j.WorkerID, j.Attempt)
			require.Equal(t, got.UpdatedAt, e.At)
		})
	}

	t.Run("FromRunning", func(t *testing.T) {
		b := setupOperator(t, newStore)
		j := b.running(uniqueName("w"))

		got, err := cancelJob(b.ctx, b.op, j.ID)
		require.NoError(t, err)
		require.Equal(t, got, b.get(j.ID))
		require.Equal(t, queue.StateRunning, got.State, "cancellation of a running job is cooperative")
		require.True(t, got.CancelRequested)
		require.Empty(t, got.FailureReason)
		require.True(t, got.CompletedAt.IsZero())
		require.Len(t, b.requireHistory(j.ID), 3, "no event: the state did not change")

		again, err := cancelJob(b.ctx, b.op, j.ID)
		require.NoError(t, err, "cancelling twice is not an error")
		require.Equal(t, got, again, "the second cancel changes nothing")
		require.Len(t, b.events(j.ID), 3)

		// The worker's answer: the failure records the cancellation; a success that wins keeps the flag.
		failed := b.requireApplied(b.report(reportFailure(j, "context canceled", queue.ReasonCancelled))[0], queue.StateFailed)
		require.True(t, failed.CancelRequested)
		require.Equal(t, queue.ReasonCancelled, failed.FailureReason)
	})

	t.Run("AssignedLeaseIsFenced", func(t *testing.T) {
		b := setupOperator(t, newStore)
		j := b.assigned(uniqueName("w"))
		_, err := cancelJob(b.ctx, b.op, j.ID)
		require.NoError(t, err)
		require.ErrorIs(t, b.ack(leaseOf(j))[0].Err, queue.ErrStaleAttempt, "the holder's ack is refused")
		require.ErrorIs(t, b.report(reportSuccess(j, "r"))[0].Err, queue.ErrStaleAttempt, "and its report")
		require.Equal(t, queue.StateDeadLettered, b.get(j.ID).State)
	})

	for _, from := range []queue.State{queue.StateDone, queue.StateDeadLettered} {
		t.Run("Refused"+string(from), func(t *testing.T) {
			b := setupOperator(t, newStore)
			j := b.inState(from)
			n := len(b.events(j.ID))
			_, err := cancelJob(b.ctx, b.op, j.ID)
			require.ErrorIs(t, err, queue.ErrIllegalTransition)
			require.ErrorContains(t, err, string(from))
			require.ErrorContains(t, err, "nothing to cancel")
			b.requireUntouched(j, n)
		})
	}

	t.Run("NotFoundAndInvalid", func(t *testing.T) {
		b := setupOperator(t, newStore)
		_, err := cancelJob(b.ctx, b.op, uuid.NewString())
		require.ErrorIs(t, err, queue.ErrJobNotFound)
		_, err = cancelJob(b.ctx, b.op, "not-a-uuid")
		require.ErrorIs(t, err, queue.ErrInvalidArgument)
	})

	t.Run("ConcurrentCancels", func(t *testing.T) {
		b := setupOperator(t, newStore)
		j := b.insertOne(b.job("t"))
		const callers = 10
		var (
			wg      sync.WaitGroup
			mu      sync.Mutex
			wins    int
			refused int
			others  []error
			start   = make(chan struct{})
		)
		for range callers {
			wg.Go(func() {
				<-start
				_, err := cancelJob(b.ctx, b.op, j.ID)
				mu.Lock()
				defer mu.Unlock()
				switch {
				case err == nil:
					wins++
				case errors.Is(err, queue.ErrIllegalTransition):
					refused++
				default:
					others = append(others, err)
				}
			})
		}
		close(start)
		wg.Wait()
		require.Empty(t, others)
		require.Equal(t, 1, wins, "exactly one cancel dead-letters the job")
		require.Equal(t, callers-1, refused, "the others find it DEAD_LETTERED")
		require.Len(t, b.requireHistory(j.ID), 2)
	})

	// A worker's report and an operator's cancel racing over ASSIGNED jobs (the report acks them on
	// the way): exactly one wins each job, and its history is one of the two legal ones.
	t.Run("CancelReportRaceAssigned", func(t *testing.T) {
		b := setupOperator(t, newStore)
		w := uniqueName("w")
		jobs, reports := b.leasedBatch(w, 30, false)
		reps, cancels := b.raceCancelReport(jobs, reports)
		for i, j := range jobs {
			got := b.get(j.ID)
			evs := b.requireHistory(j.ID)
			if cancels[i] == nil {
				require.ErrorIs(t, reps[i].Err, queue.ErrStaleAttempt, "job %d: cancelled first, the report is stale", i)
				require.Equal(t, queue.StateDeadLettered, got.State)
				require.Len(t, evs, 3)
				b.requireEvent(evs[2], 3, queue.StateAssigned, queue.StateDeadLettered, queue.ReasonCancelled, w, 1)
				continue
			}
			require.ErrorIs(t, cancels[i], queue.ErrIllegalTransition, "job %d: reported first, nothing to cancel", i)
			b.requireApplied(reps[i], queue.StateDone)
			require.Len(t, evs, 4)
			b.requireEvent(evs[3], 4, queue.StateRunning, queue.StateDone, queue.ReasonSucceeded, w, 1)
		}
	})

	// The same race over RUNNING jobs: the report always applies (cancellation is cooperative), and
	// the job records whether the cancel came first.
	t.Run("CancelReportRaceRunning", func(t *testing.T) {
		b := setupOperator(t, newStore)
		w := uniqueName("w")
		jobs, reports := b.leasedBatch(w, 30, true)
		reps, cancels := b.raceCancelReport(jobs, reports)
		for i, j := range jobs {
			done := b.requireApplied(reps[i], queue.StateDone)
			if cancels[i] == nil {
				require.True(t, done.CancelRequested, "job %d: the cancel came too late, and it shows", i)
			} else {
				require.ErrorIs(t, cancels[i], queue.ErrIllegalTransition, "job %d", i)
				require.False(t, done.CancelRequested, "job %d", i)
			}
			require.Len(t, b.requireHistory(j.ID), 4, "job %d: no cancel event", i)
		}
	})
}

// leasedBatch returns n jobs ASSIGNED to worker (RUNNING when acked) and a success report for each.
func (b *opBundle) leasedBatch(worker string, n int, acked bool) ([]*queue.Job, []store.JobReportParams) {
	b.t.Helper()
	jobs := make([]*queue.Job, n)
	reports := make([]store.JobReportParams, n)
	for i, j := range b.insertN(n) {
		jobs[i] = b.assignOne(worker, j)
		if acked {
			jobs[i] = b.requireApplied(b.ack(leaseOf(jobs[i]))[0], queue.StateRunning)
		}
		reports[i] = reportSuccess(jobs[i], "r")
	}
	return jobs, reports
}

// raceCancelReport reports every job in one batch while cancelling each of them, in the opposite
// order, and returns the report outcomes and the cancel errors, both in the order of jobs.
func (b *opBundle) raceCancelReport(jobs []*queue.Job, reports []store.JobReportParams) ([]store.LeaseOutcome, []error) {
	b.t.Helper()
	var (
		wg        sync.WaitGroup
		reps      []store.LeaseOutcome
		errReport error
		cancels   = make([]error, len(jobs))
		start     = make(chan struct{})
	)
	wg.Go(func() { <-start; reps, errReport = b.ds.JobReportMany(b.ctx, reports) })
	wg.Go(func() {
		<-start
		for i := len(jobs) - 1; i >= 0; i-- {
			_, cancels[i] = cancelJob(b.ctx, b.op, jobs[i].ID)
		}
	})
	close(start)
	wg.Wait()
	require.NoError(b.t, errReport)
	require.Len(b.t, reps, len(jobs))
	won := 0
	for i, err := range cancels {
		if err != nil {
			require.ErrorIs(b.t, err, queue.ErrIllegalTransition, "job %d", i)
			continue
		}
		won++
	}
	b.t.Logf("the cancel came first for %d of %d jobs", won, len(jobs))
	return reps, cancels
}

func runJobRetryTests(t *testing.T, newStore NewStoreFunc) {
	for _, from := range []queue.State{queue.StateFailed, queue.StateDeadLettered} {
		t.Run("From"+string(from), func(t *testing.T) {
			b := setupOperator(t, newStore)
			j := b.inState(from)
			n := len(b.events(j.ID))

			got, err := retryJob(b.ctx, b.op, j.ID)
			require.NoError(t, err)
			require.Equal(t, got, b.get(j.ID), "the stored job is returned")
			require.Equal(t, queue.StatePending, got.State)
			require.Zero(t, got.RetryCount)
			require.WithinDuration(t, time.Now(), got.NotBefore, 5*time.Second, "due now, by the caller's clock")
			require.True(t, got.ExpiresAt.IsZero(), "no TTL, no expiry")
			require.True(t, got.CompletedAt.IsZero())
			require.Equal(t, j.Attempt, got.Attempt, "the attempt counter keeps its value until the next assignment")
			require.Equal(t, j.WorkerID, got.WorkerID)

			evs := b.requireHistory(j.ID)
			require.Len(t, evs, n+1)
			b.requireEvent(evs[n], int64(n+1), from, queue.StatePending, queue.ReasonManualRetry, j.WorkerID, j.Attempt)
			require.Equal(t, got.UpdatedAt, evs[n].At)

			require.Len(t, b.due(10), 1, "the job is due again")
		})
	}

	t.Run("ResetsBudgetFlagsAndTTL", func(t *testing.T) {
		b := setupOperator(t, newStore)
		p := b.job("t")
		p.TTL = time.Hour
		p.MaxRetries = ptr(3)
		j := b.insertOne(p)
		w := uniqueName("w")
		// One automatic retry, then a running attempt is cancelled and fails permanently.
		j = b.assignOne(w, j)
		j = b.requireApplied(b.report(reportFailure(j, "first", "error"))[0], queue.StateFailed)
		j = b.move(j, queue.StatePending, store.JobTransitionParams{Reason: queue.ReasonRetry})
		require.Equal(t, 1, j.RetryCount)
		j = b.requireApplied(b.ack(leaseOf(b.assignOne(w, j)))[0], queue.StateRunning)
		_, err := cancelJob(b.ctx, b.op, j.ID)
		require.NoError(t, err)
		r := reportFailure(j, "second", queue.ReasonCancelled)
		r.Permanent = true
		j = b.requireApplied(b.report(r)[0], queue.StateFailed)
		require.True(t, j.NoRetry)
		require.True(t, j.CancelRequested)

		got, err := retryJob(b.ctx, b.op, j.ID)
		require.NoError(t, err)
		require.Equal(t, queue.StatePending, got.State)
		require.Zero(t, got.RetryCount)
		require.False(t, got.NoRetry, "the permanent flag is cleared")
		require.False(t, got.CancelRequested, "the cancel flag is cleared")
		require.Equal(t, got.NotBefore.Add(time.Hour), got.ExpiresAt, "the TTL runs again from now")
		require.Equal(t, 2, got.Attempt)
		require.Equal(t, "second", got.LastError, "the history of the failure is kept")

		again := b.requireApplied(b.ack(leaseOf(b.assignOne(w, got)))[0], queue.StateRunning)
		require.Equal(t, 3, again.Attempt, "the next assignment is a new attempt")
		b.requireHistory(j.ID)
	})

	for _, from := range []queue.State{queue.StatePending, queue.StateAssigned, queue.StateRunning, queue.StateDone} {
		t.Run("Refused"+string(from), func(t *testing.T) {
			b := setupOperator(t, newStore)
			j := b.inState(from)
			n := len(b.events(j.ID))
			_, err := retryJob(b.ctx, b.op, j.ID)
			require.ErrorIs(t, err, queue.ErrIllegalTransition)
			require.ErrorContains(t, err, string(from))
			b.requireUntouched(j, n)
		})
	}

	t.Run("NotFoundAndInvalid", func(t *testing.T) {
		b := setupOperator(t, newStore)
		_, err := retryJob(b.ctx, b.op, uuid.NewString())
		require.ErrorIs(t, err, queue.ErrJobNotFound)
		_, err = retryJob(b.ctx, b.op, "not-a-uuid")
		require.ErrorIs(t, err, queue.ErrInvalidArgument)
	})

	t.Run("ConcurrentRetries", func(t *testing.T) {
		b := setupOperator(t, newStore)
		j := b.inState(queue.StateDeadLettered)
		const callers = 10
		var (
			wg      sync.WaitGroup
			mu      sync.Mutex
			wins    int
			refused int
			others  []error
			start   = make(chan struct{})
		)
		for range callers {
			wg.Go(func() {
				<-start
				_, err := retryJob(b.ctx, b.op, j.ID)
				mu.Lock()
				defer mu.Unlock()
				switch {
				case err == nil:
					wins++
				case errors.Is(err, queue.ErrIllegalTransition):
					refused++
				default:
					others = append(others, err)
				}
			})
		}
		close(start)
		wg.Wait()
		require.Empty(t, others)
		require.Equal(t, 1, wins, "exactly one retry re-enqueues the job")
		require.Equal(t, callers-1, refused)
		require.Len(t, b.requireHistory(j.ID), 3)
	})
}

func runWorkerShutdownTests(t *testing.T, newStore NewStoreFunc) {
	for _, status := range []queue.WorkerStatus{queue.WorkerOnline, queue.WorkerDraining} {
		t.Run("From"+string(status), func(t *testing.T) {
			b := setupOperator(t, newStore)
			w := b.register(uniqueName("w"))
			if status != queue.WorkerOnline {
				_, err := b.s.WorkerSetStatus(b.ctx, store.WorkerSetStatusParams{ID: w.ID, Status: status})
				require.NoError(t, err)
			}
			got, err := b.op.WorkerRequestShutdown(b.ctx, w.ID)
			require.NoError(t, err)
			require.Equal(t, queue.WorkerDraining, got.Status)
			require.True(t, got.ShutdownRequested)
			stored, err := b.s.WorkerGet(b.ctx, w.ID)
			require.NoError(t, err)
			require.Equal(t, got, stored)

			again, err := b.op.WorkerRequestShutdown(b.ctx, w.ID)
			require.NoError(t, err, "idempotent")
			require.Equal(t, got, again)

			hb, err := b.s.WorkerHeartbeat(b.ctx, store.WorkerHeartbeatParams{ID: w.ID})
			require.NoError(t, err)
			require.True(t, hb.ShutdownRequested, "the heartbeat sees the request")
			require.Equal(t, queue.WorkerDraining, hb.Status)
		})
	}

	t.Run("RegisterAgainClears", func(t *testing.T) {
		b := setupOperator(t, newStore)
		w := b.register(uniqueName("w"))
		_, err := b.op.WorkerRequestShutdown(b.ctx, w.ID)
		require.NoError(t, err)
		w = b.register(w.ID)
		require.Equal(t, queue.WorkerOnline, w.Status)
		require.False(t, w.ShutdownRequested, "a restarted process starts afresh")
	})

	t.Run("Refused", func(t *testing.T) {
		b := setupOperator(t, newStore)
		w := b.register(uniqueName("w"))
		require.NoError(t, b.s.WorkerDeregister(b.ctx, w.ID))
		_, err := b.op.WorkerRequestShutdown(b.ctx, w.ID)
		require.ErrorIs(t, err, queue.ErrIllegalTransition)
		require.ErrorContains(t, err, "OFFLINE")
		got, err := b.s.WorkerGet(b.ctx, w.ID)
		require.NoError(t, err)
		require.Equal(t, queue.WorkerOffline, got.Status)
		require.False(t, got.ShutdownRequested)

		_, err = b.op.WorkerRequestShutdown(b.ctx, uniqueName("missing"))
		require.ErrorIs(t, err, queue.ErrWorkerNotFound)
	})
}

func runLeasesToCancelTests(t *testing.T, newStore NewStoreFunc) {
	t.Run("Classifies", func(t *testing.T) {
		b := setupOperator(t, newStore)
		w, other := uniqueName("w"), uniqueName("w")
		assigned := b.assigned(w)
		running := b.running(w)
		cancelled := b.running(w)
		_, err := cancelJob(b.ctx, b.op, cancelled.ID)
		require.NoError(t, err)
		done := b.requireApplied(b.report(reportSuccess(b.running(w), "r"))[0], queue.StateDone)
		othersJob := b.assigned(other)
		// Lost and given again: the lease of attempt 1 is stale, attempt 2 belongs to another worker.
		moved := b.assigned(w)
		moved = b.requireApplied(b.report(reportFailure(moved, "lost", queue.ReasonWorkerLost))[0], queue.StateFailed)
		moved = b.move(moved, queue.StatePending, store.JobTransitionParams{Reason: queue.ReasonRetry})
		moved = b.assignOne(other, moved)
		unknown := uuid.NewString()

		leases := []store.JobLease{
			leaseOf(assigned),
			leaseOf(running),
			leaseOf(cancelled),
			{ID: done.ID, Attempt: 1},
			{ID: othersJob.ID, Attempt: 1},
			{ID: moved.ID, Attempt: 1},
			{ID: unknown, Attempt: 1},
			{ID: "not-a-uuid", Attempt: 1},
			{ID: running.ID, Attempt: 2}, // an attempt the job has not reached, next to the current one
			leaseOf(cancelled),           // listed twice
		}
		got, err := b.op.JobLeasesToCancel(b.ctx, w, leases)
		require.NoError(t, err)
		require.Equal(t, []string{cancelled.ID, done.ID, othersJob.ID, moved.ID, unknown}, got,
			"stale, unknown and cancel-requested jobs, once each, in the order given; a job with a current "+
				"lease is kept whatever other attempts of it are listed")

		// Re-dispatched to the same worker: its stale attempt 1 still runs next to attempt 2. The list
		// names jobs, so cancelling the stale attempt would cancel the current one too.
		again := b.assigned(w)
		again = b.requireApplied(b.report(reportFailure(again, "slow", queue.ReasonTimeout))[0], queue.StateFailed)
		again = b.move(again, queue.StatePending, store.JobTransitionParams{Reason: queue.ReasonRetry})
		again = b.assignOne(w, again)
		got, err = b.op.JobLeasesToCancel(b.ctx, w, []store.JobLease{{ID: again.ID, Attempt: 1}, leaseOf(again)})
		require.NoError(t, err)
		require.Empty(t, got, "the current attempt keeps the job")

		got, err = b.op.JobLeasesToCancel(b.ctx, w, []store.JobLease{leaseOf(assigned), leaseOf(running)})
		require.NoError(t, err)
		require.Empty(t, got, "current leases are kept")
		got, err = b.op.JobLeasesToCancel(b.ctx, other, []store.JobLease{leaseOf(othersJob), leaseOf(moved)})
		require.NoError(t, err)
		require.Empty(t, got)
	})

	t.Run("CanonicalIDs", func(t *testing.T) {
		b := setupOperator(t, newStore)
		id := uuid.New()
		got, err := b.op.JobLeasesToCancel(b.ctx, uniqueName("w"), []store.JobLease{{ID: "urn:uuid:" + id.String(), Attempt: 1}})
		require.NoError(t, err)
		require.Equal(t, []string{id.String()}, got)
	})

	t.Run("EmptyAndTooMany", func(t *testing.T) {
		b := setupOperator(t, newStore)
		got, err := b.op.JobLeasesToCancel(b.ctx, uniqueName("w"), nil)
		require.NoError(t, err)
		require.Empty(t, got)
		_, err = b.op.JobLeasesToCancel(b.ctx, uniqueName("w"), make([]store.JobLease, store.MaxDispatchBatch+1))
		require.ErrorIs(t, err, queue.ErrInvalidArgument)
	})
}
