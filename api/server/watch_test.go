package apiserver_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"connectrpc.com/connect"
	"github.com/google/uuid"
	"github.com/stretchr/testify/require"
	"go.uber.org/zap/zaptest"

	jqv1 "github.com/jq-dev/jq/api/gen/jq/v1"
	"github.com/jq-dev/jq/internal/testenv"
	"github.com/jq-dev/jq/internal/testenv/stores"
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

// WatchJob carries a running job's progress as it is reported, not only its changes of state:
// an update through ReportProgress (the engine's path) wakes the stream at once, with no re-read
// (the replica runs alone), and once another replica runs beside it, one recorded there (written
// straight in the store here) arrives by the stream's re-read of a running job's progress.
func TestWatchJobCarriesProgress(t *testing.T) {
	b := setupEngine(t, engine.Options{})
	testenv.Eventually(t, 10*time.Second, func() error {
		if !b.eng.Alone() {
			return errors.New("the engine does not know yet that it runs alone")
		}
		return nil
	})
	w := b.register(1)
	j := b.lease(w, b.insert(store.JobInsertParams{}), true)

	ctx, cancel := context.WithTimeout(b.ctx, 20*time.Second)
	defer cancel()
	stream, err := b.cl.Jobs.WatchJob(ctx, connect.NewRequest(&jqv1.WatchJobRequest{JobId: j.ID}))
	require.NoError(t, err)
	defer func() { _ = stream.Close() }()
	next := func() *jqv1.Job {
		t.Helper()
		require.True(t, stream.Receive(), "stream ended: %v", stream.Err())
		return stream.Msg().GetJob()
	}
	first := next()
	require.Equal(t, jqv1.JobState_JOB_STATE_RUNNING, first.GetState())
	require.Nil(t, first.GetProgress())

	res, err := b.cl.Workers.ReportProgress(b.ctx, connect.NewRequest(&jqv1.ReportProgressRequest{WorkerId: w,
		Updates: []*jqv1.JobProgressUpdate{{JobId: j.ID, Attempt: int32(j.Attempt), Percent: 40, Message: "4 of 10"}}}))
	require.NoError(t, err)
	require.True(t, res.Msg.GetResults()[0].GetOk())
	got := next()
	require.Equal(t, jqv1.JobState_JOB_STATE_RUNNING, got.GetState())
	require.EqualValues(t, 40, got.GetProgress().GetPercent())
	require.Equal(t, "4 of 10", got.GetProgress().GetMessage())

	// Another replica on the same store: its presence ends this one's belief that it runs alone.
	other, err := engine.New(engine.Options{Store: b.store, Notifier: b.store, Dispatcher: stores.Dispatcher(b.ctx, t), Log: zaptest.NewLogger(t)})
	require.NoError(t, err)
	otherCtx, stopOther := context.WithCancel(context.Background())
	otherDone := make(chan struct{})
	go func() { _ = other.Run(otherCtx); close(otherDone) }()
	defer func() { stopOther(); <-otherDone }()
	testenv.Eventually(t, 20*time.Second, func() error {
		if b.eng.Alone() {
			return errors.New("the other replica is not heard yet")
		}
		return nil
	})
	outs, err := b.store.JobProgressSet(b.ctx, store.JobProgressSetParams{WorkerID: w,
		Updates: []store.JobProgressUpdate{{ID: j.ID, Attempt: j.Attempt, Percent: 70, Message: "7 of 10"}}})
	require.NoError(t, err)
	require.NoError(t, outs[0].Err)
	got = next()
	require.EqualValues(t, 70, got.GetProgress().GetPercent(), "an update this replica's engine did not make")

	b.finish(j, true, nil)
	got = next()
	require.Equal(t, jqv1.JobState_JOB_STATE_DONE, got.GetState())
	require.Nil(t, got.GetProgress())
	require.False(t, stream.Receive())
	require.NoError(t, stream.Err())
}
