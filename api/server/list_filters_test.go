package apiserver_test

import (
	"testing"
	"time"

	"connectrpc.com/connect"
	"github.com/stretchr/testify/require"
	"google.golang.org/protobuf/types/known/timestamppb"

	jqv1 "github.com/jq-dev/jq/api/gen/jq/v1"
	"github.com/jq-dev/jq/queue"
	"github.com/jq-dev/jq/store"
)

// TestListJobsTypeTimeScheduled: ListJobs' type, time and scheduled filters reach the store, a
// malformed or empty time range is INVALID_ARGUMENT, and GetStatus and GetQueueStats say what
// their counts are.
func TestListJobsTypeTimeScheduled(t *testing.T) {
	b := setup(t)
	now := b.insert(store.JobInsertParams{Queue: b.queue, Type: "email.send"})
	delayed := b.insert(store.JobInsertParams{Queue: b.queue, Type: "report.build", RunAt: time.Now().Add(time.Hour)})
	worker := b.register(2)
	done := b.finish(b.lease(worker, b.insert(store.JobInsertParams{Queue: b.queue, Type: "email.send"}), true), true, nil)

	list := func(req *jqv1.ListJobsRequest) []string {
		t.Helper()
		req.Queue = b.queue
		res, err := b.cl.Jobs.ListJobs(b.ctx, connect.NewRequest(req))
		require.NoError(t, err)
		var out []string
		for _, j := range res.Msg.GetJobs() {
			out = append(out, j.GetId())
		}
		return out
	}
	require.ElementsMatch(t, []string{now.ID, done.ID}, list(&jqv1.ListJobsRequest{Type: "email.send"}))
	require.Equal(t, []string{delayed.ID}, list(&jqv1.ListJobsRequest{Scheduled: true}))
	require.Equal(t, []string{done.ID}, list(&jqv1.ListJobsRequest{CompletedAfter: timestamppb.New(now.CreatedAt)}))
	require.Empty(t, list(&jqv1.ListJobsRequest{CreatedBefore: timestamppb.New(now.CreatedAt)}))
	require.Contains(t, list(&jqv1.ListJobsRequest{CreatedAfter: timestamppb.New(now.CreatedAt)}), now.ID)

	for name, req := range map[string]*jqv1.ListJobsRequest{
		"bad timestamp":  {CreatedAfter: &timestamppb.Timestamp{Nanos: -1}},
		"empty range":    {CreatedAfter: timestamppb.New(now.CreatedAt), CreatedBefore: timestamppb.New(now.CreatedAt)},
		"scheduled DONE": {Scheduled: true, States: []jqv1.JobState{jqv1.JobState_JOB_STATE_DONE}},
		"bad type":       {Type: "a b"},
	} {
		_, err := b.cl.Jobs.ListJobs(b.ctx, connect.NewRequest(req))
		requireCode(t, connect.CodeInvalidArgument, err, name)
	}

	// A queue that does not exist is NOT_FOUND, one line naming it; an existing queue's empty
	// listing is an empty page.
	_, err := b.cl.Jobs.ListJobs(b.ctx, connect.NewRequest(&jqv1.ListJobsRequest{Queue: "no-such-queue", Type: "email.send"}))
	requireCode(t, connect.CodeNotFound, err, "missing queue")
	var ce *connect.Error
	require.ErrorAs(t, err, &ce)
	require.Equal(t, `queue not found: "no-such-queue"`, ce.Message())
	require.Empty(t, list(&jqv1.ListJobsRequest{Type: "none"}))

	// A failure reported for a job never acked: one event row records both its transitions
	// (ASSIGNED → RUNNING → FAILED); it is one finished attempt, a failed one.
	b.finish(b.lease(worker, b.insert(store.JobInsertParams{Queue: b.queue, Type: "report.build"}), false), false, nil)

	st, err := b.cl.Queues.GetQueueStats(b.ctx, connect.NewRequest(&jqv1.GetQueueStatsRequest{Name: b.queue}))
	require.NoError(t, err)
	s := st.Msg.GetStats()
	require.EqualValues(t, 2, s.GetPending())
	require.EqualValues(t, 1, s.GetDone())
	require.EqualValues(t, 1, s.GetFailed())
	require.False(t, s.GetDoneEstimated())
	require.EqualValues(t, 2, s.GetFinished())
	require.EqualValues(t, 2, s.GetFinishedLastMinute())
	require.EqualValues(t, 1, s.GetFailedAttempts())
	require.EqualValues(t, 1, s.GetFailedLastMinute())
	require.InDelta(t, 0.5, s.GetErrorRate(), 1e-9)
	require.Positive(t, s.GetWindow().AsDuration())
	require.LessOrEqual(t, s.GetWindow().AsDuration(), queue.RecentWindow)

	status, err := b.cl.Admin.GetStatus(b.ctx, connect.NewRequest(&jqv1.GetStatusRequest{}))
	require.NoError(t, err)
	var depth *jqv1.QueueDepth
	for _, q := range status.Msg.GetQueues() {
		if q.GetQueue() == b.queue {
			depth = q
		}
	}
	require.NotNil(t, depth, "GetStatus lists the queue")
	require.EqualValues(t, 2, depth.GetPending())
	require.Zero(t, depth.GetRunning())
	require.Positive(t, status.Msg.GetActiveWorkers())

	// Without the depth (the console's overview): the same health and workers, no queues.
	lean, err := b.cl.Admin.GetStatus(b.ctx, connect.NewRequest(&jqv1.GetStatusRequest{OmitQueueDepth: true}))
	require.NoError(t, err)
	require.Empty(t, lean.Msg.GetQueues())
	require.Positive(t, lean.Msg.GetActiveWorkers(), "this test's worker at least (other tests share the store)")
	require.Equal(t, status.Msg.GetHealthy(), lean.Msg.GetHealthy())
	require.Len(t, lean.Msg.GetComponents(), len(status.Msg.GetComponents()))
}

// ListJobs with id_prefix finds a job by the leading characters of its id, as the tables show it;
// it takes no other filter.
func TestListJobsByIDPrefix(t *testing.T) {
	b := setup(t)
	j := b.insert(store.JobInsertParams{})
	res, err := b.cl.Jobs.ListJobs(b.ctx, connect.NewRequest(&jqv1.ListJobsRequest{IdPrefix: j.ID[:8]}))
	require.NoError(t, err)
	var ids []string
	for _, got := range res.Msg.GetJobs() {
		ids = append(ids, got.GetId())
	}
	require.Contains(t, ids, j.ID)
	require.Empty(t, res.Msg.GetNextPageToken())
	res, err = b.cl.Jobs.ListJobs(b.ctx, connect.NewRequest(&jqv1.ListJobsRequest{IdPrefix: j.ID, PageSize: 1}))
	require.NoError(t, err)
	require.Len(t, res.Msg.GetJobs(), 1)
	require.Equal(t, b.queue, res.Msg.GetJobs()[0].GetQueue())

	for name, req := range map[string]*jqv1.ListJobsRequest{
		"not hex":      {IdPrefix: "zzzzzzzz"},
		"too short":    {IdPrefix: "885"},
		"with a queue": {IdPrefix: j.ID[:8], Queue: b.queue},
		"page size":    {IdPrefix: j.ID[:8], PageSize: 101},
	} {
		_, err := b.cl.Jobs.ListJobs(b.ctx, connect.NewRequest(req))
		requireCode(t, connect.CodeInvalidArgument, err, name)
	}
}
