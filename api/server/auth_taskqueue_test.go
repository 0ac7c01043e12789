package apiserver_test

import (
	"net/http"
	"testing"

	"connectrpc.com/connect"
	"github.com/stretchr/testify/require"

	tqv1 "github.com/jq-dev/jq/api/gen/taskqueue/v1"
	"github.com/jq-dev/jq/api/gen/taskqueue/v1/taskqueuev1connect"
)

// bearerTransport sends a token with every request, as a taskqueue.v1 client would.
type bearerTransport struct{ token string }

func (b bearerTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	if b.token != "" {
		r.Header.Set("Authorization", "Bearer "+b.token)
	}
	return http.DefaultTransport.RoundTrip(r)
}

// The taskqueue.v1 facade is behind the same authentication and policy as jq.v1: no credential is
// UNAUTHENTICATED, a role without the right is PERMISSION_DENIED, another producer's job is
// PERMISSION_DENIED, and none of them changes anything.
func TestTaskQueueFacadeRefusesUnauthorised(t *testing.T) {
	f := setupAuth(t)
	tq := func(caller string) taskqueuev1connect.TaskQueuePublicServiceClient {
		return taskqueuev1connect.NewTaskQueuePublicServiceClient(
			&http.Client{Transport: bearerTransport{token: f.tokens[caller]}}, "http://"+f.addr)
	}
	submit := &tqv1.SubmitJobRequest{Spec: &tqv1.JobSpec{JobType: "noop"}, ClientRequestId: "facade-auth"}
	for caller, want := range map[string]connect.Code{
		callerNone:   connect.CodeUnauthenticated,
		callerWorker: connect.CodePermissionDenied,
		callerViewer: connect.CodePermissionDenied,
	} {
		before := f.digest(t)
		_, err := tq(caller).SubmitJob(f.ctx, connect.NewRequest(submit))
		requireCode(t, want, err, "SubmitJob as %s", caller)
		_, err = tq(caller).CancelJob(f.ctx, connect.NewRequest(&tqv1.CancelJobRequest{JobId: f.job.ID}))
		requireCode(t, want, err, "CancelJob as %s", caller)
		require.Equal(t, before, f.digest(t), "%s changed the database", caller)
	}
	_, err := tq(callerNone).GetJobStatus(f.ctx, connect.NewRequest(&tqv1.GetJobStatusRequest{JobId: f.job.ID}))
	requireCode(t, connect.CodeUnauthenticated, err)
	before := f.digest(t)
	for name, call := range map[string]func() error{
		"GetJobStatus": func() error {
			_, err := tq(callerProducerB).GetJobStatus(f.ctx, connect.NewRequest(&tqv1.GetJobStatusRequest{JobId: f.job.ID}))
			return err
		},
		"CancelJob": func() error {
			_, err := tq(callerProducerB).CancelJob(f.ctx, connect.NewRequest(&tqv1.CancelJobRequest{JobId: f.job.ID}))
			return err
		},
	} {
		requireCode(t, connect.CodePermissionDenied, call(), "%s of A's job as producer B", name)
	}
	require.Equal(t, before, f.digest(t))
	// The owner is allowed.
	_, err = tq(callerProducer).GetJobStatus(f.ctx, connect.NewRequest(&tqv1.GetJobStatusRequest{JobId: f.job.ID}))
	require.NoError(t, err)
}
