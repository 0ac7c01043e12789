package api_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/jq-dev/jq/api"
	jqv1 "github.com/jq-dev/jq/api/gen/jq/v1"
	"github.com/jq-dev/jq/queue"
)

// TestJobRoundTrip: what the server sends, the client reads back unchanged, except the fields the
// wire does not carry.
func TestJobRoundTrip(t *testing.T) {
	t.Parallel()
	at := time.Date(2030, 1, 2, 3, 4, 5, 6000, time.UTC)
	j := &queue.Job{
		ID: "3b241101-e2bb-4255-8caf-4136c566a962", Queue: "q", Type: "t", Payload: []byte("p"), Priority: 7,
		State: queue.StateDone, MaxRetries: 3, RetryCount: 1, Attempt: 2, TTL: time.Hour, Timeout: time.Minute,
		NotBefore: at, IdempotencyKey: "k", Labels: map[string]string{"a": "b"}, KeepResult: true,
		TraceContext: map[string]string{"traceparent": "00-x"}, WorkerID: "w", LastError: "e", FailureReason: "error",
		Result: []byte("r"), ResultChecksum: queue.Checksum([]byte("r")),
		CreatedAt: at, UpdatedAt: at.Add(time.Second), StartedAt: at.Add(2 * time.Second), CompletedAt: at.Add(3 * time.Second),
	}
	require.Equal(t, j, api.JobFromProto(api.JobProto(j)))

	// Not carried: ExpiresAt, NoRetry, CancelRequested, Principal.
	k := *j
	k.ExpiresAt, k.NoRetry, k.CancelRequested, k.Principal = at, true, true, "p"
	require.Equal(t, j, api.JobFromProto(api.JobProto(&k)))

	require.Nil(t, api.JobFromProto(nil))
	require.Equal(t, queue.State("JOB_STATE_UNSPECIFIED"), api.JobFromProto(&jqv1.Job{}).State)
}
