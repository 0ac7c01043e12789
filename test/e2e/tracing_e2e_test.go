package e2e

// Tracing through the real binary: a server and a worker process export over
// OTLP/HTTP to a receiver in the test, and a job's assignment (jq-server) and
// execution (jq-worker) spans arrive in the trace its submitter chose.

import (
	"encoding/hex"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	coltracepb "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	commonpb "go.opentelemetry.io/proto/otlp/common/v1"
	"google.golang.org/protobuf/proto"

	jqv1 "github.com/jq-dev/jq/api/gen/jq/v1"
	"github.com/jq-dev/jq/internal/testenv"
	"github.com/jq-dev/jq/test/internal/jqbin"
)

// exportedSpan is what the test's OTLP receiver keeps of a span.
type exportedSpan struct {
	service, name, traceID, parentID string
	attrs                            map[string]string
}

// otlpReceiver is an OTLP/HTTP trace endpoint (POST /v1/traces, protobuf).
type otlpReceiver struct {
	mu    sync.Mutex
	spans []exportedSpan
}

func (r *otlpReceiver) ServeHTTP(w http.ResponseWriter, req *http.Request) {
	if req.Method != http.MethodPost || req.URL.Path != "/v1/traces" {
		http.NotFound(w, req)
		return
	}
	body, err := io.ReadAll(req.Body)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	var msg coltracepb.ExportTraceServiceRequest
	if err := proto.Unmarshal(body, &msg); err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	r.mu.Lock()
	for _, rs := range msg.GetResourceSpans() {
		service := ""
		for _, kv := range rs.GetResource().GetAttributes() {
			if kv.GetKey() == "service.name" {
				service = kv.GetValue().GetStringValue()
			}
		}
		for _, ss := range rs.GetScopeSpans() {
			for _, s := range ss.GetSpans() {
				es := exportedSpan{
					service: service, name: s.GetName(), traceID: hex.EncodeToString(s.GetTraceId()),
					parentID: hex.EncodeToString(s.GetParentSpanId()), attrs: map[string]string{},
				}
				for _, kv := range s.GetAttributes() {
					v := kv.GetValue()
					es.attrs[kv.GetKey()] = v.GetStringValue()
					if _, isInt := v.GetValue().(*commonpb.AnyValue_IntValue); isInt {
						es.attrs[kv.GetKey()] = strconv.FormatInt(v.GetIntValue(), 10)
					}
				}
				r.spans = append(r.spans, es)
			}
		}
	}
	r.mu.Unlock()
	out, _ := proto.Marshal(&coltracepb.ExportTraceServiceResponse{})
	w.Header().Set("Content-Type", "application/x-protobuf")
	_, _ = w.Write(out)
}

// newOTLPCollector serves recv until the test ends and returns its address.
func newOTLPCollector(t *testing.T, recv *otlpReceiver) string {
	t.Helper()
	collector := httptest.NewServer(recv)
	t.Cleanup(collector.Close)
	return collector.Listener.Addr().String()
}

func (r *otlpReceiver) find(name, jobID string) []exportedSpan {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []exportedSpan
	for _, s := range r.spans {
		if s.name == name && s.attrs["jq.job_id"] == jobID {
			out = append(out, s)
		}
	}
	return out
}

func TestTracingExportsJobTraceE2E(t *testing.T) {
	t.Parallel()
	recv := &otlpReceiver{}
	tracing := []string{
		"JQ_TRACING_ENABLED=true", "JQ_TRACING_PROTOCOL=http", "JQ_TRACING_ENDPOINT=" + newOTLPCollector(t, recv),
	}

	c := newCluster(t)
	c.startServer(tracing...)
	env := append([]string{
		"JQ_WORKER_HEALTH_PORT=" + strconv.Itoa(jqbin.FreePort(t)),
		"JQ_WORKER_METRICS_PORT=" + strconv.Itoa(jqbin.FreePort(t)),
	}, tracing...)
	jqbin.Start(t, env, "--role=worker", "--server-addr", c.servers[0].Addr(), "--worker-id", "w-traced",
		"--concurrency", "2", "--queues", "default")

	const traceID, parentID = "4bf92f3577b34da6a3ce929d0e0e4736", "00f067aa0ba902b7"
	ctx := c.ctx()
	id := c.submit(ctx, &jqv1.JobSpec{Queue: "default", Type: "noop", TraceContext: map[string]string{
		"traceparent": "00-" + traceID + "-" + parentID + "-01",
	}})
	c.waitState(ctx, id, jqv1.JobState_JOB_STATE_DONE)

	// The batch span processors export within their schedule delay (5 s).
	testenv.Eventually(t, 30*time.Second, func() error {
		for _, want := range []struct{ name, service string }{
			{"jq.job.submit", "jq-server"}, {"jq.job.assign", "jq-server"}, {"jq.job.execute", "jq-worker"},
		} {
			spans := recv.find(want.name, id)
			if len(spans) != 1 {
				return fmt.Errorf("%d %s spans of job %s exported", len(spans), want.name, id)
			}
			if spans[0].service != want.service {
				return fmt.Errorf("%s exported by %q, want %q", want.name, spans[0].service, want.service)
			}
		}
		return nil
	})
	for _, name := range []string{"jq.job.assign", "jq.job.execute"} {
		s := recv.find(name, id)[0]
		require.Equal(t, traceID, s.traceID, "%s continues the job's stored trace", name)
		require.Equal(t, parentID, s.parentID, name)
		require.Equal(t, "1", s.attrs["jq.attempt"], name)
		require.Equal(t, "w-traced", s.attrs["jq.worker_id"], name)
		require.Equal(t, "default", s.attrs["jq.queue"], name)
		require.Equal(t, "noop", s.attrs["jq.job_type"], name)
	}
	require.NotEqual(t, traceID, recv.find("jq.job.submit", id)[0].traceID,
		"the submit RPC is traced on its own; the job follows the context its submitter set")
}
