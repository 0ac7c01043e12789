package apiserver_test

import (
	"testing"

	"connectrpc.com/connect"
	"github.com/stretchr/testify/require"
	"google.golang.org/protobuf/encoding/protojson"

	jqv1 "github.com/jq-dev/jq/api/gen/jq/v1"
	"github.com/jq-dev/jq/queue"
	"github.com/jq-dev/jq/store"
)

// The shapes of GetJobResult (seed 001): a success while its bytes are retained, none once they
// are not (not kept, consumed, past the retention), a failure from the job's record.
func TestGetJobResultShapes(t *testing.T) {
	b := setup(t)
	get := func(id string, consume bool) *jqv1.GetJobResultResponse {
		t.Helper()
		res, err := b.cl.Jobs.GetJobResult(b.ctx, connect.NewRequest(&jqv1.GetJobResultRequest{JobId: id, Consume: consume}))
		require.NoError(t, err)
		return res.Msg
	}
	getJob := func(id string) *jqv1.Job {
		t.Helper()
		res, err := b.cl.Jobs.GetJob(b.ctx, connect.NewRequest(&jqv1.GetJobRequest{JobId: id}))
		require.NoError(t, err)
		return res.Msg.GetJob()
	}
	w := b.register(8)
	result := []byte(`{"ok":true}`)

	t.Run("SuccessKept", func(t *testing.T) {
		j := b.finish(b.lease(w, b.insert(store.JobInsertParams{KeepResult: true}), true), true, result)
		res := get(j.ID, false)
		require.True(t, res.GetFound())
		r := res.GetResult()
		require.Equal(t, "success", r.GetType())
		require.Equal(t, result, r.GetData())
		require.EqualValues(t, len(result), r.GetSize())
		require.Equal(t, j.CompletedAt, r.GetFinishedAt().AsTime())
		require.Empty(t, r.GetReason())
		require.Nil(t, r.GetError(), "no failure fields on a success")
		require.Equal(t, result, getJob(j.ID).GetResult().GetData(), "GetJob carries it too")
	})

	t.Run("SuccessNotKept", func(t *testing.T) {
		j := b.finish(b.lease(w, b.insert(store.JobInsertParams{}), true), true, result)
		res := get(j.ID, false)
		require.False(t, res.GetFound(), "no result kept: not an error")
		require.Equal(t, jqv1.JobState_JOB_STATE_DONE, res.GetState())
		require.Nil(t, getJob(j.ID).GetResult(), "GetJob shows no result either")
		require.False(t, get(j.ID, true).GetFound(), "nothing to consume")
	})

	t.Run("Consumed", func(t *testing.T) {
		j := b.finish(b.lease(w, b.insert(store.JobInsertParams{KeepResult: true}), true), true, nil)
		res := get(j.ID, true)
		require.True(t, res.GetFound(), "an empty result is a result")
		require.Equal(t, "success", res.GetResult().GetType())
		require.Empty(t, res.GetResult().GetData())
		require.False(t, get(j.ID, false).GetFound(), "consumed")
		require.False(t, get(j.ID, true).GetFound())
		job := getJob(j.ID)
		require.Nil(t, job.GetResult())
		require.True(t, job.GetKeepResult(), "the job still says what was asked")
	})

	t.Run("PastRetention", func(t *testing.T) {
		j := b.finish(b.lease(w, b.insert(store.JobInsertParams{KeepResult: true}), true), true, result)
		require.True(t, get(j.ID, false).GetFound())
		// The bundle's queue keeps results 24 h: complete the job a day and a minute ago.
		_, err := b.store.Pool().Exec(b.ctx,
			`UPDATE jobs SET completed_at = now() - interval '24 hours 1 minute' WHERE id = $1`, j.ID)
		require.NoError(t, err)
		dropped, err := b.store.JobResultsDrop(b.ctx, store.MaxResultsDropBatch)
		require.NoError(t, err)
		require.Equal(t, 1, dropped[b.queue])
		res := get(j.ID, false)
		require.False(t, res.GetFound(), "dropped: null, not an error")
		require.Equal(t, jqv1.JobState_JOB_STATE_DONE, res.GetState())
	})

	t.Run("FailureRetriable", func(t *testing.T) {
		retries := 2
		j := b.insert(store.JobInsertParams{MaxRetries: &retries})
		j = b.lease(w, j, true)
		jsonErr := `{"code":"E42","message":"disk full","retry_in":5}`
		outs, err := b.store.JobReportMany(b.ctx, []store.JobReportParams{{
			JobLease: store.JobLease{ID: j.ID, Attempt: j.Attempt, WorkerID: j.WorkerID},
			Error:    jsonErr, Reason: "error",
		}})
		require.NoError(t, err)
		require.NoError(t, outs[0].Err)
		failed := outs[0].Job

		res := get(j.ID, true)
		require.True(t, res.GetFound(), "a failure is a result, with or without keep_result")
		require.Equal(t, jqv1.JobState_JOB_STATE_FAILED, res.GetState())
		r := res.GetResult()
		require.Equal(t, "failure", r.GetType())
		require.Equal(t, "error", r.GetReason())
		require.True(t, r.GetShouldRetry(), "FAILED with retries left: the server retries it")
		require.Equal(t, "disk full", r.GetMessage(), "the JSON error's message")
		got, err := protojson.Marshal(r.GetError())
		require.NoError(t, err)
		require.JSONEq(t, jsonErr, string(got), "a JSON error passes as JSON")
		require.Equal(t, failed.UpdatedAt, r.GetFinishedAt().AsTime(), "a FAILED job finished its attempt then")
		require.Nil(t, r.GetCompletedAt())
		require.Empty(t, r.GetData())
		require.True(t, get(j.ID, false).GetFound(), "consume leaves a failure")
	})

	t.Run("FailureDeadLettered", func(t *testing.T) {
		retries := 5
		j := b.insert(store.JobInsertParams{MaxRetries: &retries})
		j = b.lease(w, j, true)
		outs, err := b.store.JobReportMany(b.ctx, []store.JobReportParams{{
			JobLease: store.JobLease{ID: j.ID, Attempt: j.Attempt, WorkerID: j.WorkerID},
			Error:    "exit status 1", Reason: "error", Permanent: true,
		}})
		require.NoError(t, err)
		require.NoError(t, outs[0].Err)
		res := get(j.ID, false)
		require.False(t, res.GetResult().GetShouldRetry(), "a permanent failure is not retried")

		// As the retry sweep does (not run here: it would settle other tests' FAILED jobs too).
		_, err = b.store.JobTransition(b.ctx, store.JobTransitionParams{ID: j.ID, From: queue.StateFailed,
			To: queue.StateDeadLettered, Attempt: store.AnyAttempt, Reason: queue.ReasonPermanent})
		require.NoError(t, err)
		res = get(j.ID, false)
		require.Equal(t, jqv1.JobState_JOB_STATE_DEAD_LETTERED, res.GetState())
		r := res.GetResult()
		require.Equal(t, "failure", r.GetType())
		require.False(t, r.GetShouldRetry())
		require.Equal(t, "exit status 1", r.GetError().GetStringValue(), "plain text passes as a string")
		require.Equal(t, "exit status 1", r.GetMessage())
		require.NotNil(t, r.GetCompletedAt())
		require.Equal(t, r.GetCompletedAt().AsTime(), r.GetFinishedAt().AsTime())
	})

	t.Run("CancelledWithoutError", func(t *testing.T) {
		j := b.insert(store.JobInsertParams{})
		_, err := b.eng.JobCancel(b.ctx, j.ID)
		require.NoError(t, err)
		r := get(j.ID, false).GetResult()
		require.Equal(t, "cancelled", r.GetReason())
		require.NotNil(t, r.GetError().GetKind(), "null, not absent")
		require.Equal(t, "the job was cancelled", r.GetMessage())
	})

	t.Run("NotFinished", func(t *testing.T) {
		j := b.insert(store.JobInsertParams{KeepResult: true})
		res := get(j.ID, false)
		require.False(t, res.GetFound())
		require.Nil(t, res.GetResult())
		require.Equal(t, jqv1.JobState_JOB_STATE_PENDING, res.GetState())
	})
}
