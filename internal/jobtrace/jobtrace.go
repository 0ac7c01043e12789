// Package jobtrace carries a job's trace across processes: the submit span's
// W3C trace context is stored with the job (jobs.trace_context), and the
// scheduler's assignment span and every attempt's execution span take it as
// their remote parent, so a job's whole life — retries included — is one
// trace. The stored format is W3C Trace Context (traceparent, tracestate),
// whatever propagator the RPC headers use.
package jobtrace

import (
	"context"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"
	"go.uber.org/zap"

	"github.com/jq-dev/jq/queue"
)

// Span attribute keys. Payloads, results and labels are never recorded.
const (
	AttrJobID    = attribute.Key("jq.job_id")
	AttrQueue    = attribute.Key("jq.queue")
	AttrJobType  = attribute.Key("jq.job_type")
	AttrAttempt  = attribute.Key("jq.attempt")
	AttrWorkerID = attribute.Key("jq.worker_id")
	AttrOutcome  = attribute.Key("jq.outcome")
	AttrReason   = attribute.Key("jq.failure_reason")
	AttrExisting = attribute.Key("jq.existing")
	AttrJobCount = attribute.Key("jq.job_count")
)

// Span names.
const (
	SpanSubmit      = "jq.job.submit"  // server: one SubmitJob (child of the RPC span)
	SpanSubmitBatch = "jq.jobs.submit" // server: one SubmitJobs batch
	SpanAssign      = "jq.job.assign"  // server: the scheduler hands an attempt to a worker
	SpanExecute     = "jq.job.execute" // worker: one attempt's handler
)

var w3c = propagation.TraceContext{}

// Inject returns the W3C trace context of ctx's span, or nil when ctx has no
// valid span context.
func Inject(ctx context.Context) map[string]string {
	if !trace.SpanContextFromContext(ctx).IsValid() {
		return nil
	}
	c := propagation.MapCarrier{}
	w3c.Inject(ctx, c)
	if len(c) == 0 {
		return nil
	}
	return c
}

// Extract returns ctx with the job's stored trace context as the remote
// parent, and whether there was a valid one.
func Extract(ctx context.Context, tc map[string]string) (context.Context, bool) {
	if len(tc) == 0 {
		return ctx, false
	}
	out := w3c.Extract(ctx, propagation.MapCarrier(tc))
	sc := trace.SpanContextFromContext(out)
	return out, sc.IsValid() && sc.IsRemote()
}

// TraceID is the trace id of a stored trace context ("" when there is none):
// the trace_id field of a job's log lines (FR-041).
func TraceID(tc map[string]string) string {
	if _, ok := tc["traceparent"]; !ok {
		return ""
	}
	ctx, ok := Extract(context.Background(), tc)
	if !ok {
		return ""
	}
	return trace.SpanContextFromContext(ctx).TraceID().String()
}

// LogField is the trace_id field of a job's log lines, or zap.Skip() when the
// job has no trace context.
func LogField(tc map[string]string) zap.Field {
	if id := TraceID(tc); id != "" {
		return zap.String("trace_id", id)
	}
	return zap.Skip()
}

// JobLogField is LogField of j's trace context (j may be nil).
func JobLogField(j *queue.Job) zap.Field {
	if j == nil {
		return zap.Skip()
	}
	return LogField(j.TraceContext)
}

// JobAttrs are the attributes of a span about one attempt of j.
func JobAttrs(j *queue.Job, attempt int, workerID string) []attribute.KeyValue {
	a := []attribute.KeyValue{
		AttrJobID.String(j.ID), AttrQueue.String(j.Queue), AttrJobType.String(j.Type), AttrAttempt.Int(attempt),
	}
	if workerID != "" {
		a = append(a, AttrWorkerID.String(workerID))
	}
	return a
}

// Fail marks span failed with err recorded (err may be nil: reason alone).
func Fail(span trace.Span, reason string, err error) {
	if err != nil {
		span.RecordError(err)
	}
	span.SetStatus(codes.Error, reason)
}
