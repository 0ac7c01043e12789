package storetest

import (
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/jq-dev/jq/queue"
	"github.com/jq-dev/jq/store"
)

// progressSuite checks store.ProgressStore: progress is written only for a live lease of the
// worker, replaces the previous value, is read only while its attempt runs, and is pruned once
// the attempt is over. Subtests run in parallel.
func progressSuite(t *testing.T, f Factory) {
	newStore := sharedStore(f)
	ps := func(b *bundle) store.ProgressStore { return as[store.ProgressStore](b.t, b.s) }
	// running returns a job RUNNING on the bundle's worker ("worker-"+queue, see move).
	running := func(b *bundle) *queue.Job {
		return b.advance(b.insertOne(b.job("long")), queue.StateAssigned, queue.StateRunning)
	}
	set := func(b *bundle, worker string, us ...store.JobProgressUpdate) []store.LeaseOutcome {
		b.t.Helper()
		outs, err := ps(b).JobProgressSet(b.ctx, store.JobProgressSetParams{WorkerID: worker, Updates: us})
		require.NoError(b.t, err)
		require.Len(b.t, outs, len(us))
		return outs
	}
	get := func(b *bundle, id string) *queue.JobProgress {
		b.t.Helper()
		p, err := ps(b).JobProgressGet(b.ctx, id)
		require.NoError(b.t, err)
		return p
	}

	t.Run("SetGetReplace", func(t *testing.T) {
		b := setup(t, newStore)
		j := running(b)
		require.Nil(t, get(b, j.ID), "no progress before the first update")
		events := len(b.events(j.ID))
		before := time.Now().Add(-time.Minute)
		outs := set(b, j.WorkerID, store.JobProgressUpdate{ID: j.ID, Attempt: j.Attempt, Percent: 10, Message: "reading"})
		require.NoError(t, outs[0].Err)
		require.Equal(t, j.ID, outs[0].ID)
		p := get(b, j.ID)
		require.NotNil(t, p)
		require.Equal(t, 10, p.Percent)
		require.Equal(t, "reading", p.Message)
		require.True(t, p.UpdatedAt.After(before), "UpdatedAt is the store's clock: %v", p.UpdatedAt)

		// The next update replaces it, and an ASSIGNED job takes progress too.
		set(b, j.WorkerID, store.JobProgressUpdate{ID: j.ID, Attempt: j.Attempt, Percent: 55, Message: ""})
		require.Equal(t, 55, get(b, j.ID).Percent)
		require.Empty(t, get(b, j.ID).Message)
		a := b.advance(b.insertOne(b.job("long")), queue.StateAssigned)
		require.NoError(t, set(b, a.WorkerID, store.JobProgressUpdate{ID: a.ID, Attempt: a.Attempt, Percent: 1})[0].Err)
		require.Equal(t, 1, get(b, a.ID).Percent)

		// The job itself is untouched: progress is not a change of the job.
		after := b.get(j.ID)
		require.Equal(t, j.UpdatedAt, after.UpdatedAt)
		require.Len(t, b.events(j.ID), events, "no event")
		require.Nil(t, after.Progress, "JobGet does not read progress")
	})

	t.Run("Fenced", func(t *testing.T) {
		b := setup(t, newStore)
		j := running(b)
		pending := b.insertOne(b.job("long"))
		outs := set(b, j.WorkerID,
			store.JobProgressUpdate{ID: j.ID, Attempt: j.Attempt + 1, Percent: 20},          // a newer attempt
			store.JobProgressUpdate{ID: pending.ID, Attempt: 1, Percent: 20},                // not assigned
			store.JobProgressUpdate{ID: "7d0c2a5e-0000-4000-8000-000000000000", Attempt: 1}, // unknown
		)
		for _, o := range outs {
			require.ErrorIs(t, o.Err, queue.ErrStaleAttempt)
		}
		outs = set(b, "another-worker", store.JobProgressUpdate{ID: j.ID, Attempt: j.Attempt, Percent: 20})
		require.ErrorIs(t, outs[0].Err, queue.ErrStaleAttempt, "another worker's update")
		require.Nil(t, get(b, j.ID), "nothing was written")
		require.Nil(t, get(b, pending.ID))

		// Malformed updates fail alone; the others of the batch apply.
		outs = set(b, j.WorkerID,
			store.JobProgressUpdate{ID: "not-a-uuid", Attempt: 1, Percent: 1},
			store.JobProgressUpdate{ID: j.ID, Attempt: j.Attempt, Percent: 101},
			store.JobProgressUpdate{ID: j.ID, Attempt: 0, Percent: 1},
			store.JobProgressUpdate{ID: j.ID, Attempt: j.Attempt, Percent: 1, Message: strings.Repeat("x", queue.MaxProgressMessage+1)},
			store.JobProgressUpdate{ID: j.ID, Attempt: j.Attempt, Percent: 1, Message: "\xff"},
			store.JobProgressUpdate{ID: strings.ToUpper(j.ID), Attempt: j.Attempt, Percent: 30, Message: "ok"},
		)
		for _, o := range outs[:5] {
			require.ErrorIs(t, o.Err, queue.ErrInvalidArgument)
		}
		require.NoError(t, outs[5].Err)
		require.Equal(t, j.ID, outs[5].ID, "the canonical id")
		require.Equal(t, 30, get(b, j.ID).Percent)

		_, err := ps(b).JobProgressSet(b.ctx, store.JobProgressSetParams{WorkerID: ""})
		require.ErrorIs(t, err, queue.ErrInvalidArgument)
		_, err = ps(b).JobProgressGet(b.ctx, "nope")
		require.ErrorIs(t, err, queue.ErrInvalidArgument)
	})

	t.Run("LastOfBatchWins", func(t *testing.T) {
		b := setup(t, newStore)
		j := running(b)
		outs := set(b, j.WorkerID,
			store.JobProgressUpdate{ID: j.ID, Attempt: j.Attempt, Percent: 10, Message: "a"},
			store.JobProgressUpdate{ID: j.ID, Attempt: j.Attempt, Percent: 20, Message: "b"},
		)
		require.NoError(t, outs[0].Err)
		require.NoError(t, outs[1].Err)
		p := get(b, j.ID)
		require.Equal(t, 20, p.Percent)
		require.Equal(t, "b", p.Message)
	})

	t.Run("OverWithItsAttempt", func(t *testing.T) {
		b := setup(t, newStore)
		j := running(b)
		set(b, j.WorkerID, store.JobProgressUpdate{ID: j.ID, Attempt: j.Attempt, Percent: 90})
		live := running(b)
		set(b, live.WorkerID, store.JobProgressUpdate{ID: live.ID, Attempt: live.Attempt, Percent: 40})

		failed := b.advance(j, queue.StateFailed)
		require.Nil(t, get(b, j.ID), "a FAILED job shows no progress")
		retried := b.advance(failed, queue.StatePending, queue.StateAssigned, queue.StateRunning)
		require.Nil(t, get(b, j.ID), "the new attempt does not show the old attempt's progress")
		require.ErrorIs(t, set(b, retried.WorkerID,
			store.JobProgressUpdate{ID: j.ID, Attempt: j.Attempt, Percent: 95})[0].Err, queue.ErrStaleAttempt)
		require.NoError(t, set(b, retried.WorkerID,
			store.JobProgressUpdate{ID: j.ID, Attempt: retried.Attempt, Percent: 5})[0].Err)
		require.Equal(t, 5, get(b, j.ID).Percent)
		b.advance(retried, queue.StateDone)
		require.Nil(t, get(b, j.ID), "a DONE job shows no progress")

		// Prune takes the finished attempt's row and leaves the live one.
		var pruned int64
		for {
			n, err := ps(b).JobProgressPrune(b.ctx, 1000)
			require.NoError(t, err)
			if n == 0 {
				break
			}
			pruned += n
		}
		require.GreaterOrEqual(t, pruned, int64(1))
		require.Equal(t, 40, get(b, live.ID).Percent)
		_, err := ps(b).JobProgressPrune(b.ctx, 0)
		require.ErrorIs(t, err, queue.ErrInvalidArgument)
	})
}
