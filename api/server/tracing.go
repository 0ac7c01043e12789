package apiserver

import (
	"context"

	"connectrpc.com/connect"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"
	"go.uber.org/zap"

	jqv1 "github.com/jq-dev/jq/api/gen/jq/v1"
	"github.com/jq-dev/jq/internal/jobtrace"
	"github.com/jq-dev/jq/internal/rpctrace"
	"github.com/jq-dev/jq/store"
)

// Tracing turns on OpenTelemetry spans in the API: one server span per RPC
// (the caller's W3C trace context in the headers is continued), and a submit
// span whose context is stored with each job it creates. A nil Provider
// means no tracing.
type Tracing struct {
	Provider trace.TracerProvider
	// Propagator reads the trace context of the RPC headers (nil: W3C Trace
	// Context).
	Propagator propagation.TextMapPropagator
}

// tracerName is the instrumentation scope of the API's own spans.
const tracerName = "github.com/jq-dev/jq/api/server"

// tracingHandlerOptions add the RPC span interceptor, outermost, so that
// spans see the status codes callers see.
func tracingHandlerOptions(t Tracing, log *zap.Logger) []connect.HandlerOption {
	if t.Provider == nil {
		return nil
	}
	ic, err := rpctrace.NewInterceptor(t.Provider, t.Propagator)
	if err != nil { // only invalid options fail, and ours are fixed
		log.Error("tracing interceptor unavailable; RPCs are not traced", zap.Error(err))
		return nil
	}
	return []connect.HandlerOption{connect.WithInterceptors(ic)}
}

// submitTracer starts the submit spans; without tracing it does nothing.
type submitTracer struct {
	tracer trace.Tracer // nil: tracing off
}

func newSubmitTracer(t Tracing) submitTracer {
	if t.Provider == nil {
		return submitTracer{}
	}
	return submitTracer{tracer: t.Provider.Tracer(tracerName)}
}

// startSubmit begins the span of one SubmitJob (a no-op span without
// tracing).
func (s submitTracer) startSubmit(ctx context.Context, spec *jqv1.JobSpec) (context.Context, trace.Span) {
	if s.tracer == nil {
		return ctx, trace.SpanFromContext(context.Background()) // non-recording
	}
	return s.tracer.Start(ctx, jobtrace.SpanSubmit, trace.WithAttributes(
		jobtrace.AttrQueue.String(spec.GetQueue()), jobtrace.AttrJobType.String(spec.GetType())))
}

// startBatch begins the span of one SubmitJobs: its jobs share it as their
// parent.
func (s submitTracer) startBatch(ctx context.Context, n int) (context.Context, trace.Span) {
	if s.tracer == nil {
		return ctx, trace.SpanFromContext(context.Background())
	}
	return s.tracer.Start(ctx, jobtrace.SpanSubmitBatch, trace.WithAttributes(jobtrace.AttrJobCount.Int(n)))
}

// stamp stores the submit span's trace context with a job whose submitter
// did not set one explicitly (JobSpec.trace_context wins). The context comes
// partly from the caller's headers (tracestate, baggage): when it exceeds the
// job's trace context limits only traceparent is kept, so a large header
// never fails the submit.
func (s submitTracer) stamp(ctx context.Context, p *store.JobInsertParams) {
	if s.tracer == nil || len(p.TraceContext) > 0 {
		return
	}
	tc := jobtrace.Inject(ctx)
	if store.ValidateTraceContext(tc) != nil {
		tc = map[string]string{"traceparent": tc["traceparent"]}
	}
	p.TraceContext = tc
}

// submitted names the job on its submit span.
func submitted(span trace.Span, r store.JobInsertResult) {
	if r.Job != nil && span.IsRecording() {
		span.SetAttributes(jobtrace.AttrJobID.String(r.Job.ID), jobtrace.AttrExisting.Bool(r.Existing))
	}
}

// endSubmit records the outcome of a submit span.
func endSubmit(span trace.Span, err error) {
	if err != nil {
		jobtrace.Fail(span, "submit failed", err)
	}
	span.End()
}
