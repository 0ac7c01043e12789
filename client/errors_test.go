package client_test

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strconv"
	"testing"

	"connectrpc.com/connect"
	"github.com/stretchr/testify/require"
	"go.uber.org/zap"

	"github.com/jq-dev/jq/api/apierr"
	jqv1 "github.com/jq-dev/jq/api/gen/jq/v1"
	"github.com/jq-dev/jq/api/gen/jq/v1/jqv1connect"
	apiserver "github.com/jq-dev/jq/api/server"
	"github.com/jq-dev/jq/client"
)

// failingJobs answers GetJob with the error of the table row whose index is the job id, wrapped
// as a handler wraps it; the row of apierr.ErrUnavailable stands for an error no row names.
type failingJobs struct {
	jqv1connect.UnimplementedJobServiceHandler
}

func (failingJobs) GetJob(_ context.Context, req *connect.Request[jqv1.GetJobRequest]) (*connect.Response[jqv1.GetJobResponse], error) {
	i, err := strconv.Atoi(req.Msg.GetJobId())
	if err != nil {
		return nil, err
	}
	r := apierr.Table[i]
	if r.Err == apierr.ErrUnavailable { //nolint:errorlint // the very sentinel
		return nil, errors.New("disk on fire\nstack trace")
	}
	return nil, fmt.Errorf("row %d: %w", i, r.Err)
}

// TestErrorTableRoundTrip sends every row of the API's error table over the wire, through the
// server's error mapping (apiserver.ErrorInterceptor) and back through the client's (CallError),
// over the Connect protocol and over gRPC: the code is the row's, the reason is the row's, the
// message is the handler's first line, and errors.Is matches the row's sentinel and no other.
func TestErrorTableRoundTrip(t *testing.T) {
	t.Parallel()
	mux := http.NewServeMux()
	mux.Handle(jqv1connect.NewJobServiceHandler(failingJobs{},
		connect.WithInterceptors(apiserver.ErrorInterceptor(zap.NewNop()))))
	srv := httptest.NewUnstartedServer(mux)
	srv.EnableHTTP2 = true
	srv.StartTLS()
	t.Cleanup(srv.Close)

	protocols := map[string][]connect.ClientOption{"connect": nil, "grpc": {connect.WithGRPC()}}
	for name, opts := range protocols {
		jobs := jqv1connect.NewJobServiceClient(srv.Client(), srv.URL, opts...)
		for i, row := range apierr.Table {
			t.Run(name+"/"+row.Reason, func(t *testing.T) {
				t.Parallel()
				_, wireErr := jobs.GetJob(t.Context(), connect.NewRequest(&jqv1.GetJobRequest{JobId: strconv.Itoa(i)}))
				require.Error(t, wireErr)
				require.Equal(t, row.Code, connect.CodeOf(wireErr))
				require.Equal(t, row.Reason, apierr.Reason(wireErr))

				err := client.CallError("get job", wireErr)
				require.ErrorIs(t, err, row.Err)
				for _, other := range apierr.Table {
					if other.Err == row.Err || (other.Err == client.ErrUnavailable && row.Code == connect.CodeUnavailable) { //nolint:errorlint // the very sentinels
						continue // every UNAVAILABLE is also ErrUnavailable
					}
					require.NotErrorIs(t, err, other.Err, "%s also matches %s", row.Reason, other.Reason)
				}
				var ce *connect.Error
				require.ErrorAs(t, err, &ce)
				if row.Err == client.ErrUnavailable { //nolint:errorlint // the very sentinel
					require.NotContains(t, err.Error(), "disk", "no internals reach the client")
				} else {
					require.Equal(t, fmt.Sprintf("get job: row %d: %s", i, row.Err), err.Error())
				}
			})
		}
	}
}

// TestCallErrorWithoutReason: an error with no reason of jq's (the transport's, a proxy's) has no
// sentinel; its code's class still holds (UNAVAILABLE is ErrUnavailable), and CallError with no op
// keeps the connect error's own text.
func TestCallErrorWithoutReason(t *testing.T) {
	t.Parallel()
	err := client.CallError("", connect.NewError(connect.CodeNotFound, errors.New("no route")))
	var e *client.Error
	require.ErrorAs(t, err, &e)
	require.NoError(t, e.Sentinel)
	require.Equal(t, "not_found: no route", err.Error())
	for _, r := range apierr.Table {
		require.NotErrorIs(t, err, r.Err)
	}

	err = client.CallError("submit", connect.NewError(connect.CodeUnavailable, errors.New("dial tcp: refused")))
	require.ErrorIs(t, err, client.ErrUnavailable)
	require.Equal(t, "submit: dial tcp: refused", err.Error())

	require.NoError(t, client.CallError("submit", nil))
	plain := errors.New("not from the server")
	require.Equal(t, plain, client.CallError("submit", plain)) //nolint:testifylint // passed through as is
	require.Equal(t, err, client.CallError("again", err), "an *Error is not wrapped twice")
}
