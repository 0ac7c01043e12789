package outbox

import (
	"google.golang.org/protobuf/proto"

	"github.com/jq-dev/jq/api"
	"github.com/jq-dev/jq/store"
)

// traceHeaders are the W3C trace-context keys carried as message headers.
var traceHeaders = []string{"traceparent", "tracestate", "baggage"}

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
