package telemetry

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracegrpc"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	semconv "go.opentelemetry.io/otel/semconv/v1.43.0"
	"go.opentelemetry.io/otel/trace"
	"go.opentelemetry.io/otel/trace/noop"

	"github.com/jq-dev/jq/config"
)

// TracerName is the instrumentation scope of jq's own spans.
const TracerName = "github.com/jq-dev/jq"

// TracingOptions select what NewTracing builds.
type TracingOptions struct {
	Config  config.Tracing
	Service string // service.name: jq-server, jq-worker
	Version string // service.version
	// Exporter replaces the OTLP exporter (tests: tracetest.InMemoryExporter).
	// Spans then go through a synchronous processor, so they are visible as
	// soon as they end.
	Exporter sdktrace.SpanExporter
}

// Tracing is a process component's tracer provider and the propagator that
// goes with it, built once by roles and passed down; nothing in jq sets the
// OpenTelemetry globals. When tracing is disabled, Provider is a no-op and
// Enabled is false.
type Tracing struct {
	Enabled    bool
	Provider   trace.TracerProvider
	Propagator propagation.TextMapPropagator
	shutdown   func(context.Context) error
}

// DisabledTracing is the no-op tracing (tracing.enabled false).
func DisabledTracing() *Tracing {
	return &Tracing{
		Provider:   noop.NewTracerProvider(),
		Propagator: propagation.TraceContext{},
		shutdown:   func(context.Context) error { return nil },
	}
}

// NewTracing builds the tracer provider of cfg: a parent-based ratio sampler,
// a batch span processor and an OTLP exporter over gRPC or HTTP, with
// service.name set to opts.Service. It contacts nothing: the exporter
// connects on its first export, so a missing collector costs dropped spans,
// never a failed start. Disabled tracing returns DisabledTracing().
func NewTracing(ctx context.Context, opts TracingOptions) (*Tracing, error) {
	cfg := opts.Config
	if !cfg.Enabled {
		return DisabledTracing(), nil
	}
	if cfg.SampleRatio < 0 || cfg.SampleRatio > 1 {
		return nil, fmt.Errorf("tracing.sample_ratio: must be between 0 and 1, got %v", cfg.SampleRatio)
	}
	exp := opts.Exporter
	if exp == nil {
		var err error
		if exp, err = newExporter(ctx, cfg); err != nil {
			return nil, err
		}
	}
	res, err := resource.New(ctx,
		resource.WithFromEnv(), // OTEL_RESOURCE_ATTRIBUTES; service.name below wins
		resource.WithTelemetrySDK(),
		resource.WithSchemaURL(semconv.SchemaURL),
		resource.WithAttributes(semconv.ServiceName(opts.Service), semconv.ServiceVersion(opts.Version)),
	)
	if err != nil && res == nil {
		_ = exp.Shutdown(ctx)
		return nil, fmt.Errorf("tracing: resource: %w", err)
	}
	var proc sdktrace.SpanProcessor
	if opts.Exporter != nil {
		proc = sdktrace.NewSimpleSpanProcessor(exp)
	} else {
		proc = sdktrace.NewBatchSpanProcessor(exp)
	}
	tp := sdktrace.NewTracerProvider(
		sdktrace.WithResource(res),
		sdktrace.WithSampler(sdktrace.ParentBased(sdktrace.TraceIDRatioBased(cfg.SampleRatio))),
		sdktrace.WithSpanProcessor(proc),
	)
	return &Tracing{
		Enabled:    true,
		Provider:   tp,
		Propagator: propagation.TraceContext{},
		shutdown:   tp.Shutdown,
	}, nil
}

// newExporter is the OTLP span exporter of cfg. An endpoint with a scheme
// (http://host:4318) is a URL; a bare host:port uses Insecure for the
// transport security. An empty endpoint keeps the exporter's default
// (OTEL_EXPORTER_OTLP_ENDPOINT, else localhost:4317 / localhost:4318).
func newExporter(ctx context.Context, cfg config.Tracing) (sdktrace.SpanExporter, error) {
	isURL := strings.Contains(cfg.Endpoint, "://")
	switch cfg.Protocol {
	case "grpc":
		var o []otlptracegrpc.Option
		switch {
		case isURL:
			o = append(o, otlptracegrpc.WithEndpointURL(cfg.Endpoint))
		case cfg.Endpoint != "":
			o = append(o, otlptracegrpc.WithEndpoint(cfg.Endpoint))
		}
		if cfg.Insecure && !isURL {
			o = append(o, otlptracegrpc.WithInsecure())
		}
		exp, err := otlptracegrpc.New(ctx, o...)
		if err != nil {
			return nil, fmt.Errorf("tracing: otlp grpc exporter: %w", err)
		}
		return exp, nil
	case "http":
		var o []otlptracehttp.Option
		switch {
		case isURL:
			o = append(o, otlptracehttp.WithEndpointURL(cfg.Endpoint))
		case cfg.Endpoint != "":
			o = append(o, otlptracehttp.WithEndpoint(cfg.Endpoint))
		}
		if cfg.Insecure && !isURL {
			o = append(o, otlptracehttp.WithInsecure())
		}
		exp, err := otlptracehttp.New(ctx, o...)
		if err != nil {
			return nil, fmt.Errorf("tracing: otlp http exporter: %w", err)
		}
		return exp, nil
	}
	return nil, fmt.Errorf("tracing.protocol: unknown %q (want grpc or http)", cfg.Protocol)
}

// Tracer is jq's tracer of this provider, nil when tracing is disabled:
// components then skip their span work altogether.
func (t *Tracing) Tracer() trace.Tracer {
	if !t.Enabled {
		return nil
	}
	return t.Provider.Tracer(TracerName)
}

// EnabledProvider is Provider, nil when tracing is disabled (for options
// where nil means no RPC spans).
func (t *Tracing) EnabledProvider() trace.TracerProvider {
	if !t.Enabled {
		return nil
	}
	return t.Provider
}

// Shutdown flushes the spans still buffered and stops the exporter; call it
// once, on exit, with a deadline.
func (t *Tracing) Shutdown(ctx context.Context) error {
	if err := t.shutdown(ctx); err != nil && !errors.Is(err, context.Canceled) {
		return fmt.Errorf("tracing shutdown: %w", err)
	}
	return nil
}

// ShutdownTimeout bounds the final flush of spans on exit.
const ShutdownTimeout = 5 * time.Second

// ShutdownWithTimeout is Shutdown bounded by ShutdownTimeout, detached from
// ctx's cancellation (the exit has usually cancelled it already).
func (t *Tracing) ShutdownWithTimeout(ctx context.Context) error {
	sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), ShutdownTimeout)
	defer cancel()
	return t.Shutdown(sctx)
}
