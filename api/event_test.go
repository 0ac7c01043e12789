package api_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/jq-dev/jq/api"
	jqv1 "github.com/jq-dev/jq/api/gen/jq/v1"
	"github.com/jq-dev/jq/queue"
)

// Every job state has its own API name and comes back from it; UNSPECIFIED names none.
func TestStateProtoRoundTrip(t *testing.T) {
	t.Parallel()
	seen := map[jqv1.JobState]bool{}
	for _, s := range queue.States() {
		p := api.StateProto(s)
		require.NotEqual(t, jqv1.JobState_JOB_STATE_UNSPECIFIED, p, s)
		require.False(t, seen[p], "%s shares %s", s, p)
		seen[p] = true
		back, ok := api.StateFromProto(p)
		require.True(t, ok)
		require.Equal(t, s, back)
	}
	_, ok := api.StateFromProto(jqv1.JobState_JOB_STATE_UNSPECIFIED)
	require.False(t, ok)
}

func TestEventProto(t *testing.T) {
	t.Parallel()
	at := time.Date(2026, 11, 23, 12, 0, 0, 0, time.UTC)
	e := api.EventProto(&queue.Event{
		JobID: "j", Queue: "q", Type: "t", Seq: 3, From: queue.StateRunning, To: queue.StateDone,
		At: at, WorkerID: "w", Reason: "succeeded", Attempt: 2,
	})
	require.Equal(t, "j", e.GetJobId())
	require.Equal(t, jqv1.JobState_JOB_STATE_DONE, e.GetToState())
	require.Equal(t, jqv1.JobState_JOB_STATE_RUNNING, e.GetFromState())
	require.Equal(t, at, e.GetTimestamp().AsTime())
	require.Equal(t, int64(3), e.GetSeq())
	require.Equal(t, int32(2), e.GetAttempt())
	require.Nil(t, api.EventProto(&queue.Event{JobID: "j"}).GetTimestamp(), "no time, no timestamp")
}
