package apiserver_test

import (
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"connectrpc.com/connect"
	"github.com/stretchr/testify/require"
	"google.golang.org/protobuf/types/known/durationpb"

	jqv1 "github.com/jq-dev/jq/api/gen/jq/v1"
	"github.com/jq-dev/jq/queue"
	"github.com/jq-dev/jq/queue/engine"
	"github.com/jq-dev/jq/store"
)

// A failure's reason and error travel in the job's events (and so to Kafka): a reason that is not a
// short machine word is refused and changes nothing; an error text is kept up to 4 KiB, cut at a
// rune boundary.
func TestReportJobsBoundsFailureText(t *testing.T) {
	b := setupEngine(t, engine.Options{})
	w := b.register(1)
	j := b.lease(w, b.insert(store.JobInsertParams{}), true)
	report := func(reason, msg string) (*jqv1.ReportJobsResponse, error) {
		res, err := b.cl.Workers.ReportJobs(b.ctx, connect.NewRequest(&jqv1.ReportJobsRequest{
			WorkerId: w,
			Reports: []*jqv1.JobReport{{
				JobId: j.ID, Attempt: int32(j.Attempt),
				Outcome: &jqv1.JobReport_Failure{Failure: &jqv1.JobFailure{Reason: reason, Error: msg}},
			}},
		}))
		if err != nil {
			return nil, err
		}
		return res.Msg, nil
	}
	for _, reason := range []string{"Not A Word", strings.Repeat("a", 65), "tab\there", "é"} {
		_, err := report(reason, "boom")
		requireCode(t, connect.CodeInvalidArgument, err, "reason %q", reason)
		require.ErrorContains(t, err, "failure.reason")
	}
	got, err := b.store.JobGet(b.ctx, j.ID)
	require.NoError(t, err)
	require.Equal(t, queue.StateRunning, got.State, "a refused report changes nothing")

	long := strings.Repeat("é", 5000) // 10,000 bytes
	res, err := report("output_too_large", long)
	require.NoError(t, err)
	require.True(t, res.GetResults()[0].GetOk())
	got, err = b.store.JobGet(b.ctx, j.ID)
	require.NoError(t, err)
	require.LessOrEqual(t, len(got.LastError), 4<<10)
	require.True(t, utf8.ValidString(got.LastError))
	require.True(t, strings.HasSuffix(got.LastError, "…"))
	require.Equal(t, "output_too_large", got.FailureReason)
}

// A failure's retry_after reaches the store, cut to store.MaxRetryAfter: the retry sweep schedules
// the next attempt no earlier than that after the report.
func TestReportJobsRetryAfter(t *testing.T) {
	b := setupEngine(t, engine.Options{})
	w := b.register(1)
	j := b.lease(w, b.insert(store.JobInsertParams{}), true)
	before := time.Now()
	res, err := b.cl.Workers.ReportJobs(b.ctx, connect.NewRequest(&jqv1.ReportJobsRequest{
		WorkerId: w,
		Reports: []*jqv1.JobReport{{
			JobId: j.ID, Attempt: int32(j.Attempt),
			Outcome: &jqv1.JobReport_Failure{Failure: &jqv1.JobFailure{
				Error: "429 Too Many Requests", RetryAfter: durationpb.New(48 * time.Hour),
			}},
		}},
	}))
	require.NoError(t, err)
	require.True(t, res.Msg.GetResults()[0].GetOk())

	var got *queue.Job
	deadline := time.Now().Add(10 * time.Second)
	for {
		_, err := b.store.JobSettleFailed(b.ctx, 100, settleNow) // the engine's reaper may sweep it first
		require.NoError(t, err)
		got, err = b.store.JobGet(b.ctx, j.ID)
		require.NoError(t, err)
		if got.State == queue.StatePending || time.Now().After(deadline) {
			break
		}
	}
	require.Equal(t, queue.StatePending, got.State)
	require.GreaterOrEqual(t, got.NotBefore.Add(time.Second), before.Add(store.MaxRetryAfter), "not before the report + 24 h")
	require.Less(t, got.NotBefore, time.Now().Add(store.MaxRetryAfter+time.Minute), "48 h is cut to 24 h")
}
