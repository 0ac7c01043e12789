// Package rpctrace builds the Connect interceptor that gives every jq RPC an
// OpenTelemetry span, on the server (api/server) and in the client
// (api/rpcclient), carrying the W3C trace context in the request headers.
package rpctrace

import (
	"context"
	"fmt"

	"connectrpc.com/connect"
	"connectrpc.com/otelconnect"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"

	"github.com/jq-dev/jq/api/gen/jq/v1/jqv1connect"
)

// Traced reports whether an RPC gets a span. StreamJobs lives as long as the
// worker's connection (a span of hours) and Heartbeat runs every few seconds
// per worker without any job: both are left out.
func Traced(procedure string) bool {
	return procedure != jqv1connect.WorkerServiceStreamJobsProcedure &&
		procedure != jqv1connect.WorkerServiceHeartbeatProcedure
}

// NewInterceptor is the Connect interceptor (server or client side) making the
// RPC spans of tp and carrying the trace context in the headers with prop
// (nil: W3C Trace Context). The server side continues the caller's trace
// (trust remote): that is how a submitter's trace reaches the jobs it
// submits. Metrics are left to Prometheus.
func NewInterceptor(tp trace.TracerProvider, prop propagation.TextMapPropagator) (connect.Interceptor, error) {
	if prop == nil {
		prop = propagation.TraceContext{}
	}
	ic, err := otelconnect.NewInterceptor(
		otelconnect.WithTracerProvider(tp),
		otelconnect.WithPropagator(prop),
		otelconnect.WithoutMetrics(),
		otelconnect.WithTrustRemote(),
		otelconnect.WithFilter(func(_ context.Context, s connect.Spec) bool { return Traced(s.Procedure) }),
	)
	if err != nil {
		return nil, fmt.Errorf("rpc tracing interceptor: %w", err)
	}
	return ic, nil
}
