package postgres_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/jq-dev/jq/queue"
	"github.com/jq-dev/jq/store"
)

// TestProgressAddsNoJobsRowVersion is the point of job_progress: an update reads the
// jobs row to fence it and never writes it. xmin changes with every new row version.
func TestProgressAddsNoJobsRowVersion(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	s := testStore
	q, err := s.QueueCreate(ctx, store.QueueCreateParams{Name: fmt.Sprintf("progress-%d", time.Now().UnixNano())})
	require.NoError(t, err)
	res, err := s.JobInsertMany(ctx, []store.JobInsertParams{{Queue: q.Name, Type: "long"}})
	require.NoError(t, err)
	j := res[0].Job
	j, err = s.JobTransition(ctx, store.JobTransitionParams{ID: j.ID, From: queue.StatePending, To: queue.StateAssigned,
		Attempt: j.Attempt, WorkerID: "w-progress", Reason: "test"})
	require.NoError(t, err)
	xmin := func() string {
		var v string
		require.NoError(t, s.Pool().QueryRow(ctx, `SELECT xmin::text FROM jobs WHERE id = $1`, j.ID).Scan(&v))
		return v
	}
	before := xmin()
	for pct := range 10 {
		outs, err := s.JobProgressSet(ctx, store.JobProgressSetParams{WorkerID: "w-progress",
			Updates: []store.JobProgressUpdate{{ID: j.ID, Attempt: j.Attempt, Percent: pct * 10, Message: "step"}}})
		require.NoError(t, err)
		require.NoError(t, outs[0].Err)
	}
	require.Equal(t, before, xmin(), "progress updates must not write the jobs row")

	// Once the attempt is over, the prune pass deletes the row itself.
	_, err = s.JobTransition(ctx, store.JobTransitionParams{ID: j.ID, From: queue.StateAssigned, To: queue.StateFailed,
		Attempt: j.Attempt, Reason: "test"})
	require.NoError(t, err)
	require.Eventually(t, func() bool {
		if _, err := s.JobProgressPrune(ctx, 1000); err != nil {
			return false
		}
		var n int
		return s.Pool().QueryRow(ctx, `SELECT count(*) FROM job_progress WHERE job_id = $1`, j.ID).Scan(&n) == nil && n == 0
	}, 10*time.Second, 20*time.Millisecond)
}
