// Package workerconn is the worker's side of the jq API: an executor.Conn over WorkerService, so
// a worker process (queue/executor) reaches its server through the API only — no database
// credentials, and the executor itself knows nothing of protobuf or Connect.
package workerconn

import (
	"context"
	"errors"
	"fmt"
	"io"
	"time"

	"connectrpc.com/connect"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/jq-dev/jq/api"
	"github.com/jq-dev/jq/api/apierr"
	jqv1 "github.com/jq-dev/jq/api/gen/jq/v1"
	"github.com/jq-dev/jq/api/gen/jq/v1/jqv1connect"
	"github.com/jq-dev/jq/api/rpcclient"
	"github.com/jq-dev/jq/queue"
	"github.com/jq-dev/jq/queue/executor"
)

// Conn is the executor.Conn over the jq API (WorkerService).
type Conn struct {
	c jqv1connect.WorkerServiceClient
}

var (
	_ executor.Conn         = (*Conn)(nil)
	_ executor.ProgressConn = (*Conn)(nil)
)

// New returns a Conn that talks to the server through c.
func New(c *rpcclient.Client) *Conn { return &Conn{c: c.Workers} }

// Register calls RegisterWorker.
func (r *Conn) Register(ctx context.Context, p executor.RegisterParams) (executor.Registration, error) {
	res, err := r.c.RegisterWorker(ctx, connect.NewRequest(&jqv1.RegisterWorkerRequest{
		WorkerId:    p.WorkerID,
		Hostname:    p.Hostname,
		Concurrency: int32(min(p.Concurrency, executor.MaxConcurrency)), //nolint:gosec // bounded
		Queues:      p.Queues,
		Version:     p.Version,
		Labels:      p.Labels,
		Types:       p.Types,
	}))
	if err != nil {
		return executor.Registration{}, remoteErr("register worker", err)
	}
	return executor.Registration{
		HeartbeatInterval: res.Msg.GetHeartbeatInterval().AsDuration(),
		HeartbeatTimeout:  res.Msg.GetHeartbeatTimeout().AsDuration(),
	}, nil
}

// Stream calls StreamJobs.
func (r *Conn) Stream(ctx context.Context, p executor.StreamParams) (executor.Stream, error) {
	st, err := r.c.StreamJobs(ctx, connect.NewRequest(&jqv1.StreamJobsRequest{
		WorkerId: p.WorkerID,
		Capacity: int32(min(p.Capacity, 2*executor.MaxConcurrency)), //nolint:gosec // bounded
		Prefetch: int32(min(p.Prefetch, executor.MaxConcurrency)),   //nolint:gosec // bounded
		Batched:  true,
	}))
	if err != nil {
		return nil, remoteErr("stream jobs", err)
	}
	return &remoteStream{st: st}, nil
}

type remoteStream struct {
	st      *connect.ServerStreamForClient[jqv1.StreamJobsResponse]
	pending []*jqv1.Assignment // the rest of a batched message, in order
}

func (s *remoteStream) Recv() (*executor.Assignment, error) {
	if len(s.pending) == 0 {
		if !s.st.Receive() {
			if err := s.st.Err(); err != nil {
				return nil, remoteErr("stream jobs", err)
			}
			return nil, io.EOF
		}
		m := s.st.Msg()
		switch {
		case len(m.GetAssignments()) > 0:
			s.pending = m.GetAssignments()
		case m.GetAssignment() != nil:
			s.pending = []*jqv1.Assignment{m.GetAssignment()}
		default:
			return nil, nil // keepalive
		}
	}
	a := s.pending[0]
	s.pending[0] = nil
	s.pending = s.pending[1:]
	if a.GetJob().GetId() == "" {
		return nil, errors.New("stream jobs: assignment without a job")
	}
	out := &executor.Assignment{Job: api.JobFromProto(a.GetJob()), Attempt: int(a.GetAttempt())}
	out.Deadline = api.TimeOf(a.GetDeadline())
	return out, nil
}

func (s *remoteStream) Close() error { return s.st.Close() }

// Ack calls AckJobs.
func (r *Conn) Ack(ctx context.Context, p executor.AckParams) ([]executor.LeaseResult, error) {
	leases := make([]*jqv1.JobLease, len(p.Leases))
	for i, l := range p.Leases {
		leases[i] = leaseToProto(l)
	}
	res, err := r.c.AckJobs(ctx, connect.NewRequest(&jqv1.AckJobsRequest{WorkerId: p.WorkerID, Leases: leases}))
	if err != nil {
		return nil, remoteErr("ack jobs", err)
	}
	return leaseResults(res.Msg.GetResults()), nil
}

// Report calls ReportJobs.
func (r *Conn) Report(ctx context.Context, p executor.ReportParams) ([]executor.LeaseResult, error) {
	reps := make([]*jqv1.JobReport, len(p.Reports))
	for i, rep := range p.Reports {
		pr := &jqv1.JobReport{JobId: rep.JobID, Attempt: int32(rep.Attempt), StartedAgo: durationOrNil(rep.StartedAgo)} //nolint:gosec // attempt numbers are small
		if rep.Success {
			pr.Outcome = &jqv1.JobReport_Success{Success: &jqv1.JobSuccess{
				Result: rep.Result, Runtime: durationpb.New(rep.Runtime),
			}}
		} else {
			f := &jqv1.JobFailure{
				Error: rep.Error, Reason: rep.Reason, Permanent: rep.Permanent, Runtime: durationpb.New(rep.Runtime),
			}
			if rep.RetryAfter > 0 {
				f.RetryAfter = durationpb.New(rep.RetryAfter)
			}
			pr.Outcome = &jqv1.JobReport_Failure{Failure: f}
		}
		reps[i] = pr
	}
	res, err := r.c.ReportJobs(ctx, connect.NewRequest(&jqv1.ReportJobsRequest{WorkerId: p.WorkerID, Reports: reps}))
	if err != nil {
		return nil, remoteErr("report jobs", err)
	}
	return leaseResults(res.Msg.GetResults()), nil
}

// Progress calls ReportProgress (executor.ProgressConn).
func (r *Conn) Progress(ctx context.Context, p executor.ProgressParams) ([]executor.LeaseResult, error) {
	us := make([]*jqv1.JobProgressUpdate, len(p.Updates))
	for i, u := range p.Updates {
		us[i] = &jqv1.JobProgressUpdate{JobId: u.JobID, Attempt: int32(u.Attempt), Percent: int32(u.Percent), Message: u.Message} //nolint:gosec // small
	}
	res, err := r.c.ReportProgress(ctx, connect.NewRequest(&jqv1.ReportProgressRequest{WorkerId: p.WorkerID, Updates: us}))
	if err != nil {
		return nil, remoteErr("report progress", err)
	}
	return leaseResults(res.Msg.GetResults()), nil
}

// Heartbeat calls Heartbeat.
func (r *Conn) Heartbeat(ctx context.Context, p executor.HeartbeatParams) (executor.HeartbeatReply, error) {
	running := make([]*jqv1.JobLease, len(p.Running))
	for i, l := range p.Running {
		running[i] = leaseToProto(l)
	}
	breakers := make([]*jqv1.QueueBreaker, len(p.Breakers))
	for i, b := range p.Breakers {
		breakers[i] = api.BreakerProto(b)
	}
	res, err := r.c.Heartbeat(ctx, connect.NewRequest(&jqv1.HeartbeatRequest{WorkerId: p.WorkerID, Running: running, Breakers: breakers}))
	if err != nil {
		return executor.HeartbeatReply{}, remoteErr("heartbeat", err)
	}
	out := executor.HeartbeatReply{CancelJobIDs: res.Msg.GetCancelJobIds()}
	switch res.Msg.GetCommand() {
	case jqv1.WorkerCommand_WORKER_COMMAND_DRAIN:
		out.Command = executor.CommandDrain
	case jqv1.WorkerCommand_WORKER_COMMAND_SHUTDOWN:
		out.Command = executor.CommandShutdown
	}
	return out, nil
}

// Deregister calls DeregisterWorker.
func (r *Conn) Deregister(ctx context.Context, p executor.DeregisterParams) error {
	_, err := r.c.DeregisterWorker(ctx, connect.NewRequest(&jqv1.DeregisterWorkerRequest{WorkerId: p.WorkerID}))
	if err != nil {
		return remoteErr("deregister worker", err)
	}
	return nil
}

// remoteErr wraps a failed call's error in the protocol error of Conn it is (kindOf), keeping the
// original error in the chain.
func remoteErr(op string, err error) error {
	if kind := kindOf(err); kind != nil {
		return fmt.Errorf("%s: %w: %w", op, kind, err)
	}
	return fmt.Errorf("%s: %w", op, err)
}

// kindOf is the executor's category of a failed call, or nil. The server's reason (api/apierr)
// names its error, so a stale attempt or a missing job is never read as a worker the server lost,
// though they share codes with it; the code decides only for an error without a reason: the
// transport's own (unreachable, timed out, not implemented) and a server from before the reasons.
func kindOf(err error) error {
	if s := apierr.Sentinel(err); s != nil {
		switch {
		case errors.Is(s, queue.ErrInvalidArgument):
			return executor.ErrInvalid
		case errors.Is(s, queue.ErrUnauthenticated), errors.Is(s, queue.ErrPermissionDenied):
			return executor.ErrNotAllowed
		case errors.Is(s, queue.ErrWorkerNotFound):
			return executor.ErrUnknownWorker
		case errors.Is(s, queue.ErrWorkerLost), errors.Is(s, queue.ErrWorkerDraining):
			return executor.ErrWorkerInactive
		}
		if c := connect.CodeOf(err); c == connect.CodeUnavailable || c == connect.CodeDeadlineExceeded {
			return executor.ErrUnreachable // shutting down, a dependency down, an outcome unknown
		}
		return nil
	}
	switch connect.CodeOf(err) {
	case connect.CodeInvalidArgument:
		return executor.ErrInvalid
	case connect.CodeUnauthenticated, connect.CodePermissionDenied:
		return executor.ErrNotAllowed
	case connect.CodeNotFound:
		return executor.ErrUnknownWorker
	case connect.CodeFailedPrecondition:
		return executor.ErrWorkerInactive
	case connect.CodeUnavailable, connect.CodeDeadlineExceeded:
		return executor.ErrUnreachable
	case connect.CodeUnimplemented:
		return executor.ErrUnsupported
	}
	return nil
}

func leaseToProto(l executor.Lease) *jqv1.JobLease {
	return &jqv1.JobLease{JobId: l.JobID, Attempt: int32(l.Attempt), StartedAgo: durationOrNil(l.StartedAgo)} //nolint:gosec // attempt numbers are small
}

// durationOrNil leaves a zero duration out of the message.
func durationOrNil(d time.Duration) *durationpb.Duration {
	if d <= 0 {
		return nil
	}
	return durationpb.New(d)
}

func leaseResults(rs []*jqv1.LeaseResult) []executor.LeaseResult {
	out := make([]executor.LeaseResult, len(rs))
	for i, r := range rs {
		out[i] = executor.LeaseResult{JobID: r.GetJobId(), OK: r.GetOk(), Error: r.GetError()}
	}
	return out
}
