package storetest

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/jq-dev/jq/queue"
	"github.com/jq-dev/jq/store"
)

// depthSuite runs the contract of store.DepthStore on an isolated store: a snapshot counts every
// queue.
func depthSuite(t *testing.T, f Factory) {
	newStore := isolatedStore(f)
	t.Run("DepthSnapshot", func(t *testing.T) {
		b := setup(t, newStore)
		d := as[store.DepthStore](t, b.s)
		other := b.newQueue(store.QueueCreateParams{}).Name

		snap, err := d.DepthSnapshot(b.ctx)
		require.NoError(t, err)
		require.ElementsMatch(t, []string{b.queue, other}, snap.Queues, "every queue, empty ones too")
		require.Empty(t, snap.Jobs)

		res := b.insert(b.job("a"), b.job("a"), b.job("a"), b.job("a"), b.job("a"), b.job("a"), b.job("a"))
		delayed := b.job("a")
		delayed.RunAt = time.Now().Add(time.Hour)
		b.insertOne(delayed)
		b.advance(res[1].Job, queue.StateAssigned)
		b.advance(res[2].Job, queue.StateAssigned, queue.StateRunning)
		b.advance(res[3].Job, queue.StateAssigned, queue.StateRunning, queue.StateDone)
		b.advance(res[4].Job, queue.StateAssigned, queue.StateFailed)
		b.advance(res[5].Job, queue.StateDeadLettered)
		b.advance(res[6].Job, queue.StateDeadLettered)
		_, err = b.s.WorkerRegister(b.ctx, store.WorkerRegisterParams{ID: uniqueName("w"), Queues: []string{b.queue}, Concurrency: 1})
		require.NoError(t, err)

		snap, err = d.DepthSnapshot(b.ctx)
		require.NoError(t, err)
		require.Equal(t, map[string]map[queue.State]int64{b.queue: {
			queue.StatePending: 2, queue.StateAssigned: 1, queue.StateRunning: 1,
			queue.StateFailed: 1, queue.StateDeadLettered: 2,
		}}, snap.Jobs, "the live states and the dead letters, delayed jobs included; no DONE")
		require.EqualValues(t, 1, snap.ActiveWorkers)

		ctx, cancel := context.WithCancel(b.ctx)
		cancel()
		_, err = d.DepthSnapshot(ctx)
		require.Error(t, err, "a cancelled context")
	})
}
