package executor

import (
	"context"

	"go.opentelemetry.io/otel/trace"

	"github.com/jq-dev/jq/internal/jobtrace"
)

// startSpan begins the execution span of one attempt. Its remote parent is
// the trace context stored with the job (the submit span), so every
// attempt's execution — retries included — lands in the submitter's trace;
// a job without one starts a trace of its own. The returned context carries
// the span, so a handler's own spans nest under it. Without a tracer it
// returns ctx and a non-recording span.
func (e *Executor) startSpan(ctx context.Context, t *task) (context.Context, trace.Span) {
	if e.opts.Tracer == nil {
		return ctx, trace.SpanFromContext(context.Background())
	}
	pctx, _ := jobtrace.Extract(ctx, t.job.TraceContext)
	return e.opts.Tracer.Start(pctx, jobtrace.SpanExecute,
		trace.WithSpanKind(trace.SpanKindConsumer),
		trace.WithAttributes(jobtrace.JobAttrs(t.job, t.lease.Attempt, e.opts.WorkerID)...))
}

// endSpan records the attempt's outcome on its span and ends it.
func endSpan(span trace.Span, done JobDone) {
	if !span.IsRecording() {
		span.End()
		return
	}
	span.SetAttributes(jobtrace.AttrOutcome.String(string(done.Outcome)))
	if done.Outcome == OutcomeFailed {
		// The reason, not the handler's error text: that is job data (it may
		// quote the payload), kept by the report only.
		span.SetAttributes(jobtrace.AttrReason.String(done.Reason))
		jobtrace.Fail(span, done.Reason, nil)
	}
	span.End()
}
