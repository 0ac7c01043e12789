package engine

import (
	"context"
	"time"

	"go.opentelemetry.io/otel/trace"

	"github.com/jq-dev/jq/internal/jobtrace"
	"github.com/jq-dev/jq/queue"
)

// traceAssigned records one assignment span per job just assigned to a
// worker, as a child of the trace context stored with the job (the submit
// span), so the assignment shows in the job's own trace. One span per job
// rather than one per claim with links: a claim's jobs belong to different
// traces, and a batch span would live in a trace of its own that nobody
// looks at. The span starts when the claim started (Redis claim plus the
// Postgres compare-and-set) and ends now. A job without a stored trace
// context gets no span: a root trace per dispatch would be noise.
func (e *Engine) traceAssigned(ctx context.Context, start time.Time, workerID string, jobs []*queue.Job) {
	if e.opts.Tracer == nil || len(jobs) == 0 {
		return
	}
	end := time.Now()
	for _, j := range jobs {
		jctx, ok := jobtrace.Extract(context.WithoutCancel(ctx), j.TraceContext)
		if !ok {
			continue
		}
		_, span := e.opts.Tracer.Start(jctx, jobtrace.SpanAssign,
			trace.WithTimestamp(start),
			trace.WithSpanKind(trace.SpanKindProducer), // hands the job to the worker's consumer span
			trace.WithAttributes(jobtrace.JobAttrs(j, j.Attempt, workerID)...))
		span.End(trace.WithTimestamp(end))
	}
}
