package apiserver_test

import (
	"testing"

	"connectrpc.com/connect"
	"github.com/stretchr/testify/require"

	jqv1 "github.com/jq-dev/jq/api/gen/jq/v1"
	"github.com/jq-dev/jq/queue/engine"
	"github.com/jq-dev/jq/store"
)

// WatchEvents opens with an empty message, then sends the queue's events recorded after it, in
// order, each once: the submit and the assignment made straight in the store (found by its re-read
// within a second), the ack and the report (announced by the engine).
func TestWatchEventsStreamsAQueue(t *testing.T) {
	b := setupEngine(t, engine.Options{})
	w := b.register(1)
	before := b.insert(store.JobInsertParams{}) // recorded before the stream: not sent

	stream, err := b.cl.Jobs.WatchEvents(b.ctx, connect.NewRequest(&jqv1.WatchEventsRequest{Queue: b.queue}))
	require.NoError(t, err)
	defer func() { _ = stream.Close() }()
	require.True(t, stream.Receive(), "stream ended: %v", stream.Err())
	require.Empty(t, stream.Msg().GetEvents(), "the first message says the stream is open")

	var got []string
	next := func(n int) {
		t.Helper()
		for len(got) < n {
			require.True(t, stream.Receive(), "stream ended: %v", stream.Err())
			for _, e := range stream.Msg().GetEvents() {
				require.Equal(t, b.queue, e.GetQueue())
				got = append(got, e.GetJobId()[:8]+" "+e.GetToState().String())
			}
		}
	}
	j := b.insert(store.JobInsertParams{})
	j = b.lease(w, j, false)
	next(2)
	_, err = b.cl.Workers.AckJobs(b.ctx, connect.NewRequest(&jqv1.AckJobsRequest{
		WorkerId: w, Leases: []*jqv1.JobLease{{JobId: j.ID, Attempt: int32(j.Attempt)}},
	}))
	require.NoError(t, err)
	_, err = b.cl.Workers.ReportJobs(b.ctx, connect.NewRequest(&jqv1.ReportJobsRequest{
		WorkerId: w, Reports: []*jqv1.JobReport{{JobId: j.ID, Attempt: int32(j.Attempt),
			Outcome: &jqv1.JobReport_Success{Success: &jqv1.JobSuccess{}}}},
	}))
	require.NoError(t, err)
	next(4)
	id := j.ID[:8]
	require.Equal(t, []string{id + " JOB_STATE_PENDING", id + " JOB_STATE_ASSIGNED", id + " JOB_STATE_RUNNING",
		id + " JOB_STATE_DONE"}, got, "in order, once; nothing of %s", before.ID)
}

func TestWatchEventsRefusesBadInput(t *testing.T) {
	b := setup(t)
	for q, code := range map[string]connect.Code{
		"Bad Name!":   connect.CodeInvalidArgument,
		"nosuchqueue": connect.CodeNotFound,
	} {
		s, err := b.cl.Jobs.WatchEvents(b.ctx, connect.NewRequest(&jqv1.WatchEventsRequest{Queue: q}))
		require.NoError(t, err)
		require.False(t, s.Receive(), q)
		requireCode(t, code, s.Err(), q)
		require.NoError(t, s.Close())
	}
}
