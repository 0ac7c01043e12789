package apiserver

import (
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"sync"
	"time"

	"connectrpc.com/connect"
	"go.uber.org/zap"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/jq-dev/jq/api"
	"github.com/jq-dev/jq/api/apierr"
	"github.com/jq-dev/jq/api/auth"
	jqv1 "github.com/jq-dev/jq/api/gen/jq/v1"
	"github.com/jq-dev/jq/internal/jobtrace"
	"github.com/jq-dev/jq/queue"
	"github.com/jq-dev/jq/queue/engine"
	"github.com/jq-dev/jq/store"
)

type workerService struct {
	store             Reader
	engine            *engine.Engine
	log               *zap.Logger
	heartbeatInterval time.Duration
	heartbeatTimeout  time.Duration
	limits            Limits
	refused           func(reason string)
	streams           *streamCounter
	owners            sync.Map // worker id → the principal that registered it
}

func (s *workerService) RegisterWorker(ctx context.Context, req *connect.Request[jqv1.RegisterWorkerRequest]) (*connect.Response[jqv1.RegisterWorkerResponse], error) {
	p, err := registerParams(req.Msg)
	if err != nil {
		return nil, err
	}
	if err := s.checkRegistration(ctx, p.ID, p.Queues); err != nil {
		return nil, err
	}
	p.Principal, p.AnyOwner = auth.Owner(ctx), isAdmin(ctx)
	p.MaxOfPrincipal, p.OfflineRetention = s.limits.MaxWorkersPerPrincipal, s.limits.OfflineWorkerRetention
	p.MaxLive = s.limits.MaxWorkers
	w, err := s.engine.WorkerRegister(ctx, p)
	if errors.Is(err, queue.ErrLimitReached) {
		s.refused(auth.ReasonWorkerLimit)
	}
	if err != nil {
		return nil, err
	}
	return connect.NewResponse(&jqv1.RegisterWorkerResponse{
		Worker:            workerToProto(w),
		HeartbeatInterval: durationpb.New(s.heartbeatInterval),
		HeartbeatTimeout:  durationpb.New(s.heartbeatTimeout),
	}), nil
}

// Heartbeat records the worker's liveness and answers with the operator's
// command and the leases it should stop (cancelled or no longer its own).
func (s *workerService) Heartbeat(ctx context.Context, req *connect.Request[jqv1.HeartbeatRequest]) (*connect.Response[jqv1.HeartbeatResponse], error) {
	id := req.Msg.GetWorkerId()
	held, err := heldLeases(id, req.Msg.GetRunning())
	if err != nil {
		return nil, err
	}
	if err := s.ownWorker(ctx, id); err != nil {
		return nil, err
	}
	a, err := s.engine.WorkerHeartbeat(ctx, store.WorkerHeartbeatParams{ID: id, Breakers: breakersFromProto(req.Msg.GetBreakers())}, held)
	if err != nil {
		return nil, err
	}
	out := &jqv1.HeartbeatResponse{CancelJobIds: a.Cancel}
	switch {
	case a.Shutdown:
		out.Command = jqv1.WorkerCommand_WORKER_COMMAND_SHUTDOWN
	case a.Drain:
		out.Command = jqv1.WorkerCommand_WORKER_COMMAND_DRAIN
	}
	return connect.NewResponse(out), nil
}

// StreamJobs sends this worker's assignments as they are made, never more
// than its concurrency outstanding at once.
func (s *workerService) StreamJobs(ctx context.Context, req *connect.Request[jqv1.StreamJobsRequest], stream *connect.ServerStream[jqv1.StreamJobsResponse]) error {
	if err := validWorkerID(req.Msg.GetWorkerId()); err != nil {
		return err
	}
	if err := s.ownWorker(ctx, req.Msg.GetWorkerId()); err != nil {
		return err
	}
	w, err := s.store.WorkerGet(ctx, req.Msg.GetWorkerId())
	if err != nil {
		return err
	}
	prefetch := int(req.Msg.GetPrefetch())
	if prefetch < 0 || prefetch > w.Concurrency {
		return invalid(fmt.Sprintf("prefetch %d: want 0..%d (the registered concurrency)", prefetch, w.Concurrency))
	}
	if req.Msg.GetCapacity() < 0 || int(req.Msg.GetCapacity()) > w.Concurrency+prefetch {
		return invalid(fmt.Sprintf("capacity %d: want 0..%d (0 = concurrency plus prefetch)", req.Msg.GetCapacity(), w.Concurrency+prefetch))
	}
	switch w.Status {
	case queue.WorkerOffline:
		return apierr.New(queue.ErrWorkerLost, fmt.Sprintf("worker %q is OFFLINE: register again", w.ID))
	case queue.WorkerDraining:
		return apierr.New(queue.ErrWorkerDraining, fmt.Sprintf("worker %q is DRAINING: it gets no new jobs", w.ID))
	}
	release, err := s.streams.open(auth.Owner(ctx), s.limits)
	if err != nil {
		s.refused(auth.ReasonStreamLimit)
		return err
	}
	defer release()
	sess := s.engine.OpenSessionPrefetch(w, int(req.Msg.GetCapacity()), prefetch)
	defer sess.Close()
	log := s.log.With(zap.String("worker_id", w.ID))
	log.Info("worker stream opened", zap.Int32("capacity", req.Msg.GetCapacity()), zap.Int("prefetch", prefetch))
	defer log.Info("worker stream closed")
	// An empty message first (a keepalive, no assignment) flushes the response
	// headers, so the worker knows at once that its stream is established.
	if err := stream.Send(&jqv1.StreamJobsResponse{}); err != nil {
		return nil
	}
	for {
		jobs, err := sess.Next(ctx)
		if err != nil {
			if ctx.Err() != nil || errors.Is(err, engine.ErrWorkerDraining) {
				return nil // the worker went away, or was drained (FR-023)
			}
			return err
		}
		deadline := timestamppb.New(s.engine.AssignmentDeadline())
		var batch []*jqv1.Assignment
		size := 0
		for _, j := range jobs {
			if ce := log.Check(zap.DebugLevel, "job assigned"); ce != nil {
				ce.Write(zap.String("job_id", j.ID), zap.String("queue", j.Queue), zap.Int("attempt", j.Attempt),
					jobtrace.JobLogField(j))
			}
			a := &jqv1.Assignment{Job: api.JobProto(j), Attempt: int32(j.Attempt), Deadline: deadline} //nolint:gosec // small
			if !req.Msg.GetBatched() {
				if err := stream.Send(&jqv1.StreamJobsResponse{Assignment: a}); err != nil {
					return nil // the rest stay ASSIGNED; the assignment timeout recovers them
				}
				continue
			}
			n := proto.Size(a)
			if len(batch) > 0 && size+n > maxAssignmentBatchBytes {
				if err := stream.Send(&jqv1.StreamJobsResponse{Assignments: batch}); err != nil {
					return nil
				}
				batch, size = nil, 0
			}
			batch = append(batch, a)
			size += n
		}
		if len(batch) > 0 {
			if err := stream.Send(&jqv1.StreamJobsResponse{Assignments: batch}); err != nil {
				return nil
			}
		}
	}
}

// maxAssignmentBatchBytes bounds one batched message on the assignment stream: a claim's jobs go
// out together unless their payloads are large, so a worker never has to take one huge message.
const maxAssignmentBatchBytes = 1 << 20

func leaseResults(outs []store.LeaseOutcome) []*jqv1.LeaseResult {
	res := make([]*jqv1.LeaseResult, len(outs))
	for i, o := range outs {
		res[i] = &jqv1.LeaseResult{JobId: o.ID, Ok: o.Err == nil}
		if o.Err != nil {
			res[i].Error = firstLine(o.Err.Error())
		}
	}
	return res
}

func (s *workerService) AckJobs(ctx context.Context, req *connect.Request[jqv1.AckJobsRequest]) (*connect.Response[jqv1.AckJobsResponse], error) {
	ls, err := leases(req.Msg.GetWorkerId(), req.Msg.GetLeases())
	if err != nil {
		return nil, err
	}
	if err := s.ownWorker(ctx, req.Msg.GetWorkerId()); err != nil {
		return nil, err
	}
	outs, err := s.engine.Ack(ctx, req.Msg.GetWorkerId(), ls)
	if err != nil {
		return nil, err
	}
	return connect.NewResponse(&jqv1.AckJobsResponse{Results: leaseResults(outs)}), nil
}

func (s *workerService) ReportJobs(ctx context.Context, req *connect.Request[jqv1.ReportJobsRequest]) (*connect.Response[jqv1.ReportJobsResponse], error) {
	m := req.Msg
	reports, err := reportParams(m)
	if err != nil {
		return nil, err
	}
	if err := s.ownWorker(ctx, m.GetWorkerId()); err != nil {
		return nil, err
	}
	outs, err := s.engine.Report(ctx, m.GetWorkerId(), reports)
	if err != nil {
		return nil, err
	}
	return connect.NewResponse(&jqv1.ReportJobsResponse{Results: leaseResults(outs)}), nil
}

func (s *workerService) DeregisterWorker(ctx context.Context, req *connect.Request[jqv1.DeregisterWorkerRequest]) (*connect.Response[jqv1.DeregisterWorkerResponse], error) {
	if err := validWorkerID(req.Msg.GetWorkerId()); err != nil {
		return nil, err
	}
	if err := s.ownWorker(ctx, req.Msg.GetWorkerId()); err != nil {
		return nil, err
	}
	if err := s.engine.WorkerDeregister(ctx, req.Msg.GetWorkerId()); err != nil {
		return nil, err
	}
	return connect.NewResponse(&jqv1.DeregisterWorkerResponse{}), nil
}

// DrainWorker stops new assignments to a worker (FR-023). Idempotent.
func (s *workerService) DrainWorker(ctx context.Context, req *connect.Request[jqv1.DrainWorkerRequest]) (*connect.Response[jqv1.DrainWorkerResponse], error) {
	id := req.Msg.GetWorkerId()
	if err := validWorkerID(id); err != nil {
		return nil, err
	}
	w, err := s.engine.WorkerDrain(ctx, id)
	if err != nil {
		return nil, err
	}
	return connect.NewResponse(&jqv1.DrainWorkerResponse{Worker: workerToProto(w)}), nil
}

// ResumeWorker puts a drained worker back to work. Idempotent for an ONLINE worker.
func (s *workerService) ResumeWorker(ctx context.Context, req *connect.Request[jqv1.ResumeWorkerRequest]) (*connect.Response[jqv1.ResumeWorkerResponse], error) {
	id := req.Msg.GetWorkerId()
	if err := validWorkerID(id); err != nil {
		return nil, err
	}
	w, err := s.engine.WorkerResume(ctx, id)
	if err != nil {
		return nil, err
	}
	return connect.NewResponse(&jqv1.ResumeWorkerResponse{Worker: workerToProto(w)}), nil
}

// ShutdownWorker asks a worker to drain, deregister and exit (FR-024).
// Idempotent.
func (s *workerService) ShutdownWorker(ctx context.Context, req *connect.Request[jqv1.ShutdownWorkerRequest]) (*connect.Response[jqv1.ShutdownWorkerResponse], error) {
	if err := validWorkerID(req.Msg.GetWorkerId()); err != nil {
		return nil, err
	}
	w, err := s.engine.WorkerShutdown(ctx, req.Msg.GetWorkerId())
	if err != nil {
		return nil, err
	}
	return connect.NewResponse(&jqv1.ShutdownWorkerResponse{Worker: workerToProto(w)}), nil
}

// ListWorkers answers a page of workers (one unpaged list of 26,201 squatted ids was
// 4.8 MB). The page token is the last id listed, base64url-encoded.
func (s *workerService) ListWorkers(ctx context.Context, req *connect.Request[jqv1.ListWorkersRequest]) (*connect.Response[jqv1.ListWorkersResponse], error) {
	size := int(req.Msg.GetPageSize())
	switch {
	case size == 0:
		size = defaultWorkerPage
	case size < 0 || size > maxWorkerPage:
		return nil, fmt.Errorf("%w: page_size must be 0 to %d, got %d", queue.ErrInvalidArgument, maxWorkerPage, size)
	}
	after, err := base64.RawURLEncoding.DecodeString(req.Msg.GetPageToken())
	if err != nil {
		return nil, fmt.Errorf("%w: page_token is not one ListWorkers returned", queue.ErrInvalidArgument)
	}
	ws, err := s.store.WorkerListPage(ctx, string(after), size+1)
	if err != nil {
		return nil, err
	}
	res := &jqv1.ListWorkersResponse{}
	if len(ws) > size {
		ws = ws[:size]
		res.NextPageToken = base64.RawURLEncoding.EncodeToString([]byte(ws[size-1].ID))
	}
	res.Workers = make([]*jqv1.Worker, len(ws))
	for i, w := range ws {
		res.Workers[i] = workerToProto(w)
	}
	return connect.NewResponse(res), nil
}

// ListWorkers page sizes.
const (
	defaultWorkerPage = 500
	maxWorkerPage     = 1000
)
