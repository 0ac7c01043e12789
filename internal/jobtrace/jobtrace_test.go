package jobtrace_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"

	"github.com/jq-dev/jq/internal/jobtrace"
	"github.com/jq-dev/jq/queue"
)

const traceparent = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"

func TestInjectExtractRoundTrip(t *testing.T) {
	t.Parallel()
	require.Nil(t, jobtrace.Inject(context.Background()), "no span, nothing stored")

	tp := sdktrace.NewTracerProvider()
	t.Cleanup(func() { _ = tp.Shutdown(context.Background()) })
	ctx, span := tp.Tracer("t").Start(context.Background(), "submit")
	defer span.End()
	tc := jobtrace.Inject(ctx)
	require.Contains(t, tc, "traceparent")

	got, ok := jobtrace.Extract(context.Background(), tc)
	require.True(t, ok)
	sc := trace.SpanContextFromContext(got)
	require.True(t, sc.IsRemote())
	require.Equal(t, span.SpanContext().TraceID(), sc.TraceID())
	require.Equal(t, span.SpanContext().SpanID(), sc.SpanID())
	require.Equal(t, span.SpanContext().TraceID().String(), jobtrace.TraceID(tc))
}

func TestTraceIDOfStoredContexts(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		tc   map[string]string
		want string
	}{
		{map[string]string{"traceparent": traceparent}, "4bf92f3577b34da6a3ce929d0e0e4736"},
		{map[string]string{"traceparent": "garbage"}, ""},
		{map[string]string{"tracestate": "a=b"}, ""},
		{map[string]string{}, ""},
		{nil, ""},
	} {
		require.Equal(t, c.want, jobtrace.TraceID(c.tc), "%v", c.tc)
		_, ok := jobtrace.Extract(context.Background(), c.tc)
		require.Equal(t, c.want != "", ok)
	}
}

func TestLogField(t *testing.T) {
	t.Parallel()
	enc := zapcore.NewMapObjectEncoder()
	jobtrace.JobLogField(&queue.Job{TraceContext: map[string]string{"traceparent": traceparent}}).AddTo(enc)
	require.Equal(t, "4bf92f3577b34da6a3ce929d0e0e4736", enc.Fields["trace_id"])

	enc = zapcore.NewMapObjectEncoder()
	jobtrace.JobLogField(&queue.Job{}).AddTo(enc)
	jobtrace.JobLogField(nil).AddTo(enc)
	require.Empty(t, enc.Fields)
	require.Equal(t, zap.Skip(), jobtrace.LogField(nil))
}

func TestJobAttrsCarryNoPayload(t *testing.T) {
	t.Parallel()
	j := &queue.Job{ID: "id", Queue: "q", Type: "t", Payload: []byte("secret")}
	attrs := jobtrace.JobAttrs(j, 2, "w")
	keys := map[string]string{}
	for _, a := range attrs {
		keys[string(a.Key)] = a.Value.String()
	}
	require.Equal(t, map[string]string{
		"jq.job_id": "id", "jq.queue": "q", "jq.job_type": "t", "jq.attempt": "2", "jq.worker_id": "w",
	}, keys)
	require.Len(t, jobtrace.JobAttrs(j, 1, ""), 4, "no worker id attribute without a worker")
}
