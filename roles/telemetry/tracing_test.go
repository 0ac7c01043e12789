package telemetry_test

import (
	"context"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	coltracepb "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	"google.golang.org/grpc"
	"google.golang.org/protobuf/proto"

	"github.com/jq-dev/jq/config"
	"github.com/jq-dev/jq/roles/telemetry"
)

func tracingConfig(protocol, endpoint string) config.Tracing {
	return config.Tracing{Enabled: true, Protocol: protocol, Endpoint: endpoint, SampleRatio: 1, Insecure: true}
}

func TestTracingDisabledIsNoop(t *testing.T) {
	t.Parallel()
	cfg := config.Default().Tracing
	require.False(t, cfg.Enabled, "tracing is off by default")
	cfg.Protocol = "carrier-pigeon" // not even looked at when disabled
	tr, err := telemetry.NewTracing(context.Background(), telemetry.TracingOptions{Config: cfg, Service: "jq-server"})
	require.NoError(t, err)
	require.False(t, tr.Enabled)
	require.Nil(t, tr.Tracer(), "components skip span work when tracing is off")
	require.Nil(t, tr.EnabledProvider())
	_, span := tr.Provider.Tracer("t").Start(context.Background(), "s")
	require.False(t, span.IsRecording(), "the disabled provider is a no-op")
	span.End()
	require.NotNil(t, tr.Propagator)
	require.NoError(t, tr.ShutdownWithTimeout(context.Background()))
}

func TestTracingRejectsBadConfig(t *testing.T) {
	t.Parallel()
	for name, cfg := range map[string]config.Tracing{
		"protocol":     tracingConfig("udp", "localhost:4317"),
		"sample_ratio": {Enabled: true, Protocol: "grpc", SampleRatio: 1.5},
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			_, err := telemetry.NewTracing(context.Background(), telemetry.TracingOptions{Config: cfg, Service: "jq-server"})
			require.ErrorContains(t, err, "tracing."+name)
		})
	}
}

func TestTracingBuildsBothExportersWithoutContactingACollector(t *testing.T) {
	t.Parallel()
	// Port 9 (discard) on loopback: nothing listens; construction must not care.
	for _, cfg := range []config.Tracing{
		tracingConfig("grpc", "127.0.0.1:9"),
		tracingConfig("http", "127.0.0.1:9"),
		tracingConfig("http", "http://127.0.0.1:9"),
		tracingConfig("grpc", ""),
	} {
		tr, err := telemetry.NewTracing(context.Background(), telemetry.TracingOptions{Config: cfg, Service: "jq-worker"})
		require.NoError(t, err, "%+v", cfg)
		require.True(t, tr.Enabled)
		require.NotNil(t, tr.Tracer())
		// Nothing was recorded, so shutting down has nothing to send.
		require.NoError(t, tr.ShutdownWithTimeout(context.Background()))
	}
}

func TestTracingResourceAndSampler(t *testing.T) {
	t.Parallel()
	exp := tracetest.NewInMemoryExporter()
	cfg := tracingConfig("grpc", "")
	tr, err := telemetry.NewTracing(context.Background(), telemetry.TracingOptions{
		Config: cfg, Service: "jq-worker", Version: "v9.9.9", Exporter: exp,
	})
	require.NoError(t, err)
	_, span := tr.Tracer().Start(context.Background(), "work")
	span.End()
	spans := exp.GetSpans() // the test exporter is synchronous (and Shutdown empties it)
	require.NoError(t, tr.ShutdownWithTimeout(context.Background()))
	require.Len(t, spans, 1)
	attrs := map[string]string{}
	for _, kv := range spans[0].Resource.Attributes() {
		attrs[string(kv.Key)] = kv.Value.String()
	}
	require.Equal(t, "jq-worker", attrs["service.name"])
	require.Equal(t, "v9.9.9", attrs["service.version"])
	require.Equal(t, telemetry.TracerName, spans[0].InstrumentationScope.Name)

	// Ratio 0: no new root trace is sampled.
	exp0 := tracetest.NewInMemoryExporter()
	cfg.SampleRatio = 0
	tr0, err := telemetry.NewTracing(context.Background(), telemetry.TracingOptions{Config: cfg, Service: "jq-worker", Exporter: exp0})
	require.NoError(t, err)
	_, span = tr0.Tracer().Start(context.Background(), "work")
	require.False(t, span.IsRecording())
	span.End()
	require.Empty(t, exp0.GetSpans())
	require.NoError(t, tr0.ShutdownWithTimeout(context.Background()))
}

// exportedSpanNames decodes an OTLP export request and lists its span names
// and the service.name of their resources.
func exportedSpanNames(t *testing.T, req *coltracepb.ExportTraceServiceRequest) (names, services []string) {
	t.Helper()
	for _, rs := range req.GetResourceSpans() {
		for _, kv := range rs.GetResource().GetAttributes() {
			if kv.GetKey() == "service.name" {
				services = append(services, kv.GetValue().GetStringValue())
			}
		}
		for _, ss := range rs.GetScopeSpans() {
			for _, s := range ss.GetSpans() {
				names = append(names, s.GetName())
			}
		}
	}
	return names, services
}

func TestTracingExportsOverOTLPHTTP(t *testing.T) {
	t.Parallel()
	got := make(chan *coltracepb.ExportTraceServiceRequest, 4)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodPost || r.URL.Path != "/v1/traces" {
			http.NotFound(w, r)
			return
		}
		body, err := io.ReadAll(r.Body)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		req := &coltracepb.ExportTraceServiceRequest{}
		if err := proto.Unmarshal(body, req); err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		got <- req
		w.Header().Set("Content-Type", "application/x-protobuf")
		out, _ := proto.Marshal(&coltracepb.ExportTraceServiceResponse{})
		_, _ = w.Write(out)
	}))
	t.Cleanup(srv.Close)

	tr, err := telemetry.NewTracing(context.Background(), telemetry.TracingOptions{
		Config: tracingConfig("http", srv.Listener.Addr().String()), Service: "jq-server",
	})
	require.NoError(t, err)
	_, span := tr.Tracer().Start(context.Background(), "over-http")
	span.End()
	// Shutdown flushes the batch processor: the export happens before it returns.
	require.NoError(t, tr.ShutdownWithTimeout(context.Background()))
	select {
	case req := <-got:
		names, services := exportedSpanNames(t, req)
		require.Equal(t, []string{"over-http"}, names)
		require.Equal(t, []string{"jq-server"}, services)
	case <-time.After(10 * time.Second):
		t.Fatal("no OTLP/HTTP export received")
	}
}

// traceCollector is an OTLP/gRPC trace receiver.
type traceCollector struct {
	coltracepb.UnimplementedTraceServiceServer
	mu   sync.Mutex
	reqs []*coltracepb.ExportTraceServiceRequest
}

func (c *traceCollector) Export(_ context.Context, req *coltracepb.ExportTraceServiceRequest) (*coltracepb.ExportTraceServiceResponse, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.reqs = append(c.reqs, req)
	return &coltracepb.ExportTraceServiceResponse{}, nil
}

func TestTracingExportsOverOTLPGRPC(t *testing.T) {
	t.Parallel()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	col := &traceCollector{}
	gs := grpc.NewServer()
	coltracepb.RegisterTraceServiceServer(gs, col)
	served := make(chan struct{})
	go func() { _ = gs.Serve(ln); close(served) }()
	t.Cleanup(func() { gs.Stop(); <-served })

	tr, err := telemetry.NewTracing(context.Background(), telemetry.TracingOptions{
		Config: tracingConfig("grpc", ln.Addr().String()), Service: "jq-worker",
	})
	require.NoError(t, err)
	_, span := tr.Tracer().Start(context.Background(), "over-grpc")
	span.End()
	require.NoError(t, tr.ShutdownWithTimeout(context.Background()))
	col.mu.Lock()
	defer col.mu.Unlock()
	require.Len(t, col.reqs, 1)
	names, services := exportedSpanNames(t, col.reqs[0])
	require.Equal(t, []string{"over-grpc"}, names)
	require.Equal(t, []string{"jq-worker"}, services)
}
