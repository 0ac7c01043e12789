package outbox

import (
	"google.golang.org/protobuf/proto"

	"github.com/jq-dev/jq/api"
	"github.com/jq-dev/jq/store"
)

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

// encode builds the Kafka message of an event: key job_id, value protobuf, and the job's trace
// context as headers when withTrace.
func encode(e *store.OutboxEvent, withTrace bool) (store.EventMessage, error) {
	v, err := proto.Marshal(api.EventProto(&e.Event))
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
