package executor

import (
	"context"
	"errors"
	"fmt"
	"io"

	"connectrpc.com/connect"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/jq-dev/jq/api"
	"github.com/jq-dev/jq/api/client"
	jqv1 "github.com/jq-dev/jq/api/gen/jq/v1"
	"github.com/jq-dev/jq/api/gen/jq/v1/jqv1connect"
)

// Remote is the Conn over the jq API (WorkerService).
type Remote struct {
	c jqv1connect.WorkerServiceClient
}

var _ Conn = (*Remote)(nil)

// NewRemote returns a Conn that talks to the server through c.
func NewRemote(c *client.Client) *Remote { return &Remote{c: c.Workers} }

// Register calls RegisterWorker.
func (r *Remote) Register(ctx context.Context, p RegisterParams) (Registration, error) {
	res, err := r.c.RegisterWorker(ctx, connect.NewRequest(&jqv1.RegisterWorkerRequest{
		WorkerId:    p.WorkerID,
		Hostname:    p.Hostname,
		Concurrency: int32(min(p.Concurrency, MaxConcurrency)), //nolint:gosec // bounded
		Queues:      p.Queues,
		Version:     p.Version,
		Labels:      p.Labels,
	}))
	if err != nil {
		return Registration{}, remoteErr("register worker", err)
	}
	return Registration{
		HeartbeatInterval: res.Msg.GetHeartbeatInterval().AsDuration(),
		HeartbeatTimeout:  res.Msg.GetHeartbeatTimeout().AsDuration(),
	}, nil
}

// Stream calls StreamJobs.
func (r *Remote) Stream(ctx context.Context, p StreamParams) (Stream, error) {
	st, err := r.c.StreamJobs(ctx, connect.NewRequest(&jqv1.StreamJobsRequest{
		WorkerId: p.WorkerID,
		Capacity: int32(min(p.Capacity, 2*MaxConcurrency)), //nolint:gosec // bounded
		Prefetch: int32(min(p.Prefetch, MaxConcurrency)),   //nolint:gosec // bounded
	}))
	if err != nil {
		return nil, remoteErr("stream jobs", err)
	}
	return &remoteStream{st: st}, nil
}

type remoteStream struct {
	st *connect.ServerStreamForClient[jqv1.StreamJobsResponse]
}

func (s *remoteStream) Recv() (*Assignment, error) {
	if !s.st.Receive() {
		if err := s.st.Err(); err != nil {
			return nil, remoteErr("stream jobs", err)
		}
		return nil, io.EOF
	}
	a := s.st.Msg().GetAssignment()
	if a == nil {
		return nil, nil // keepalive
	}
	if a.GetJob().GetId() == "" {
		return nil, errors.New("stream jobs: assignment without a job")
	}
	out := &Assignment{Job: api.JobFromProto(a.GetJob()), Attempt: int(a.GetAttempt())}
	out.Deadline = api.TimeOf(a.GetDeadline())
	return out, nil
}

func (s *remoteStream) Close() error { return s.st.Close() }

// Ack calls AckJobs.
func (r *Remote) Ack(ctx context.Context, p AckParams) ([]LeaseResult, error) {
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
func (r *Remote) Report(ctx context.Context, p ReportParams) ([]LeaseResult, error) {
	reps := make([]*jqv1.JobReport, len(p.Reports))
	for i, rep := range p.Reports {
		pr := &jqv1.JobReport{JobId: rep.JobID, Attempt: int32(rep.Attempt)} //nolint:gosec // attempt numbers are small
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

// Heartbeat calls Heartbeat.
func (r *Remote) Heartbeat(ctx context.Context, p HeartbeatParams) (HeartbeatReply, error) {
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
		return HeartbeatReply{}, remoteErr("heartbeat", err)
	}
	out := HeartbeatReply{CancelJobIDs: res.Msg.GetCancelJobIds()}
	switch res.Msg.GetCommand() {
	case jqv1.WorkerCommand_WORKER_COMMAND_DRAIN:
		out.Command = CommandDrain
	case jqv1.WorkerCommand_WORKER_COMMAND_SHUTDOWN:
		out.Command = CommandShutdown
	}
	return out, nil
}

// Deregister calls DeregisterWorker.
func (r *Remote) Deregister(ctx context.Context, p DeregisterParams) error {
	_, err := r.c.DeregisterWorker(ctx, connect.NewRequest(&jqv1.DeregisterWorkerRequest{WorkerId: p.WorkerID}))
	if err != nil {
		return remoteErr("deregister worker", err)
	}
	return nil
}

// remoteErr maps a status code to the protocol errors of Conn, keeping the
// original error in the chain.
func remoteErr(op string, err error) error {
	var kind error
	switch connect.CodeOf(err) {
	case connect.CodeInvalidArgument:
		kind = ErrInvalid
	case connect.CodeUnauthenticated, connect.CodePermissionDenied:
		kind = ErrNotAllowed
	case connect.CodeNotFound:
		kind = ErrUnknownWorker
	case connect.CodeFailedPrecondition:
		kind = ErrWorkerInactive
	case connect.CodeUnavailable, connect.CodeDeadlineExceeded:
		kind = ErrUnreachable
	default:
		return fmt.Errorf("%s: %w", op, err)
	}
	return fmt.Errorf("%s: %w: %w", op, kind, err)
}

func leaseToProto(l Lease) *jqv1.JobLease {
	return &jqv1.JobLease{JobId: l.JobID, Attempt: int32(l.Attempt)} //nolint:gosec // attempt numbers are small
}

func leaseResults(rs []*jqv1.LeaseResult) []LeaseResult {
	out := make([]LeaseResult, len(rs))
	for i, r := range rs {
		out[i] = LeaseResult{JobID: r.GetJobId(), OK: r.GetOk(), Error: r.GetError()}
	}
	return out
}
