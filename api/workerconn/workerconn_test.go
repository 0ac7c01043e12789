package workerconn_test

import (
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"connectrpc.com/connect"
	"github.com/stretchr/testify/require"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/jq-dev/jq/api/apierr"
	jqv1 "github.com/jq-dev/jq/api/gen/jq/v1"
	"github.com/jq-dev/jq/api/gen/jq/v1/jqv1connect"
	"github.com/jq-dev/jq/api/rpcclient"
	"github.com/jq-dev/jq/api/workerconn"
	"github.com/jq-dev/jq/queue"
	"github.com/jq-dev/jq/queue/executor"
)

// stubWorkers is a scripted WorkerService: it checks what the remote Conn
// puts on the wire and answers with fixed messages. It is a test of the
// adapter's mapping, not of the server.
type stubWorkers struct {
	jqv1connect.UnimplementedWorkerServiceHandler

	mu       sync.Mutex
	register *jqv1.RegisterWorkerRequest
	stream   *jqv1.StreamJobsRequest
	acks     *jqv1.AckJobsRequest
	reports  []*jqv1.JobReport
	hb       *jqv1.HeartbeatRequest
	dereg    int
	errCode  connect.Code // when set, unary calls fail with it
	errAs    error        // when set, unary calls fail with it as the server sends it (apierr)
	hbReply  *jqv1.HeartbeatResponse
	// sendAndEnd: the stream sends a keepalive and the assignments, then ends
	// OK; otherwise it stays open until the client goes.
	sendAndEnd  bool
	assignments []*jqv1.Assignment
}

func (s *stubWorkers) fail() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.errAs != nil {
		return apierr.New(s.errAs, "scripted failure")
	}
	if s.errCode != 0 {
		return connect.NewError(s.errCode, errors.New("scripted failure"))
	}
	return nil
}

func (s *stubWorkers) RegisterWorker(_ context.Context, r *connect.Request[jqv1.RegisterWorkerRequest]) (*connect.Response[jqv1.RegisterWorkerResponse], error) {
	if err := s.fail(); err != nil {
		return nil, err
	}
	s.mu.Lock()
	s.register = r.Msg
	s.mu.Unlock()
	return connect.NewResponse(&jqv1.RegisterWorkerResponse{
		HeartbeatInterval: durationpb.New(7 * time.Second), HeartbeatTimeout: durationpb.New(40 * time.Second),
	}), nil
}

func (s *stubWorkers) StreamJobs(ctx context.Context, r *connect.Request[jqv1.StreamJobsRequest], st *connect.ServerStream[jqv1.StreamJobsResponse]) error {
	s.mu.Lock()
	s.stream = r.Msg
	as, end := s.assignments, s.sendAndEnd
	s.mu.Unlock()
	if err := st.Send(&jqv1.StreamJobsResponse{}); err != nil { // keepalive
		return err
	}
	for _, a := range as {
		if err := st.Send(&jqv1.StreamJobsResponse{Assignment: a}); err != nil {
			return err
		}
	}
	if end {
		return nil
	}
	<-ctx.Done()
	return ctx.Err()
}

func (s *stubWorkers) AckJobs(_ context.Context, r *connect.Request[jqv1.AckJobsRequest]) (*connect.Response[jqv1.AckJobsResponse], error) {
	if err := s.fail(); err != nil {
		return nil, err
	}
	s.mu.Lock()
	s.acks = r.Msg
	s.mu.Unlock()
	res := &jqv1.AckJobsResponse{}
	for i, l := range r.Msg.GetLeases() {
		res.Results = append(res.Results, &jqv1.LeaseResult{JobId: l.GetJobId(), Ok: i == 0, Error: map[bool]string{true: "", false: "stale attempt"}[i == 0]})
	}
	return connect.NewResponse(res), nil
}

func (s *stubWorkers) ReportJobs(_ context.Context, r *connect.Request[jqv1.ReportJobsRequest]) (*connect.Response[jqv1.ReportJobsResponse], error) {
	if err := s.fail(); err != nil {
		return nil, err
	}
	s.mu.Lock()
	s.reports = append(s.reports, r.Msg.GetReports()...)
	s.mu.Unlock()
	res := &jqv1.ReportJobsResponse{}
	for _, rep := range r.Msg.GetReports() {
		res.Results = append(res.Results, &jqv1.LeaseResult{JobId: rep.GetJobId(), Ok: true})
	}
	return connect.NewResponse(res), nil
}

func (s *stubWorkers) Heartbeat(_ context.Context, r *connect.Request[jqv1.HeartbeatRequest]) (*connect.Response[jqv1.HeartbeatResponse], error) {
	if err := s.fail(); err != nil {
		return nil, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.hb = r.Msg
	if s.hbReply != nil {
		return connect.NewResponse(s.hbReply), nil
	}
	return connect.NewResponse(&jqv1.HeartbeatResponse{}), nil
}

func (s *stubWorkers) DeregisterWorker(context.Context, *connect.Request[jqv1.DeregisterWorkerRequest]) (*connect.Response[jqv1.DeregisterWorkerResponse], error) {
	if err := s.fail(); err != nil {
		return nil, err
	}
	s.mu.Lock()
	s.dereg++
	s.mu.Unlock()
	return connect.NewResponse(&jqv1.DeregisterWorkerResponse{}), nil
}

// serveStub serves the stub over h2c (gRPC needs HTTP/2) and returns a client.
func serveStub(t *testing.T, stub *stubWorkers) *rpcclient.Client {
	t.Helper()
	mux := http.NewServeMux()
	mux.Handle(jqv1connect.NewWorkerServiceHandler(stub))
	srv := httptest.NewUnstartedServer(mux)
	p := new(http.Protocols)
	p.SetHTTP1(true)
	p.SetUnencryptedHTTP2(true)
	srv.Config.Protocols = p
	srv.Start()
	t.Cleanup(srv.Close)
	c, err := rpcclient.New(rpcclient.Options{Addr: srv.Listener.Addr().String()})
	require.NoError(t, err)
	t.Cleanup(c.Close)
	return c
}

const jobID = "2f1c3c9e-7d5a-4b8e-9f3a-1c2d3e4f5a6b"

func testAssignment(deadline time.Time) *jqv1.Assignment {
	return &jqv1.Assignment{
		Attempt:  3,
		Deadline: timestamppb.New(deadline),
		Job: &jqv1.Job{
			Id: jobID, Queue: "emails", Type: "noop", Payload: []byte(`{"a":1}`), Priority: 7,
			State: jqv1.JobState_JOB_STATE_ASSIGNED, MaxRetries: 5, RetryCount: 2, Attempt: 3,
			Timeout: durationpb.New(90 * time.Second), Labels: map[string]string{"team": "x"},
			TraceContext: map[string]string{"traceparent": "00-abc-def-01"}, WorkerId: "w1",
			CreatedAt: timestamppb.New(time.Unix(1700000000, 0)),
		},
	}
}

func TestConnMapping(t *testing.T) {
	t.Parallel()
	deadline := time.Now().Add(time.Minute).Truncate(time.Millisecond)
	stub := &stubWorkers{sendAndEnd: true, assignments: []*jqv1.Assignment{testAssignment(deadline)},
		hbReply: &jqv1.HeartbeatResponse{Command: jqv1.WorkerCommand_WORKER_COMMAND_SHUTDOWN, CancelJobIds: []string{"c1", "c2"}}}
	conn := workerconn.New(serveStub(t, stub))
	ctx := t.Context()

	reg, err := conn.Register(ctx, executor.RegisterParams{
		WorkerID: "w1", Hostname: "h", Version: "v1", Concurrency: 8, Queues: []string{"emails", "default"}, Labels: map[string]string{"zone": "a"},
	})
	require.NoError(t, err)
	require.Equal(t, executor.Registration{HeartbeatInterval: 7 * time.Second, HeartbeatTimeout: 40 * time.Second}, reg)
	require.Equal(t, "w1", stub.register.GetWorkerId())
	require.Equal(t, int32(8), stub.register.GetConcurrency())
	require.Equal(t, []string{"emails", "default"}, stub.register.GetQueues())
	require.Equal(t, "v1", stub.register.GetVersion())
	require.Equal(t, map[string]string{"zone": "a"}, stub.register.GetLabels())

	st, err := conn.Stream(ctx, executor.StreamParams{WorkerID: "w1", Capacity: 5})
	require.NoError(t, err)
	a, err := st.Recv()
	require.NoError(t, err)
	require.Nil(t, a, "keepalive")
	a, err = st.Recv()
	require.NoError(t, err)
	require.Equal(t, 3, a.Attempt)
	require.True(t, a.Deadline.Equal(deadline))
	j := a.Job
	require.Equal(t, jobID, j.ID)
	require.Equal(t, "emails", j.Queue)
	require.Equal(t, "noop", j.Type)
	require.JSONEq(t, `{"a":1}`, string(j.Payload))
	require.Equal(t, 7, j.Priority)
	require.Equal(t, queue.StateAssigned, j.State)
	require.Equal(t, 5, j.MaxRetries)
	require.Equal(t, 2, j.RetryCount)
	require.Equal(t, 90*time.Second, j.Timeout)
	require.Equal(t, map[string]string{"team": "x"}, j.Labels)
	require.Equal(t, "00-abc-def-01", j.TraceContext["traceparent"])
	require.True(t, j.CreatedAt.Equal(time.Unix(1700000000, 0)))
	require.True(t, j.StartedAt.IsZero(), "unset timestamps stay zero")
	_, err = st.Recv()
	require.ErrorIs(t, err, io.EOF, "the server ended the stream with OK")
	require.NoError(t, st.Close())
	require.Equal(t, int32(5), stub.stream.GetCapacity())

	res, err := conn.Ack(ctx, executor.AckParams{WorkerID: "w1", Leases: []executor.Lease{{JobID: "a", Attempt: 1}, {JobID: "b", Attempt: 2}}})
	require.NoError(t, err)
	require.Equal(t, []executor.LeaseResult{{JobID: "a", OK: true}, {JobID: "b", OK: false, Error: "stale attempt"}}, res)
	require.Equal(t, int32(2), stub.acks.GetLeases()[1].GetAttempt())

	res, err = conn.Report(ctx, executor.ReportParams{WorkerID: "w1", Reports: []executor.Report{
		{Lease: executor.Lease{JobID: "a", Attempt: 1}, Success: true, Result: []byte("out"), Runtime: time.Second},
		{Lease: executor.Lease{JobID: "b", Attempt: 2}, Error: "boom", Reason: executor.ReasonTimeout, Permanent: true, Runtime: 2 * time.Second},
		{Lease: executor.Lease{JobID: "c", Attempt: 1}, Error: "busy", RetryAfter: 90 * time.Second},
	}})
	require.NoError(t, err)
	require.Len(t, res, 3)
	require.Nil(t, stub.reports[1].GetFailure().GetRetryAfter(), "none asked: unset")
	require.Equal(t, 90*time.Second, stub.reports[2].GetFailure().GetRetryAfter().AsDuration())
	require.Equal(t, "out", string(stub.reports[0].GetSuccess().GetResult()))
	require.Equal(t, time.Second, stub.reports[0].GetSuccess().GetRuntime().AsDuration())
	f := stub.reports[1].GetFailure()
	require.Equal(t, "boom", f.GetError())
	require.Equal(t, "timeout", f.GetReason())
	require.True(t, f.GetPermanent())
	require.Equal(t, 2*time.Second, f.GetRuntime().AsDuration())

	hb, err := conn.Heartbeat(ctx, executor.HeartbeatParams{WorkerID: "w1", Running: []executor.Lease{{JobID: "a", Attempt: 1}}})
	require.NoError(t, err)
	require.Equal(t, executor.HeartbeatReply{Command: executor.CommandShutdown, CancelJobIDs: []string{"c1", "c2"}}, hb)
	require.Equal(t, "a", stub.hb.GetRunning()[0].GetJobId())

	require.NoError(t, conn.Deregister(ctx, executor.DeregisterParams{WorkerID: "w1"}))
	require.Equal(t, 1, stub.dereg)
}

func TestConnErrorMapping(t *testing.T) {
	t.Parallel()
	for code, want := range map[connect.Code]error{
		connect.CodeInvalidArgument:    executor.ErrInvalid,
		connect.CodeNotFound:           executor.ErrUnknownWorker,
		connect.CodeFailedPrecondition: executor.ErrWorkerInactive,
		connect.CodeUnavailable:        executor.ErrUnreachable,
		connect.CodeInternal:           nil,
	} {
		stub := &stubWorkers{errCode: code}
		conn := workerconn.New(serveStub(t, stub))
		_, err := conn.Heartbeat(t.Context(), executor.HeartbeatParams{WorkerID: "w1"})
		require.Error(t, err, code)
		require.Equal(t, code, connect.CodeOf(err), "the status code stays in the chain")
		for _, sentinel := range []error{executor.ErrInvalid, executor.ErrUnknownWorker, executor.ErrWorkerInactive, executor.ErrUnreachable} {
			require.Equal(t, errors.Is(want, sentinel), errors.Is(err, sentinel), "%s vs %v", code, sentinel)
		}
	}
	// No server at all: unreachable.
	c, err := rpcclient.New(rpcclient.Options{Addr: "127.0.0.1:1"})
	require.NoError(t, err)
	defer c.Close()
	_, err = workerconn.New(c).Register(t.Context(), executor.RegisterParams{WorkerID: "w"})
	require.ErrorIs(t, err, executor.ErrUnreachable)
}

// TestConnErrorReasons: with a reason, the error the server names decides, not its code — a stale
// attempt (FAILED_PRECONDITION) is not a worker gone inactive, a missing job (NOT_FOUND) is not an
// unknown worker. Every row of the API's error table, through the real transport.
func TestConnErrorReasons(t *testing.T) {
	t.Parallel()
	want := map[error]error{
		queue.ErrInvalidArgument:  executor.ErrInvalid,
		queue.ErrUnauthenticated:  executor.ErrNotAllowed,
		queue.ErrPermissionDenied: executor.ErrNotAllowed,
		queue.ErrWorkerNotFound:   executor.ErrUnknownWorker,
		queue.ErrWorkerLost:       executor.ErrWorkerInactive,
		queue.ErrWorkerDraining:   executor.ErrWorkerInactive,
	}
	kinds := []error{executor.ErrInvalid, executor.ErrNotAllowed, executor.ErrUnknownWorker,
		executor.ErrWorkerInactive, executor.ErrUnreachable, executor.ErrUnsupported}
	for _, row := range apierr.Table {
		kind, ok := want[row.Err]
		if !ok && (row.Code == connect.CodeUnavailable || row.Code == connect.CodeDeadlineExceeded) {
			kind = executor.ErrUnreachable
		}
		stub := &stubWorkers{errAs: row.Err}
		_, err := workerconn.New(serveStub(t, stub)).Heartbeat(t.Context(), executor.HeartbeatParams{WorkerID: "w1"})
		require.Error(t, err, row.Reason)
		require.Equal(t, row.Reason, apierr.Reason(err), "the reason stays in the chain")
		for _, k := range kinds {
			require.Equal(t, errors.Is(kind, k), errors.Is(err, k), "%s vs %v", row.Reason, k)
		}
	}
}

// TestConnEndToEnd runs the executor over the real transport against the
// stub: register, stream, ack, report, deregister.
func TestConnEndToEnd(t *testing.T) {
	t.Parallel()
	stub := &stubWorkers{assignments: []*jqv1.Assignment{testAssignment(time.Now().Add(time.Minute))}}
	mux := queue.NewMux()
	mux.RegisterFunc("noop", func(_ context.Context, j *queue.Job) ([]byte, error) { return j.Payload, nil })
	e, err := executor.New(executor.Options{
		Conn: workerconn.New(serveStub(t, stub)), Handler: mux, WorkerID: "w1",
		Concurrency: 2, Queues: []string{"emails"}, HeartbeatInterval: time.Hour,
	})
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() { done <- e.Run(ctx) }()
	require.Eventually(t, func() bool {
		stub.mu.Lock()
		defer stub.mu.Unlock()
		return len(stub.reports) == 1
	}, 10*time.Second, 2*time.Millisecond)
	require.True(t, e.Ready())
	stub.mu.Lock()
	r := stub.reports[0]
	require.Equal(t, int32(2), stub.stream.GetCapacity())
	stub.mu.Unlock()
	require.Equal(t, jobID, r.GetJobId())
	require.Equal(t, int32(3), r.GetAttempt())
	require.JSONEq(t, `{"a":1}`, string(r.GetSuccess().GetResult()))
	cancel()
	require.NoError(t, <-done)
	stub.mu.Lock()
	defer stub.mu.Unlock()
	require.Equal(t, 1, stub.dereg)
	require.NotNil(t, stub.hb, "a heartbeat follows the registration at once")
}
