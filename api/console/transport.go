package console

import (
	"bytes"
	"context"
	"crypto/tls"
	"io"
	"net/http"
	"strconv"

	"github.com/jq-dev/jq/api/gen/jq/v1/jqv1connect"
)

// apiBase is the URL the in-process clients address; the transport never dials it.
const apiBase = "http://jq-api.invalid"

// credential is who a call is made for: the browser's token or TLS client certificate, and its
// address (the API logs refusals by it).
type credential struct {
	token      string
	tls        *tls.ConnectionState
	remoteAddr string
}

type credentialKey struct{}

func withCredential(ctx context.Context, c credential) context.Context {
	return context.WithValue(ctx, credentialKey{}, c)
}

// inProcess is an http.RoundTripper that serves each request with the API's handler in this
// process, with the caller's credential, as if the browser had called the API itself. Unary
// calls only: the response is buffered.
type inProcess struct{ api http.Handler }

func (t inProcess) RoundTrip(req *http.Request) (*http.Response, error) {
	c, _ := req.Context().Value(credentialKey{}).(credential)
	r := req.Clone(req.Context())
	r.RequestURI = r.URL.RequestURI()
	r.RemoteAddr = c.remoteAddr
	r.TLS = c.tls
	r.Header.Del("Authorization")
	if c.token != "" {
		r.Header.Set("Authorization", "Bearer "+c.token)
	}
	if r.Body == nil {
		r.Body = http.NoBody
	}
	w := &bufferedResponse{header: http.Header{}}
	t.api.ServeHTTP(w, r)
	if w.code == 0 {
		w.code = http.StatusOK
	}
	return &http.Response{
		Status: strconv.Itoa(w.code) + " " + http.StatusText(w.code), StatusCode: w.code,
		Proto: "HTTP/1.1", ProtoMajor: 1, ProtoMinor: 1,
		Header: w.header, Body: io.NopCloser(&w.body), ContentLength: int64(w.body.Len()), Request: req,
	}, nil
}

type bufferedResponse struct {
	header http.Header
	code   int
	body   bytes.Buffer
}

func (w *bufferedResponse) Header() http.Header { return w.header }
func (w *bufferedResponse) WriteHeader(code int) {
	if w.code == 0 {
		w.code = code
	}
}

func (w *bufferedResponse) Write(p []byte) (int, error) {
	if w.code == 0 {
		w.code = http.StatusOK
	}
	return w.body.Write(p)
}

// clients are the jq.v1 clients the console calls the API with.
type clients struct {
	jobs    jqv1connect.JobServiceClient
	queues  jqv1connect.QueueServiceClient
	workers jqv1connect.WorkerServiceClient
	admin   jqv1connect.AdminServiceClient
	// constraints is flow control (docs/flow-control.md).
	constraints jqv1connect.ConstraintServiceClient
	// schedules are periodic jobs (docs/schedules.md).
	schedules jqv1connect.ScheduleServiceClient
}

func newClients(api http.Handler) clients {
	hc := &http.Client{Transport: inProcess{api: api}}
	return clients{
		jobs:    jqv1connect.NewJobServiceClient(hc, apiBase),
		queues:  jqv1connect.NewQueueServiceClient(hc, apiBase),
		workers: jqv1connect.NewWorkerServiceClient(hc, apiBase),
		admin:   jqv1connect.NewAdminServiceClient(hc, apiBase),

		constraints: jqv1connect.NewConstraintServiceClient(hc, apiBase),
		schedules:   jqv1connect.NewScheduleServiceClient(hc, apiBase),
	}
}
