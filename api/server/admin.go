package apiserver

import (
	"context"
	"math"
	"slices"

	"connectrpc.com/connect"
	"google.golang.org/protobuf/types/known/durationpb"

	jqv1 "github.com/jq-dev/jq/api/gen/jq/v1"
	"github.com/jq-dev/jq/internal/buildinfo"
	"github.com/jq-dev/jq/internal/health"
	"github.com/jq-dev/jq/queue"
)

type adminService struct {
	store   Reader
	version buildinfo.Info
	status  func(ctx context.Context) []health.Result
	adminOps
}

func (s *adminService) GetVersion(context.Context, *connect.Request[jqv1.GetVersionRequest]) (*connect.Response[jqv1.GetVersionResponse], error) {
	v := s.version
	return connect.NewResponse(&jqv1.GetVersionResponse{Version: v.Version, Commit: v.Commit, GoVersion: v.GoVersion, BuildTime: v.BuildTime}), nil
}

// GetStatus reports dependency health in the response rather than failing:
// the operator wants the whole picture, especially when something is down.
func (s *adminService) GetStatus(ctx context.Context, req *connect.Request[jqv1.GetStatusRequest]) (*connect.Response[jqv1.GetStatusResponse], error) {
	out := &jqv1.GetStatusResponse{ServerVersion: s.version.Version}
	var results []health.Result
	if s.status != nil {
		results = s.status(ctx)
	}
	for _, r := range results {
		out.Components = append(out.Components, &jqv1.ComponentHealth{
			Name: r.Name, Healthy: r.Healthy, Detail: r.Detail, Latency: durationpb.New(r.Latency),
			Degraded: !r.Healthy && !r.Critical,
		})
	}
	out.Healthy = health.Ready(results)
	if !out.Healthy {
		return connect.NewResponse(out), nil
	}
	if req.Msg.GetOmitQueueDepth() {
		// The workers alone: the depth statement is most of a status's cost at 1M jobs, and the
		// console's overview counts each queue with GetQueueStats anyway.
		n, err := s.store.WorkerCounts(ctx, "", "")
		if err != nil {
			return nil, err
		}
		out.ActiveWorkers = int32(min(n.Live, math.MaxInt32)) //nolint:gosec // bounded
		return connect.NewResponse(out), nil
	}
	// One statement over the live states' partial indexes (the depth gauges' snapshot), whatever
	// the history holds: the status never counts DONE jobs.
	snap, err := s.store.DepthSnapshot(ctx)
	if err != nil {
		return nil, err
	}
	out.ActiveWorkers = int32(min(snap.ActiveWorkers, math.MaxInt32)) //nolint:gosec // bounded
	names := slices.Clone(snap.Queues)
	for q := range snap.Jobs { // jobs of a queue deleted while the snapshot was taken
		if !slices.Contains(names, q) {
			names = append(names, q)
		}
	}
	slices.Sort(names)
	var workers []*queue.Worker
	for _, q := range names {
		n := snap.Jobs[q]
		d := &jqv1.QueueDepth{
			Queue: q, Pending: n[queue.StatePending], Assigned: n[queue.StateAssigned], Running: n[queue.StateRunning],
			Failed: n[queue.StateFailed], DeadLettered: n[queue.StateDeadLettered],
		}
		if d.Pending > 0 {
			if workers == nil {
				if workers, err = s.store.WorkerList(ctx); err != nil {
					return nil, err
				}
			}
			if d.Waiting, err = s.waiting(ctx, q, workers); err != nil {
				return nil, err
			}
		}
		out.Queues = append(out.Queues, d)
	}
	return connect.NewResponse(out), nil
}

// waiting says why due jobs of queue q are not taken (queue.Waiting). The due jobs' types are read
// only when every ONLINE worker of q registered job types: one that takes every type takes them
// all, and with none the queue waits whatever the types.
func (s *adminService) waiting(ctx context.Context, q string, workers []*queue.Worker) (string, error) {
	var handled []string
	for _, w := range workers {
		if w.Status != queue.WorkerOnline || !slices.Contains(w.Queues, q) {
			continue
		}
		if len(w.Types) == 0 {
			return "", nil
		}
		handled = append(handled, w.Types...)
	}
	types, err := s.store.JobDueTypeList(ctx, q, handled)
	if err != nil {
		return "", err
	}
	return queue.Waiting(q, types, workers), nil
}
