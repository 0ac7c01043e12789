package server_test

import (
	"testing"

	"connectrpc.com/connect"
	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	jqv1 "github.com/jq-dev/jq/api/gen/jq/v1"
	"github.com/jq-dev/jq/queue/engine"
	"github.com/jq-dev/jq/store"
)

// WatchJob streams the job at every change and ends when it is DONE. The engine's ack and report
// paths announce their jobs (OnJobChange), which is what wakes the stream; the assignment made
// straight in the store here is seen by the stream's periodic re-read.
func TestWatchJobFollowsAJobToItsEnd(t *testing.T) {
	b := setupEngine(t, engine.Options{})
	heard := make(chan string, 16)
	b.eng.OnJobChange(func(id string) {
		select {
		case heard <- id:
		default:
		}
	})
	w := b.register(1) // with no assignment stream open, the engine hands the job to nobody
	j := b.insert(store.JobInsertParams{})

	stream, err := b.cl.Jobs.WatchJob(b.ctx, connect.NewRequest(&jqv1.WatchJobRequest{JobId: j.ID}))
	require.NoError(t, err)
	defer func() { _ = stream.Close() }()
	next := func() *jqv1.Job {
		t.Helper()
		require.True(t, stream.Receive(), "stream ended: %v", stream.Err())
		return stream.Msg().GetJob()
	}
	require.Equal(t, jqv1.JobState_JOB_STATE_PENDING, next().GetState())

	j = b.lease(w, j, false) // ASSIGNED, straight in the store: no announcement
	got := next()
	require.Equal(t, jqv1.JobState_JOB_STATE_ASSIGNED, got.GetState())
	require.EqualValues(t, 1, got.GetAttempt())

	_, err = b.cl.Workers.AckJobs(b.ctx, connect.NewRequest(&jqv1.AckJobsRequest{
		WorkerId: w, Leases: []*jqv1.JobLease{{JobId: j.ID, Attempt: int32(j.Attempt)}},
	}))
	require.NoError(t, err)
	require.Equal(t, jqv1.JobState_JOB_STATE_RUNNING, next().GetState())
	require.Equal(t, j.ID, <-heard, "the ack announced the job")

	_, err = b.cl.Workers.ReportJobs(b.ctx, connect.NewRequest(&jqv1.ReportJobsRequest{
		WorkerId: w, Reports: []*jqv1.JobReport{{JobId: j.ID, Attempt: int32(j.Attempt),
			Outcome: &jqv1.JobReport_Success{Success: &jqv1.JobSuccess{}}}},
	}))
	require.NoError(t, err)
	require.Equal(t, jqv1.JobState_JOB_STATE_DONE, next().GetState())
	require.False(t, stream.Receive(), "the stream ends with the job")
	require.NoError(t, stream.Err())

	// A job that has already ended: one message, then the end.
	again, err := b.cl.Jobs.WatchJob(b.ctx, connect.NewRequest(&jqv1.WatchJobRequest{JobId: j.ID}))
	require.NoError(t, err)
	require.True(t, again.Receive())
	require.Equal(t, jqv1.JobState_JOB_STATE_DONE, again.Msg().GetJob().GetState())
	require.False(t, again.Receive())
	require.NoError(t, again.Err())
	require.NoError(t, again.Close())
}

func TestWatchJobRefusesBadInput(t *testing.T) {
	b := setup(t)
	for id, code := range map[string]connect.Code{
		"not-a-uuid":     connect.CodeInvalidArgument,
		uuid.NewString(): connect.CodeNotFound,
		"":               connect.CodeInvalidArgument,
	} {
		s, err := b.cl.Jobs.WatchJob(b.ctx, connect.NewRequest(&jqv1.WatchJobRequest{JobId: id}))
		require.NoError(t, err)
		require.False(t, s.Receive(), id)
		requireCode(t, code, s.Err(), id)
		require.NoError(t, s.Close())
	}
}
