package storetest

import (
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/jq-dev/jq/queue"
	"github.com/jq-dev/jq/store"
)

func runTransitionTests(t *testing.T, newStore NewStoreFunc) {
	t.Run("HappyPath", func(t *testing.T) {
		b := setup(t, newStore)
		p := b.job("t")
		p.KeepResult = true
		j := b.insertOne(p)

		assigned := b.move(j, queue.StateAssigned, store.JobTransitionParams{WorkerID: "w1", Reason: "dispatched"})
		require.Equal(t, 1, assigned.Attempt, "assignment increments the attempt (fencing token)")
		require.Equal(t, "w1", assigned.WorkerID)
		require.True(t, assigned.StartedAt.IsZero())
		require.False(t, assigned.UpdatedAt.Before(j.UpdatedAt))

		running := b.move(assigned, queue.StateRunning, store.JobTransitionParams{Attempt: 1, Reason: "acked"})
		require.Equal(t, 1, running.Attempt)
		require.Equal(t, "w1", running.WorkerID)
		require.False(t, running.StartedAt.IsZero())

		result := []byte(`{"ok":true}`)
		done := b.move(running, queue.StateDone, store.JobTransitionParams{Attempt: 1, Reason: "success", Result: result})
		require.Equal(t, result, done.Result)
		require.Equal(t, queue.Checksum(result), done.ResultChecksum)
		require.Len(t, done.ResultChecksum, 64)
		require.False(t, done.CompletedAt.IsZero())
		require.False(t, done.CompletedAt.Before(done.StartedAt))
		require.Zero(t, done.RetryCount)
		require.Equal(t, done, b.get(j.ID))

		evs := b.events(j.ID)
		require.Len(t, evs, 4)
		want := []struct {
			from, to queue.State
			reason   string
			worker   string
			attempt  int
		}{
			{"", queue.StatePending, "submitted", "", 0},
			{queue.StatePending, queue.StateAssigned, "dispatched", "w1", 1},
			{queue.StateAssigned, queue.StateRunning, "acked", "w1", 1},
			{queue.StateRunning, queue.StateDone, "success", "w1", 1},
		}
		for i, w := range want {
			e := evs[i]
			require.EqualValues(t, i+1, e.Seq)
			require.Equal(t, j.ID, e.JobID)
			require.Equal(t, b.queue, e.Queue)
			require.Equal(t, "t", e.Type)
			require.Equal(t, w.from, e.From, "event %d", i+1)
			require.Equal(t, w.to, e.To, "event %d", i+1)
			require.Equal(t, w.reason, e.Reason, "event %d", i+1)
			require.Equal(t, w.worker, e.WorkerID, "event %d", i+1)
			require.Equal(t, w.attempt, e.Attempt, "event %d", i+1)
			if i > 0 {
				require.False(t, e.At.Before(evs[i-1].At))
			}
		}
		require.Equal(t, done.CompletedAt, evs[3].At)
	})

	t.Run("FailRetryDeadLetter", func(t *testing.T) {
		b := setup(t, newStore)
		p := b.job("t")
		p.MaxRetries = ptr(1)
		p.TTL = time.Hour
		j := b.insertOne(p)

		// ASSIGNED → FAILED: assignment timeout.
		j = b.move(j, queue.StateAssigned, store.JobTransitionParams{WorkerID: "w1"})
		j = b.move(j, queue.StateFailed, store.JobTransitionParams{Reason: "assignment_timeout", Error: "no ack"})
		require.Equal(t, "assignment_timeout", j.FailureReason)
		require.Equal(t, "no ack", j.LastError)
		require.Zero(t, j.RetryCount, "failing does not count a retry; re-queueing does")
		require.True(t, j.CompletedAt.IsZero())

		// FAILED → PENDING: automatic retry after backoff.
		notBefore := time.Now().Add(10 * time.Second).UTC()
		j = b.move(j, queue.StatePending, store.JobTransitionParams{Reason: "retry", NotBefore: notBefore,
			ExpiresAt: queue.PendingExpiry(notBefore, time.Hour)})
		require.Equal(t, 1, j.RetryCount)
		require.False(t, j.RetriesLeft())
		require.WithinDuration(t, notBefore, j.NotBefore, time.Millisecond)
		require.WithinDuration(t, notBefore.Add(time.Hour), j.ExpiresAt, time.Millisecond,
			"the expiry the caller decided: the TTL counts again from the new due time")
		require.Equal(t, 1, j.Attempt)
		require.Equal(t, "w1", j.WorkerID, "the last holder stays recorded")

		// Second attempt: RUNNING → FAILED → DEAD_LETTERED.
		j = b.move(j, queue.StateAssigned, store.JobTransitionParams{WorkerID: "w2"})
		require.Equal(t, 2, j.Attempt)
		require.Equal(t, "w2", j.WorkerID)
		j = b.move(j, queue.StateRunning, store.JobTransitionParams{})
		j = b.move(j, queue.StateFailed, store.JobTransitionParams{Reason: "error", Error: "boom"})
		require.Equal(t, "boom", j.LastError)
		j = b.move(j, queue.StateDeadLettered, store.JobTransitionParams{Reason: "max_retries"})
		require.Equal(t, "max_retries", j.FailureReason)
		require.Equal(t, "boom", j.LastError, "an empty Error keeps the last one")
		require.False(t, j.CompletedAt.IsZero())
		require.Nil(t, j.Result)

		evs := b.events(j.ID)
		require.Len(t, evs, 8)
		for i, e := range evs {
			require.EqualValues(t, i+1, e.Seq)
		}
		require.Equal(t, "no ack", evs[2].Error)
		require.Equal(t, "boom", evs[6].Error)
		require.Equal(t, "w2", evs[7].WorkerID, "events name the job's worker when the caller names none")
		require.Equal(t, 2, evs[7].Attempt)
	})

	t.Run("ManualRetry", func(t *testing.T) {
		b := setup(t, newStore)
		p := b.job("t")
		p.MaxRetries = ptr(0)
		j := b.insertOne(p)

		// PENDING → DEAD_LETTERED (TTL expiry or cancel), then an operator's retry.
		j = b.move(j, queue.StateDeadLettered, store.JobTransitionParams{Attempt: store.AnyAttempt, Reason: "CANCELLED"})
		require.False(t, j.CompletedAt.IsZero())
		j = b.move(j, queue.StatePending, store.JobTransitionParams{Attempt: store.AnyAttempt, Reason: "manual_retry", ResetRetries: true})
		require.Zero(t, j.RetryCount)
		require.True(t, j.CompletedAt.IsZero(), "back in the queue: not completed")
		require.True(t, j.ExpiresAt.IsZero(), "no TTL")
		require.WithinDuration(t, j.UpdatedAt, j.NotBefore, time.Millisecond, "due at once")

		// FAILED → PENDING with ResetRetries: the manual retry of a failed job (FR-013).
		j = b.advance(j, queue.StateAssigned, queue.StateRunning, queue.StateFailed, queue.StatePending)
		require.Equal(t, 1, j.RetryCount)
		j = b.advance(j, queue.StateAssigned, queue.StateFailed)
		j = b.move(j, queue.StatePending, store.JobTransitionParams{ResetRetries: true})
		require.Zero(t, j.RetryCount)

		// DEAD_LETTERED → PENDING without ResetRetries leaves the count alone.
		j = b.advance(j, queue.StateAssigned, queue.StateFailed, queue.StatePending)
		require.Equal(t, 1, j.RetryCount)
		j = b.advance(j, queue.StateAssigned, queue.StateFailed, queue.StateDeadLettered, queue.StatePending)
		require.Equal(t, 1, j.RetryCount)
		require.Equal(t, 4, j.Attempt)
	})

	t.Run("CancelAssigned", func(t *testing.T) {
		b := setup(t, newStore)
		j := b.advance(b.insertOne(b.job("t")), queue.StateAssigned)
		j = b.move(j, queue.StateDeadLettered, store.JobTransitionParams{Reason: "CANCELLED"})
		require.Equal(t, "CANCELLED", j.FailureReason)
		evs := b.events(j.ID)
		require.Equal(t, queue.StateAssigned, evs[2].From)
		require.Equal(t, queue.StateDeadLettered, evs[2].To)
		require.Equal(t, "CANCELLED", evs[2].Reason)
	})

	t.Run("EveryLegalEdge", func(t *testing.T) {
		b := setup(t, newStore)
		for _, from := range queue.States() {
			for _, to := range queue.States() {
				if !queue.CanTransition(from, to) {
					continue
				}
				t.Run(fmt.Sprintf("%s_to_%s", from, to), func(t *testing.T) {
					b := b.with(t)
					j := b.advance(b.insertOne(b.job("t")), pathTo(from)...)
					require.Equal(t, from, j.State)
					before := len(b.events(j.ID))
					got := b.move(j, to, store.JobTransitionParams{Reason: "edge"})
					require.Equal(t, to, got.State)
					evs := b.events(j.ID)
					require.Len(t, evs, before+1)
					last := evs[len(evs)-1]
					require.Equal(t, from, last.From)
					require.Equal(t, to, last.To)
					require.EqualValues(t, before+1, last.Seq)
				})
			}
		}
	})

	t.Run("IllegalRefused", func(t *testing.T) {
		b := setup(t, newStore)
		j := b.insertOne(b.job("t"))
		for _, to := range []queue.State{queue.StateRunning, queue.StateDone, queue.StateFailed, queue.StatePending} {
			_, err := b.s.JobTransition(b.ctx, store.JobTransitionParams{ID: j.ID, From: queue.StatePending, To: to, Attempt: store.AnyAttempt})
			require.ErrorIs(t, err, queue.ErrIllegalTransition, "PENDING -> %s", to)
		}
		_, err := b.s.JobTransition(b.ctx, store.JobTransitionParams{ID: j.ID, From: queue.StateDone, To: queue.StatePending})
		require.ErrorIs(t, err, queue.ErrIllegalTransition)
		require.Equal(t, j, b.get(j.ID), "nothing changed")
		require.Len(t, b.events(j.ID), 1, "no event written")

		// Checked before any I/O: a missing or malformed job still gets ErrIllegalTransition.
		_, err = b.s.JobTransition(b.ctx, store.JobTransitionParams{ID: uuid.NewString(), From: queue.StateDone, To: queue.StateFailed})
		require.ErrorIs(t, err, queue.ErrIllegalTransition)
		_, err = b.s.JobTransition(b.ctx, store.JobTransitionParams{ID: "nope", From: queue.StateRunning, To: queue.StatePending})
		require.ErrorIs(t, err, queue.ErrIllegalTransition)
	})

	t.Run("StaleRefused", func(t *testing.T) {
		b := setup(t, newStore)
		j := b.advance(b.insertOne(b.job("t")), queue.StateAssigned, queue.StateRunning)
		require.Equal(t, 1, j.Attempt)

		for _, p := range []store.JobTransitionParams{
			{From: queue.StateAssigned, To: queue.StateRunning, Attempt: 1}, // state moved on
			{From: queue.StateRunning, To: queue.StateDone, Attempt: 0},     // older attempt
			{From: queue.StateRunning, To: queue.StateFailed, Attempt: 2},   // unknown newer attempt
			{From: queue.StatePending, To: queue.StateAssigned, WorkerID: "w", Attempt: store.AnyAttempt},
		} {
			p.ID = j.ID
			_, err := b.s.JobTransition(b.ctx, p)
			require.ErrorIs(t, err, queue.ErrStaleAttempt, "%+v", p)
		}
		require.Equal(t, j, b.get(j.ID), "nothing changed")
		require.Len(t, b.events(j.ID), 3, "no event written")

		// AnyAttempt skips only the attempt check.
		b.move(j, queue.StateDone, store.JobTransitionParams{Attempt: store.AnyAttempt})
	})

	t.Run("NotFound", func(t *testing.T) {
		b := setup(t, newStore)
		_, err := b.s.JobTransition(b.ctx, store.JobTransitionParams{
			ID: uuid.NewString(), From: queue.StatePending, To: queue.StateAssigned, WorkerID: "w",
		})
		require.ErrorIs(t, err, queue.ErrJobNotFound)
		_, err = b.s.JobTransition(b.ctx, store.JobTransitionParams{
			ID: "not-a-uuid", From: queue.StatePending, To: queue.StateAssigned, WorkerID: "w",
		})
		require.ErrorIs(t, err, queue.ErrInvalidArgument)
	})

	t.Run("InvalidArguments", func(t *testing.T) {
		b := setup(t, newStore)
		j := b.insertOne(b.job("t"))
		for _, p := range []store.JobTransitionParams{
			{From: queue.StatePending, To: queue.StateAssigned},                             // no worker
			{From: queue.StatePending, To: queue.StateDeadLettered, Result: []byte("x")},    // result off DONE
			{From: queue.StatePending, To: queue.StateDeadLettered, NotBefore: time.Now()},  // not_before off PENDING
			{From: queue.StatePending, To: queue.StateDeadLettered, ResetRetries: true},     // reset off PENDING
			{From: queue.StatePending, To: queue.StateAssigned, WorkerID: "w", Attempt: -2}, // bad attempt
		} {
			p.ID = j.ID
			_, err := b.s.JobTransition(b.ctx, p)
			require.ErrorIs(t, err, queue.ErrInvalidArgument, "%+v", p)
		}
		require.Equal(t, j, b.get(j.ID))
	})

	t.Run("ConcurrentClaim", func(t *testing.T) {
		b := setup(t, newStore)
		j := b.insertOne(b.job("t"))
		const claimers = 20
		var (
			wg     sync.WaitGroup
			mu     sync.Mutex
			wins   []string
			stale  int
			others []error
		)
		start := make(chan struct{})
		for i := range claimers {
			wg.Go(func() {
				<-start
				worker := fmt.Sprintf("w%d", i)
				_, err := b.s.JobTransition(b.ctx, store.JobTransitionParams{
					ID: j.ID, From: queue.StatePending, To: queue.StateAssigned, Attempt: 0, WorkerID: worker,
				})
				mu.Lock()
				defer mu.Unlock()
				switch {
				case err == nil:
					wins = append(wins, worker)
				case isStale(err):
					stale++
				default:
					others = append(others, err)
				}
			})
		}
		close(start)
		wg.Wait()
		require.Empty(t, others)
		require.Len(t, wins, 1, "exactly one claim wins")
		require.Equal(t, claimers-1, stale)

		got := b.get(j.ID)
		require.Equal(t, queue.StateAssigned, got.State)
		require.Equal(t, 1, got.Attempt)
		require.Equal(t, wins[0], got.WorkerID)
		evs := b.events(j.ID)
		require.Len(t, evs, 2, "one event for the one winner")
		require.Equal(t, wins[0], evs[1].WorkerID)
	})
}

// pathTo lists the transitions that take a fresh PENDING job to state s.
func pathTo(s queue.State) []queue.State {
	switch s {
	case queue.StateAssigned:
		return []queue.State{queue.StateAssigned}
	case queue.StateRunning:
		return []queue.State{queue.StateAssigned, queue.StateRunning}
	case queue.StateDone:
		return []queue.State{queue.StateAssigned, queue.StateRunning, queue.StateDone}
	case queue.StateFailed:
		return []queue.State{queue.StateAssigned, queue.StateRunning, queue.StateFailed}
	case queue.StateDeadLettered:
		return []queue.State{queue.StateDeadLettered}
	}
	return nil
}
