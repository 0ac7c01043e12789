package outbox

import (
	"github.com/jq-dev/jq/queue"
	"github.com/jq-dev/jq/store"
)

// Encoder serialises an event as the value of its Kafka message. The relay is given one
// (api.MarshalEvent) so that it moves bytes without depending on the API's wire format.
type Encoder func(*queue.Event) ([]byte, error)

// traceHeaders are the W3C trace-context keys carried as message headers.
var traceHeaders = []string{"traceparent", "tracestate", "baggage"}

// messageBytes bounds from above what m takes in a Kafka record batch, as kafka-go counts it
// against its writer's BatchBytes: the lengths of key, value and headers, and their framing.
func messageBytes(m store.EventMessage) int {
	n := 64 + len(m.Key) + len(m.Value)
	for _, h := range m.Headers {
		n += 10 + len(h.Key) + len(h.Value)
	}
	return n
}

// encode builds the Kafka message of an event: key job_id, value from enc, and the job's trace
// context as headers when withTrace.
func encode(enc Encoder, e *store.OutboxEvent, withTrace bool) (store.EventMessage, error) {
	v, err := enc(&e.Event)
	if err != nil {
		return store.EventMessage{}, err
	}
	m := store.EventMessage{Key: []byte(e.JobID), Value: v}
	if withTrace {
		for _, k := range traceHeaders {
			if tv, ok := e.TraceContext[k]; ok && tv != "" {
				m.Headers = append(m.Headers, store.EventHeader{Key: k, Value: []byte(tv)})
			}
		}
	}
	return m, nil
}
