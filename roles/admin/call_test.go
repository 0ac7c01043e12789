package admin

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"connectrpc.com/connect"
	"github.com/stretchr/testify/require"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/jq-dev/jq/api"
	"github.com/jq-dev/jq/api/apierr"
	jqv1 "github.com/jq-dev/jq/api/gen/jq/v1"
	"github.com/jq-dev/jq/api/gen/jq/v1/jqv1connect"
	"github.com/jq-dev/jq/queue"
)

const jobID = "6f1c2b8e-8a4e-4d43-9a3c-0d5e8f7a1b2c"

// fullJob is a DONE job record with every field of jq.v1.Job set that the server sets
// (api.JobProto): all but run_at, which queue.Job does not keep (not_before carries it).
func fullJob(t *testing.T) *jqv1.Job {
	t.Helper()
	at := func(s int) *timestamppb.Timestamp { return timestamppb.New(t0.Add(time.Duration(s) * time.Second)) }
	j := &jqv1.Job{
		Id: jobID, Queue: "emails", Type: "email.send", Payload: []byte(`{"to":"a@example.com"}`), Priority: 7,
		State: jqv1.JobState_JOB_STATE_DONE, MaxRetries: 3, RetryCount: 1, Attempt: 2, Ttl: durationpb.New(time.Hour),
		NotBefore: at(1), Timeout: durationpb.New(time.Minute), IdempotencyKey: "welcome-42",
		Labels: map[string]string{"team": "ops"}, KeepResult: true, TraceContext: map[string]string{"traceparent": "00-1-2-01"},
		WorkerId: "w-1", LastError: "first attempt failed", FailureReason: "handler_error",
		CreatedAt: at(0), UpdatedAt: at(9), StartedAt: at(5), CompletedAt: at(9),
		Result: &jqv1.JobResult{Data: []byte("ok"), ChecksumSha256: "2689367b205c16ce32ed4200942b8b8b1e262dfc70d9bc9fbc77c49699a4f1df",
			Runtime: durationpb.New(4 * time.Second), CompletedAt: at(9), Type: "success", FinishedAt: at(9), Size: 2},
		// The server sets progress only while a job runs; here it only has to survive the client.
		Progress: &jqv1.JobProgress{Percent: 40, Message: "4 of 10", UpdatedAt: at(7)},
		// Likewise: set only for a PENDING job.
		Waiting: "no connected worker handles type email.send",
	}
	fields := j.ProtoReflect().Descriptor().Fields()
	for i := range fields.Len() {
		if fields.Get(i).Name() == "run_at" {
			continue
		}
		require.True(t, j.ProtoReflect().Has(fields.Get(i)), "set %s in this test: the CLI must print it", fields.Get(i).Name())
	}
	return j
}

// The job commands print what the Go client returns (a queue.Job) converted back to the API's
// message: the output must be the server's answer, byte for byte, in JSON and YAML.
func TestJobRecordSurvivesTheClient(t *testing.T) {
	t.Parallel()
	for _, output := range []string{"json", "yaml"} {
		want, got := printed(t, output, &jqv1.GetJobResponse{Job: fullJob(t)}),
			printed(t, output, &jqv1.GetJobResponse{Job: api.JobProto(api.JobFromProto(fullJob(t)))})
		require.Equal(t, want, got, output)
	}
}

func printed(t *testing.T, output string, m proto.Message) string {
	t.Helper()
	re, out, _ := testEnv(context.Background(), output)
	require.NoError(t, re.printMessage(m, nil))
	return out.String()
}

// fakeAPI answers GetJob, CancelJob and SubmitJob with a fixed job or error, and refuses every queue
// call; it speaks gRPC over h2c as the server does.
type fakeAPI struct {
	jqv1connect.UnimplementedJobServiceHandler
	jqv1connect.UnimplementedQueueServiceHandler
	job *jqv1.Job
	err error
}

func (f *fakeAPI) GetJob(context.Context, *connect.Request[jqv1.GetJobRequest]) (*connect.Response[jqv1.GetJobResponse], error) {
	if f.err != nil {
		return nil, f.err
	}
	return connect.NewResponse(&jqv1.GetJobResponse{Job: f.job}), nil
}

func (f *fakeAPI) CancelJob(context.Context, *connect.Request[jqv1.CancelJobRequest]) (*connect.Response[jqv1.CancelJobResponse], error) {
	if f.err != nil {
		return nil, f.err
	}
	return connect.NewResponse(&jqv1.CancelJobResponse{Job: f.job}), nil
}

func (f *fakeAPI) SubmitJob(context.Context, *connect.Request[jqv1.SubmitJobRequest]) (*connect.Response[jqv1.SubmitJobResponse], error) {
	if f.err != nil {
		return nil, f.err
	}
	return connect.NewResponse(&jqv1.SubmitJobResponse{JobId: jobID, Existing: true}), nil
}

func (f *fakeAPI) PauseQueue(context.Context, *connect.Request[jqv1.PauseQueueRequest]) (*connect.Response[jqv1.PauseQueueResponse], error) {
	return nil, f.err
}

// serve starts f and returns a command environment pointed at it.
func serve(t *testing.T, f *fakeAPI, output string) (*runEnv, *syncBuffer) {
	t.Helper()
	mux := http.NewServeMux()
	mux.Handle(jqv1connect.NewJobServiceHandler(f))
	mux.Handle(jqv1connect.NewQueueServiceHandler(f))
	srv := httptest.NewUnstartedServer(mux)
	srv.Config.Protocols = new(http.Protocols)
	srv.Config.Protocols.SetUnencryptedHTTP2(true)
	srv.Start()
	t.Cleanup(srv.Close)
	re, out, _ := testEnv(context.Background(), output)
	re.globals.ServerAddr = strings.TrimPrefix(srv.URL, "http://")
	t.Cleanup(func() {
		if re.client != nil {
			re.client.Close()
		}
	})
	return re, out
}

// Through the Go client, the commands still print the server's answer in full and map its
// refusals to the documented exit codes and lines.
func TestCommandsThroughTheClient(t *testing.T) {
	t.Parallel()
	job := fullJob(t)
	for _, output := range []string{"json", "yaml"} {
		re, out := serve(t, &fakeAPI{job: job}, output)
		require.NoError(t, (&JobStatusCmd{ID: jobID}).Run(re))
		require.Equal(t, printed(t, output, &jqv1.GetJobResponse{Job: job}), out.String(), "job status -o %s", output)

		re, out = serve(t, &fakeAPI{job: job}, output)
		require.NoError(t, (&JobWaitCmd{ID: jobID}).Run(re))
		require.Equal(t, printed(t, output, &jqv1.GetJobResponse{Job: job}), out.String(), "job wait -o %s", output)

		re, out = serve(t, &fakeAPI{job: job}, output)
		require.NoError(t, (&JobCancelCmd{ID: jobID}).Run(re))
		require.Equal(t, printed(t, output, &jqv1.CancelJobResponse{Job: job}), out.String(), "job cancel -o %s", output)

		re, out = serve(t, &fakeAPI{}, output)
		require.NoError(t, (&JobSubmitCmd{Queue: "emails", Type: "noop", Payload: "{}"}).Run(re))
		require.Equal(t, printed(t, output, &jqv1.SubmitJobResponse{JobId: jobID, Existing: true}), out.String(), "job submit -o %s", output)
	}
	re, out := serve(t, &fakeAPI{}, "table")
	require.NoError(t, (&JobSubmitCmd{Queue: "emails", Type: "noop", Payload: "{}"}).Run(re))
	require.Equal(t, jobID+"\n", out.String(), "job submit prints the id and nothing else")

	refuse := func(sentinel error, msg string) *fakeAPI {
		return &fakeAPI{err: apierr.New(sentinel, msg)}
	}
	for _, c := range []struct {
		api  *fakeAPI
		cmd  interface{ Run(*runEnv) error }
		code int
		line string
	}{
		{refuse(queue.ErrJobNotFound, "job not found"), &JobStatusCmd{ID: jobID}, exitNotFound, `job "` + jobID + `" not found (jq job list shows recent jobs)`},
		{refuse(queue.ErrJobNotFound, "job not found"), &JobWaitCmd{ID: jobID}, exitNotFound, `job "` + jobID + `" not found (jq job list shows recent jobs)`},
		{refuse(queue.ErrInvalidArgument, `job_id "x" is not a UUID`), &JobStatusCmd{ID: "x"}, exitUsage, `job_id "x" is not a UUID`},
		{refuse(queue.ErrIllegalTransition, "job j is DONE"), &JobCancelCmd{ID: "j"}, exitError, "cannot cancel job j: job j is DONE"},
		{refuse(queue.ErrQueueNotFound, "queue not found"), &JobSubmitCmd{Queue: "emails", Payload: "{}"}, exitNotFound,
			`queue "emails" not found; create it with: jq queue create emails (jq queue list shows the queues)`},
		{refuse(queue.ErrQueueNotFound, "queue not found"), &JobSubmitCmd{Queue: "my queue", Payload: "{}"}, exitNotFound,
			`queue "my queue" not found; create it with: jq queue create 'my queue' (jq queue list shows the queues)`},
		{refuse(queue.ErrInvalidArgument, "payload too large"), &JobSubmitCmd{Queue: "emails", Payload: "{}"}, exitUsage, `cannot submit to queue "emails": payload too large`},
		{refuse(queue.ErrQueueNotFound, "queue not found"), &QueuePauseCmd{Name: "emails"}, exitNotFound, `queue "emails" not found (jq queue list shows the queues)`},
		{refuse(queue.ErrPermissionDenied, "token may not cancel"), &JobCancelCmd{ID: "j"}, exitError, "permission denied: token may not cancel"},
	} {
		re, _ := serve(t, c.api, "table")
		err := c.cmd.Run(re)
		require.Equal(t, c.code, exitCode(err), "%T: %v", c.cmd, err)
		require.Equal(t, c.line, errorLine(err, re.globals), "%T", c.cmd)
	}
}

// service finds each of the API's stubs by its interface.
func TestService(t *testing.T) {
	t.Parallel()
	re, _ := serve(t, &fakeAPI{}, "table")
	cl, err := re.Client()
	require.NoError(t, err)
	a := cl.API()
	require.Same(t, any(a.Jobs), any(service[jqv1connect.JobServiceClient](a)))
	require.Equal(t, a.Queues, service[jqv1connect.QueueServiceClient](a))
	require.Equal(t, a.Workers, service[jqv1connect.WorkerServiceClient](a))
	require.Equal(t, a.Admin, service[jqv1connect.AdminServiceClient](a))
	require.Equal(t, a.Schedules, service[jqv1connect.ScheduleServiceClient](a))
	require.Equal(t, a.Constraints, service[jqv1connect.ConstraintServiceClient](a))
	require.Panics(t, func() { service[protoreflect.Message](a) })
}
