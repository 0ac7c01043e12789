package server

import (
	"context"

	"connectrpc.com/connect"

	jqv1 "github.com/jq-dev/jq/api/gen/jq/v1"
	"github.com/jq-dev/jq/store"
)

type workerService struct {
	store store.Store
}

// Registration, heartbeats, the assignment stream, acks and reports arrive
// with the issue "The core loop"; drain and shutdown with "Failure paths".

func (s *workerService) RegisterWorker(context.Context, *connect.Request[jqv1.RegisterWorkerRequest]) (*connect.Response[jqv1.RegisterWorkerResponse], error) {
	return nil, unimplemented("RegisterWorker")
}

func (s *workerService) Heartbeat(context.Context, *connect.Request[jqv1.HeartbeatRequest]) (*connect.Response[jqv1.HeartbeatResponse], error) {
	return nil, unimplemented("Heartbeat")
}

func (s *workerService) StreamJobs(context.Context, *connect.Request[jqv1.StreamJobsRequest], *connect.ServerStream[jqv1.StreamJobsResponse]) error {
	return unimplemented("StreamJobs")
}

func (s *workerService) AckJobs(context.Context, *connect.Request[jqv1.AckJobsRequest]) (*connect.Response[jqv1.AckJobsResponse], error) {
	return nil, unimplemented("AckJobs")
}

func (s *workerService) ReportJobs(context.Context, *connect.Request[jqv1.ReportJobsRequest]) (*connect.Response[jqv1.ReportJobsResponse], error) {
	return nil, unimplemented("ReportJobs")
}

func (s *workerService) DeregisterWorker(context.Context, *connect.Request[jqv1.DeregisterWorkerRequest]) (*connect.Response[jqv1.DeregisterWorkerResponse], error) {
	return nil, unimplemented("DeregisterWorker")
}

func (s *workerService) DrainWorker(context.Context, *connect.Request[jqv1.DrainWorkerRequest]) (*connect.Response[jqv1.DrainWorkerResponse], error) {
	return nil, unimplemented("DrainWorker")
}

func (s *workerService) ShutdownWorker(context.Context, *connect.Request[jqv1.ShutdownWorkerRequest]) (*connect.Response[jqv1.ShutdownWorkerResponse], error) {
	return nil, unimplemented("ShutdownWorker")
}

func (s *workerService) ListWorkers(ctx context.Context, _ *connect.Request[jqv1.ListWorkersRequest]) (*connect.Response[jqv1.ListWorkersResponse], error) {
	ws, err := s.store.WorkerList(ctx)
	if err != nil {
		return nil, err
	}
	out := make([]*jqv1.Worker, len(ws))
	for i, w := range ws {
		out[i] = workerToProto(w)
	}
	return connect.NewResponse(&jqv1.ListWorkersResponse{Workers: out}), nil
}
