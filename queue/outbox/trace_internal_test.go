package outbox

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"

	"github.com/jq-dev/jq/api"
	"github.com/jq-dev/jq/internal/jobtrace"
	"github.com/jq-dev/jq/queue"
	"github.com/jq-dev/jq/store"
)

// The trace context the API stores with a job (jobtrace.Inject of the submit
// span) comes out as the W3C headers of the job's events, only with tracing on.
func TestEncodeCarriesTheStoredTraceContext(t *testing.T) {
	t.Parallel()
	tp := sdktrace.NewTracerProvider()
	t.Cleanup(func() { _ = tp.Shutdown(context.Background()) })
	ctx, span := tp.Tracer("t").Start(context.Background(), "submit")
	span.End()
	stored := jobtrace.Inject(ctx)
	require.NotEmpty(t, stored)

	e := &store.OutboxEvent{ID: 1, Event: queue.Event{JobID: "job-1"}, TraceContext: stored}
	m, err := encode(api.MarshalEvent, e, true)
	require.NoError(t, err)
	headers := map[string]string{}
	for _, h := range m.Headers {
		headers[h.Key] = string(h.Value)
	}
	require.Equal(t, stored, headers)
	require.Equal(t, span.SpanContext().TraceID().String(), jobtrace.TraceID(headers), "a consumer can continue the trace")

	m, err = encode(api.MarshalEvent, e, false)
	require.NoError(t, err)
	require.Empty(t, m.Headers, "tracing off: no headers")
}
