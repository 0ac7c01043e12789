package apiserver_test

import (
	"strings"
	"testing"

	"connectrpc.com/connect"
	"github.com/stretchr/testify/require"

	jqv1 "github.com/jq-dev/jq/api/gen/jq/v1"
	"github.com/jq-dev/jq/store"
)

// ReportProgress is fenced by the lease: the holder's update is shown by GetJob while the job
// runs; a stale attempt's, another worker's or a finished job's is ignored (ok = false), never an
// error of the call. A malformed request is INVALID_ARGUMENT as a whole.
func TestReportProgress(t *testing.T) {
	b := setup(t)
	w, other := b.register(2), b.register(1)
	j := b.lease(w, b.insert(store.JobInsertParams{}), true)
	progress := func(worker string, us ...*jqv1.JobProgressUpdate) ([]*jqv1.LeaseResult, error) {
		res, err := b.cl.Workers.ReportProgress(b.ctx, connect.NewRequest(&jqv1.ReportProgressRequest{WorkerId: worker, Updates: us}))
		if err != nil {
			return nil, err
		}
		return res.Msg.GetResults(), nil
	}
	getJob := func() *jqv1.Job {
		res, err := b.cl.Jobs.GetJob(b.ctx, connect.NewRequest(&jqv1.GetJobRequest{JobId: j.ID}))
		require.NoError(t, err)
		return res.Msg.GetJob()
	}
	require.Nil(t, getJob().GetProgress(), "none reported yet")

	res, err := progress(w, &jqv1.JobProgressUpdate{JobId: j.ID, Attempt: int32(j.Attempt), Percent: 40, Message: "4 of 10"})
	require.NoError(t, err)
	require.True(t, res[0].GetOk(), res[0].GetError())
	p := getJob().GetProgress()
	require.EqualValues(t, 40, p.GetPercent())
	require.Equal(t, "4 of 10", p.GetMessage())
	require.NotNil(t, p.GetUpdatedAt())

	// Stale: another attempt, another worker. Ignored, and the call succeeds.
	res, err = progress(w, &jqv1.JobProgressUpdate{JobId: j.ID, Attempt: int32(j.Attempt) + 1, Percent: 99})
	require.NoError(t, err)
	require.False(t, res[0].GetOk())
	require.Contains(t, res[0].GetError(), "not held by worker")
	res, err = progress(other, &jqv1.JobProgressUpdate{JobId: j.ID, Attempt: int32(j.Attempt), Percent: 99})
	require.NoError(t, err)
	require.False(t, res[0].GetOk())
	require.EqualValues(t, 40, getJob().GetProgress().GetPercent())

	// Malformed: refused whole.
	for _, u := range []*jqv1.JobProgressUpdate{
		{JobId: j.ID, Attempt: int32(j.Attempt), Percent: 101},
		{JobId: j.ID, Attempt: int32(j.Attempt), Percent: -1},
		{JobId: j.ID, Attempt: int32(j.Attempt), Message: strings.Repeat("x", 257)},
	} {
		_, err := progress(w, u)
		requireCode(t, connect.CodeInvalidArgument, err)
	}
	_, err = progress(w)
	requireCode(t, connect.CodeInvalidArgument, err, "no updates")

	// Finished: GetJob shows none, and a late update is ignored.
	b.finish(j, true, nil)
	require.Nil(t, getJob().GetProgress())
	res, err = progress(w, &jqv1.JobProgressUpdate{JobId: j.ID, Attempt: int32(j.Attempt), Percent: 100})
	require.NoError(t, err)
	require.False(t, res[0].GetOk())
	require.Nil(t, getJob().GetProgress())
}
