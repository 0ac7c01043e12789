package sqlstore_test

import (
	"testing"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/jq-dev/jq/queue"
	"github.com/jq-dev/jq/store"
	"github.com/jq-dev/jq/store/internal/sqlstore"
)

func TestLeaseBatch(t *testing.T) {
	t.Parallel()
	id := uuid.NewString()
	leases := []store.JobLease{
		{ID: id, Attempt: 1, WorkerID: "w"},
		{ID: "not-a-uuid", Attempt: 1, WorkerID: "w"},
		{ID: id, Attempt: 1, WorkerID: "w"}, // the same lease again (a retried ack)
		{ID: id, Attempt: 2, WorkerID: "w"}, // another attempt of the same job
	}
	for _, idempotent := range []bool{true, false} {
		b := sqlstore.NewLeaseBatch(len(leases))
		var applied []bool
		for i, l := range leases {
			applied = append(applied, b.Add(i, l))
		}
		require.Equal(t, []bool{true, false, false, false}, applied)
		require.Equal(t, []int{0}, b.Sent)
		require.ErrorIs(t, b.Outcomes[1].Err, queue.ErrInvalidArgument)
		job := &queue.Job{ID: id}
		b.Outcomes[0].Job = job // the backend applied the first
		out := b.Finish(leases, idempotent)
		if idempotent {
			require.NoError(t, out[2].Err)
			require.Same(t, job, out[2].Job, "a retried ack gets the first occurrence's outcome")
		} else {
			require.ErrorIs(t, out[2].Err, queue.ErrStaleAttempt)
		}
		require.ErrorIs(t, out[3].Err, queue.ErrStaleAttempt)
	}

	// A repeat of a job that does not exist is not found, like the first.
	b := sqlstore.NewLeaseBatch(2)
	require.True(t, b.Add(0, store.JobLease{ID: id, Attempt: 1, WorkerID: "w"}))
	require.False(t, b.Add(1, store.JobLease{ID: id, Attempt: 1, WorkerID: "x"}))
	b.Outcomes[0].Err = queue.ErrJobNotFound
	out := b.Finish([]store.JobLease{{ID: id, Attempt: 1, WorkerID: "w"}, {ID: id, Attempt: 1, WorkerID: "x"}}, true)
	require.ErrorIs(t, out[1].Err, queue.ErrJobNotFound)
}
