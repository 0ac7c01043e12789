package storetest

import (
	"time"

	"math"
	"strings"
	"sync"
	"testing"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/jq-dev/jq/queue"
	"github.com/jq-dev/jq/store"
)

func runJobAckTests(t *testing.T, newStore NewStoreFunc) {
	t.Run("Outcomes", func(t *testing.T) {
		b := setupDispatchStore(t, newStore)
		jobs := b.insertN(6)
		w := uniqueName("w")
		applied := b.assignOne(w, jobs[0])
		pending := jobs[1]
		wrongWorker := b.assignOne(w, jobs[2])
		wrongAttempt := b.assignOne(w, jobs[3])
		running := b.assignOne(w, jobs[4])
		running = b.requireApplied(b.ack(leaseOf(running))[0], queue.StateRunning)

		missing := uuid.NewString()
		out := b.ack(
			leaseOf(applied),
			store.JobLease{ID: pending.ID, Attempt: 1, WorkerID: w},
			store.JobLease{ID: missing, Attempt: 1, WorkerID: w},
			store.JobLease{ID: "not-a-uuid", Attempt: 1, WorkerID: w},
			store.JobLease{ID: wrongWorker.ID, Attempt: 1, WorkerID: "someone-else"},
			store.JobLease{ID: wrongAttempt.ID, Attempt: 2, WorkerID: w},
			leaseOf(running),
		)

		j := b.requireApplied(out[0], queue.StateRunning)
		require.True(t, out[0].Started, "the ack started the job")
		require.Equal(t, 1, j.Attempt)
		require.Equal(t, w, j.WorkerID)
		require.False(t, j.StartedAt.IsZero())
		require.Equal(t, j.StartedAt, j.UpdatedAt)
		evs := b.events(j.ID)
		require.Len(t, evs, 3)
		b.requireEvent(evs[2], 3, queue.StateAssigned, queue.StateRunning, queue.ReasonAcked, w, 1)
		require.Equal(t, j.StartedAt, evs[2].At)

		require.ErrorIs(t, out[1].Err, queue.ErrStaleAttempt, "PENDING")
		require.ErrorIs(t, out[2].Err, queue.ErrJobNotFound)
		require.Equal(t, missing, out[2].ID)
		require.ErrorIs(t, out[3].Err, queue.ErrInvalidArgument)
		require.Equal(t, "not-a-uuid", out[3].ID)
		require.ErrorIs(t, out[4].Err, queue.ErrStaleAttempt, "another worker's lease is refused")
		require.ErrorIs(t, out[5].Err, queue.ErrStaleAttempt, "unknown attempt")
		// The same lease acked again (a worker retrying after a lost answer)
		// succeeds without a second event: acks are idempotent.
		again := b.requireApplied(out[6], queue.StateRunning)
		require.Equal(t, running.StartedAt, again.StartedAt)
		require.False(t, out[6].Started, "a repeated ack starts nothing")
		for _, o := range out[1:6] {
			require.Nil(t, o.Job)
		}
		b.requireUntouched(pending, 1)
		b.requireUntouched(wrongWorker, 2)
		b.requireUntouched(wrongAttempt, 2)
		b.requireUntouched(running, 3)
		require.Empty(t, b.ack(), "an empty batch")
	})

	t.Run("StaleAfterReassignment", func(t *testing.T) {
		b := setupDispatchStore(t, newStore)
		first := b.assignOne("w1", b.insertOne(b.job("t")))
		// The reaper fails the unacked assignment, the job is retried and goes to another worker.
		j := b.advance(first, queue.StateFailed, queue.StatePending)
		second := b.assignOne("w2", j)
		require.Equal(t, 2, second.Attempt)

		out := b.ack(leaseOf(first))
		require.ErrorIs(t, out[0].Err, queue.ErrStaleAttempt, "the old attempt's ack is refused")
		b.requireUntouched(second, 5)
		out = b.ack(store.JobLease{ID: second.ID, Attempt: 2, WorkerID: "w1"})
		require.ErrorIs(t, out[0].Err, queue.ErrStaleAttempt, "the current attempt held by another worker")
		b.requireApplied(b.ack(leaseOf(second))[0], queue.StateRunning)
	})

	t.Run("DuplicateIDs", func(t *testing.T) {
		b := setupDispatchStore(t, newStore)
		jobs := b.insertN(2)
		a := b.assignOne("w", jobs[0])
		c := b.assignOne("w", jobs[1])
		staleC := leaseOf(c)
		staleC.Attempt = 7
		missing := uuid.NewString()
		upper := leaseOf(a)
		upper.ID = strings.ToUpper(a.ID)

		out := b.ack(leaseOf(a), staleC, upper, leaseOf(c), leaseOf(a),
			store.JobLease{ID: missing, Attempt: 1, WorkerID: "w"}, store.JobLease{ID: missing, Attempt: 1, WorkerID: "w"})
		b.requireApplied(out[0], queue.StateRunning)
		require.ErrorIs(t, out[1].Err, queue.ErrStaleAttempt)
		// A repeat of the identical lease (in any letter case) shares the first
		// occurrence's outcome: a retried ack merged with the call it retries
		// must not be refused.
		b.requireApplied(out[2], queue.StateRunning)
		require.ErrorIs(t, out[3].Err, queue.ErrStaleAttempt, "only the first occurrence is evaluated, even when stale")
		b.requireApplied(out[4], queue.StateRunning)
		require.ErrorIs(t, out[5].Err, queue.ErrJobNotFound)
		require.ErrorIs(t, out[6].Err, queue.ErrJobNotFound, "a repeat of an unknown id is not found either")
		require.Len(t, b.events(a.ID), 3, "one ack event")
		b.requireUntouched(c, 2)
	})

	t.Run("InvalidLeases", func(t *testing.T) {
		b := setupDispatchStore(t, newStore)
		j := b.assignOne("w", b.insertOne(b.job("t")))
		out := b.ack(
			store.JobLease{ID: j.ID, Attempt: 0, WorkerID: "w"},
			store.JobLease{ID: j.ID, Attempt: math.MaxInt32 + 1, WorkerID: "w"},
			store.JobLease{ID: j.ID, Attempt: 1, WorkerID: ""},
			store.JobLease{ID: j.ID, Attempt: 1, WorkerID: "w\x00"},
			leaseOf(j),
		)
		for _, o := range out[:4] {
			require.ErrorIs(t, o.Err, queue.ErrInvalidArgument)
			require.Nil(t, o.Job)
		}
		b.requireApplied(out[4], queue.StateRunning)

		_, err := b.ds.JobAckMany(b.ctx, make([]store.JobLease, store.MaxDispatchBatch+1))
		require.ErrorIs(t, err, queue.ErrInvalidArgument)
	})
}

func runJobReportTests(t *testing.T, newStore NewStoreFunc) {
	t.Run("Done", func(t *testing.T) {
		b := setupDispatchStore(t, newStore)
		p := b.job("t")
		p.KeepResult = true
		j := b.assignOne("w", b.insertOne(p))
		j = b.requireApplied(b.ack(leaseOf(j))[0], queue.StateRunning)
		result := `{"ok":true}`
		rep := b.report(reportSuccess(j, result))
		require.False(t, rep[0].Started, "acked before: the report starts nothing")
		done := b.requireApplied(rep[0], queue.StateDone)
		require.Equal(t, []byte(result), done.Result)
		require.Equal(t, queue.Checksum([]byte(result)), done.ResultChecksum)
		require.Equal(t, j.StartedAt, done.StartedAt)
		require.False(t, done.CompletedAt.IsZero())
		require.False(t, done.CompletedAt.Before(done.StartedAt))
		require.Equal(t, 1, done.Attempt)
		evs := b.events(j.ID)
		require.Len(t, evs, 4)
		b.requireEvent(evs[3], 4, queue.StateRunning, queue.StateDone, queue.ReasonSucceeded, "w", 1)
		require.Empty(t, evs[3].Error)
		require.Equal(t, done.CompletedAt, evs[3].At)

		// A second report of the same attempt is stale.
		out := b.report(reportFailure(j, "late", ""))
		require.ErrorIs(t, out[0].Err, queue.ErrStaleAttempt)
		b.requireUntouched(done, 4)
	})

	t.Run("Failed", func(t *testing.T) {
		b := setupDispatchStore(t, newStore)
		jobs := b.insertN(2)
		var running []*queue.Job
		for _, j := range jobs {
			j = b.assignOne("w", j)
			running = append(running, b.requireApplied(b.ack(leaseOf(j))[0], queue.StateRunning))
		}
		out := b.report(reportFailure(running[0], "boom", "timeout"), reportFailure(running[1], "bad input", ""))

		f := b.requireApplied(out[0], queue.StateFailed)
		require.Equal(t, "boom", f.LastError)
		require.Equal(t, "timeout", f.FailureReason)
		require.True(t, f.CompletedAt.IsZero(), "FAILED is not completed: a retry may follow")
		require.Nil(t, f.Result)
		require.Empty(t, f.ResultChecksum)
		require.Zero(t, f.RetryCount)
		evs := b.events(f.ID)
		require.Len(t, evs, 4)
		b.requireEvent(evs[3], 4, queue.StateRunning, queue.StateFailed, "timeout", "w", 1)
		require.Equal(t, "boom", evs[3].Error)

		f = b.requireApplied(out[1], queue.StateFailed)
		require.Equal(t, queue.DefaultFailureReason, f.FailureReason, "no reason: error")
		evs = b.events(f.ID)
		b.requireEvent(evs[3], 4, queue.StateRunning, queue.StateFailed, queue.DefaultFailureReason, "w", 1)
		require.Equal(t, "bad input", evs[3].Error)
	})

	t.Run("ImplicitAck", func(t *testing.T) {
		b := setupDispatchStore(t, newStore)
		jobs := b.insertN(2)
		a := b.assignOne("w", jobs[0])
		c := b.assignOne("w", jobs[1])
		out := b.report(reportSuccess(a, "r"), reportFailure(c, "boom", "cancelled"))

		for i, want := range []struct {
			to     queue.State
			reason string
			err    string
		}{
			{queue.StateDone, queue.ReasonSucceeded, ""},
			{queue.StateFailed, "cancelled", "boom"},
		} {
			j := b.requireApplied(out[i], want.to)
			require.True(t, out[i].Started, "the implied ack started the job")
			require.False(t, j.StartedAt.IsZero(), "the implied ack sets started_at")
			evs := b.events(j.ID)
			require.Len(t, evs, 4, "both events")
			b.requireEvent(evs[2], 3, queue.StateAssigned, queue.StateRunning, queue.ReasonImplicitAck, "w", 1)
			b.requireEvent(evs[3], 4, queue.StateRunning, want.to, want.reason, "w", 1)
			require.Empty(t, evs[2].Error)
			require.Equal(t, want.err, evs[3].Error)
			require.Equal(t, j.StartedAt, evs[2].At)
			require.False(t, evs[3].At.Before(evs[2].At))
		}
	})

	t.Run("ImplicitAckStartedAt", func(t *testing.T) {
		b := setupDispatchStore(t, newStore)
		j := b.assignOne("w", b.insertN(1)[0])
		r := reportSuccess(j, "r")
		r.Runtime = 3 * time.Microsecond // shorter than the time since the assignment
		done := b.requireApplied(b.report(r)[0], queue.StateDone)
		// started_at is the report's time minus the handler's runtime, never before the assignment.
		require.Equal(t, 3*time.Microsecond, done.CompletedAt.Sub(done.StartedAt))
		evs := b.events(j.ID)
		require.Equal(t, done.StartedAt, evs[2].At, "the implied ack's event is stamped at the start")
		require.False(t, evs[2].At.Before(evs[1].At), "not before the assignment")

		j = b.assignOne("w", b.insertN(1)[0])
		r = reportSuccess(j, "r")
		r.Runtime = time.Hour // longer than it has been assigned: clamped to the assignment
		done = b.requireApplied(b.report(r)[0], queue.StateDone)
		evs = b.events(j.ID)
		require.Equal(t, evs[1].At, done.StartedAt)
	})

	t.Run("Stale", func(t *testing.T) {
		b := setupDispatchStore(t, newStore)
		jobs := b.insertN(3)
		first := b.assignOne("w1", jobs[0])
		second := b.assignOne("w2", b.advance(first, queue.StateFailed, queue.StatePending))
		pending := jobs[1]
		dead := b.advance(jobs[2], queue.StateDeadLettered)

		out := b.report(
			reportSuccess(first, "old attempt"),
			store.JobReportParams{JobLease: store.JobLease{ID: second.ID, Attempt: 2, WorkerID: "w1"}, Success: true},
			store.JobReportParams{JobLease: store.JobLease{ID: pending.ID, Attempt: 1, WorkerID: "w1"}, Success: true},
			store.JobReportParams{JobLease: store.JobLease{ID: dead.ID, Attempt: 1, WorkerID: "w1"}, Error: "x"},
		)
		for i, o := range out {
			require.ErrorIs(t, o.Err, queue.ErrStaleAttempt, "report %d", i)
			require.Nil(t, o.Job)
		}
		b.requireUntouched(second, 5)
		b.requireUntouched(pending, 1)
		b.requireUntouched(dead, 2)
	})

	t.Run("MixedBatch", func(t *testing.T) {
		b := setupDispatchStore(t, newStore)
		jobs := b.insertN(5)
		w := "w-" + b.queue
		var leased []*queue.Job
		for _, j := range jobs {
			leased = append(leased, b.assignOne(w, j))
		}
		for _, j := range leased[:2] {
			b.requireApplied(b.ack(leaseOf(j))[0], queue.StateRunning)
		}
		staleLease := leaseOf(leased[3])
		staleLease.Attempt = 3
		reports := []store.JobReportParams{
			reportSuccess(leased[0], "one"),                     // RUNNING → DONE
			reportFailure(leased[1], "two", "output_too_large"), // RUNNING → FAILED
			reportSuccess(leased[2], "three"),                   // ASSIGNED → RUNNING → DONE
			{JobLease: staleLease, Success: true},               // stale attempt
			{JobLease: store.JobLease{ID: uuid.NewString(), Attempt: 1, WorkerID: w}, Success: true},
			{JobLease: store.JobLease{ID: "bad", Attempt: 1, WorkerID: w}, Success: true},
			reportSuccess(leased[0], "again"), // repeat: stale
			reportFailure(leased[4], "five", "error"),
		}
		out := b.report(reports...)

		require.Equal(t, []byte("one"), b.requireApplied(out[0], queue.StateDone).Result)
		require.Equal(t, "two", b.requireApplied(out[1], queue.StateFailed).LastError)
		require.Equal(t, []byte("three"), b.requireApplied(out[2], queue.StateDone).Result)
		require.ErrorIs(t, out[3].Err, queue.ErrStaleAttempt)
		require.ErrorIs(t, out[4].Err, queue.ErrJobNotFound)
		require.ErrorIs(t, out[5].Err, queue.ErrInvalidArgument)
		require.ErrorIs(t, out[6].Err, queue.ErrStaleAttempt)
		require.Equal(t, "five", b.requireApplied(out[7], queue.StateFailed).LastError)
		for i, want := range []int{4, 4, 4, 2, 0, 0, 4, 4} {
			if want > 0 {
				require.Len(t, b.events(out[i].ID), want, "report %d", i)
			}
		}
		require.Equal(t, []byte("one"), b.get(leased[0].ID).Result, "the repeat changed nothing")
	})

	t.Run("UnstorableText", func(t *testing.T) {
		b := setupDispatchStore(t, newStore)
		j := b.assignOne("w", b.insertOne(b.job("t")))
		out := b.report(reportFailure(j, "bad\x00byte \xff", "odd\xfe"))
		f := b.requireApplied(out[0], queue.StateFailed)
		require.Equal(t, "bad\uFFFDbyte \uFFFD", f.LastError, "NUL and invalid UTF-8 are replaced, not refused")
		require.Equal(t, "odd\uFFFD", f.FailureReason)
	})

	t.Run("InvalidReports", func(t *testing.T) {
		b := setupDispatchStore(t, newStore)
		j := b.assignOne("w", b.insertOne(b.job("t")))
		out := b.report(
			store.JobReportParams{JobLease: store.JobLease{ID: j.ID, Attempt: -1, WorkerID: "w"}, Success: true},
			store.JobReportParams{JobLease: store.JobLease{ID: "", Attempt: 1, WorkerID: "w"}, Success: true},
		)
		require.ErrorIs(t, out[0].Err, queue.ErrInvalidArgument)
		require.ErrorIs(t, out[1].Err, queue.ErrInvalidArgument)
		b.requireUntouched(j, 2)
		require.Empty(t, b.report())
		_, err := b.ds.JobReportMany(b.ctx, make([]store.JobReportParams, store.MaxDispatchBatch+1))
		require.ErrorIs(t, err, queue.ErrInvalidArgument)
	})
}

func runDispatchPathTests(t *testing.T, newStore NewStoreFunc) {
	t.Run("PendingToDone", func(t *testing.T) {
		b := setupDispatchStore(t, newStore)
		j := b.insertOne(b.job("t"))
		due := b.due(10)
		require.Equal(t, []string{j.ID}, dueIDs(due))
		w := uniqueName("w")
		assigned := b.assign(w, due[0].ID)
		require.Len(t, assigned, 1)
		require.Empty(t, b.due(10), "an assigned job is no longer due")
		running := b.requireApplied(b.ack(leaseOf(assigned[0]))[0], queue.StateRunning)
		done := b.requireApplied(b.report(reportSuccess(running, "ok"))[0], queue.StateDone)

		evs := b.events(j.ID)
		require.Len(t, evs, 4)
		b.requireEvent(evs[0], 1, "", queue.StatePending, "submitted", "", 0)
		b.requireEvent(evs[1], 2, queue.StatePending, queue.StateAssigned, queue.ReasonAssigned, w, 1)
		b.requireEvent(evs[2], 3, queue.StateAssigned, queue.StateRunning, queue.ReasonAcked, w, 1)
		b.requireEvent(evs[3], 4, queue.StateRunning, queue.StateDone, queue.ReasonSucceeded, w, 1)
		for i := 1; i < len(evs); i++ {
			require.False(t, evs[i].At.Before(evs[i-1].At), "event %d", i+1)
			require.Equal(t, j.ID, evs[i].JobID)
			require.Equal(t, "t", evs[i].Type)
		}
		require.Equal(t, evs[2].At, done.StartedAt)
		require.Equal(t, evs[3].At, done.CompletedAt)
	})

	// An ack batch and a report batch racing over the same jobs, in opposite orders: what the engine
	// does when a worker's report overtakes its ack. Neither may fail or deadlock, every report
	// applies, and each job's history is one of the two legal ones.
	t.Run("AckReportRace", func(t *testing.T) {
		b := setupDispatchStore(t, newStore)
		for round := range 5 {
			w := uniqueName("w")
			var leased []*queue.Job
			for _, j := range b.insertN(50) {
				leased = append(leased, b.assignOne(w, j))
			}
			leases := make([]store.JobLease, len(leased))
			reports := make([]store.JobReportParams, len(leased))
			for i, j := range leased {
				leases[i] = leaseOf(j)
				reports[len(leased)-1-i] = reportSuccess(j, "r")
			}
			var (
				wg                sync.WaitGroup
				acks, reps        []store.LeaseOutcome
				errAck, errReport error
				start             = make(chan struct{})
			)
			wg.Go(func() { <-start; acks, errAck = b.ds.JobAckMany(b.ctx, leases) })
			wg.Go(func() { <-start; reps, errReport = b.ds.JobReportMany(b.ctx, reports) })
			close(start)
			wg.Wait()
			require.NoError(t, errAck, "round %d", round)
			require.NoError(t, errReport, "round %d", round)
			for _, o := range reps {
				b.requireApplied(o, queue.StateDone)
			}
			for _, o := range acks {
				if o.Err != nil {
					require.ErrorIs(t, o.Err, queue.ErrStaleAttempt)
				}
			}
			for i, j := range leased {
				evs := b.events(j.ID)
				require.Len(t, evs, 4)
				wantReason := queue.ReasonImplicitAck
				if acks[i].Err == nil {
					wantReason = queue.ReasonAcked
				}
				b.requireEvent(evs[2], 3, queue.StateAssigned, queue.StateRunning, wantReason, w, 1)
				b.requireEvent(evs[3], 4, queue.StateRunning, queue.StateDone, queue.ReasonSucceeded, w, 1)
			}
		}
	})
}
