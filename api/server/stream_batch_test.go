package apiserver_test

import (
	"testing"

	"connectrpc.com/connect"
	"github.com/stretchr/testify/require"

	jqv1 "github.com/jq-dev/jq/api/gen/jq/v1"
	"github.com/jq-dev/jq/queue/engine"
)

// A stream opened with batched gets the assignments of one claim in one message; one opened
// without it (an older worker) gets one assignment per message in the singular field.
func TestStreamJobsBatched(t *testing.T) {
	b := setupEngine(t, engine.Options{})
	specs := make([]*jqv1.JobSpec, 10)
	for i := range specs {
		specs[i] = &jqv1.JobSpec{Queue: b.queue, Type: "noop"}
	}
	_, err := b.cl.Jobs.SubmitJobs(b.ctx, connect.NewRequest(&jqv1.SubmitJobsRequest{Jobs: specs}))
	require.NoError(t, err)

	batched, err := b.cl.Workers.StreamJobs(b.ctx, connect.NewRequest(&jqv1.StreamJobsRequest{WorkerId: b.register(10), Batched: true}))
	require.NoError(t, err)
	defer func() { _ = batched.Close() }()
	require.True(t, batched.Receive(), "keepalive: %v", batched.Err())
	require.True(t, batched.Receive(), "assignments: %v", batched.Err())
	require.Nil(t, batched.Msg().GetAssignment())
	require.Len(t, batched.Msg().GetAssignments(), 10, "one claim, one message")

	_, err = b.cl.Jobs.SubmitJobs(b.ctx, connect.NewRequest(&jqv1.SubmitJobsRequest{Jobs: specs[:3]}))
	require.NoError(t, err)
	single, err := b.cl.Workers.StreamJobs(b.ctx, connect.NewRequest(&jqv1.StreamJobsRequest{WorkerId: b.register(3)}))
	require.NoError(t, err)
	defer func() { _ = single.Close() }()
	require.True(t, single.Receive(), "keepalive: %v", single.Err())
	for range 3 {
		require.True(t, single.Receive(), "assignment: %v", single.Err())
		require.NotNil(t, single.Msg().GetAssignment())
		require.Empty(t, single.Msg().GetAssignments())
	}
}
