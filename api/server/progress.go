package apiserver

import (
	"context"
	"fmt"

	"connectrpc.com/connect"

	jqv1 "github.com/jq-dev/jq/api/gen/jq/v1"
	"github.com/jq-dev/jq/queue"
	"github.com/jq-dev/jq/store"
)

// ReportProgress records how far the worker's running attempts got. A malformed
// request is INVALID_ARGUMENT as a whole, like a report batch; an update for a lease the worker
// no longer holds is only ok = false in its result, never an error of the call.
func (s *workerService) ReportProgress(ctx context.Context, req *connect.Request[jqv1.ReportProgressRequest]) (*connect.Response[jqv1.ReportProgressResponse], error) {
	m := req.Msg
	updates, err := progressParams(m)
	if err != nil {
		return nil, err
	}
	if err := s.ownWorker(ctx, m.GetWorkerId()); err != nil {
		return nil, err
	}
	outs, err := s.engine.Progress(ctx, m.GetWorkerId(), updates)
	if err != nil {
		return nil, err
	}
	return connect.NewResponse(&jqv1.ReportProgressResponse{Results: leaseResults(outs)}), nil
}

// progressParams converts a ReportProgress request.
func progressParams(m *jqv1.ReportProgressRequest) ([]store.JobProgressUpdate, error) {
	ls := make([]*jqv1.JobLease, len(m.GetUpdates()))
	for i, u := range m.GetUpdates() {
		ls[i] = &jqv1.JobLease{JobId: u.GetJobId(), Attempt: u.GetAttempt()}
	}
	base, err := leases(m.GetWorkerId(), ls)
	if err != nil {
		return nil, err
	}
	out := make([]store.JobProgressUpdate, len(base))
	for i, u := range m.GetUpdates() {
		if err := queue.ValidateProgress(int(u.GetPercent()), u.GetMessage()); err != nil {
			return nil, fmt.Errorf("updates[%d]: %w", i, err)
		}
		out[i] = store.JobProgressUpdate{ID: base[i].ID, Attempt: base[i].Attempt, Percent: int(u.GetPercent()), Message: u.GetMessage()}
	}
	return out, nil
}
