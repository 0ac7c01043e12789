package outbox

import (
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/timestamppb"

	jqv1 "github.com/jq-dev/jq/api/gen/jq/v1"
	"github.com/jq-dev/jq/queue"
	"github.com/jq-dev/jq/store"
)

var stateToProto = map[queue.State]jqv1.JobState{
	queue.StatePending:      jqv1.JobState_JOB_STATE_PENDING,
	queue.StateAssigned:     jqv1.JobState_JOB_STATE_ASSIGNED,
	queue.StateRunning:      jqv1.JobState_JOB_STATE_RUNNING,
	queue.StateDone:         jqv1.JobState_JOB_STATE_DONE,
	queue.StateFailed:       jqv1.JobState_JOB_STATE_FAILED,
	queue.StateDeadLettered: jqv1.JobState_JOB_STATE_DEAD_LETTERED,
}

// EventProto is the published form of an event: the same message as a ListJobEvents item.
func EventProto(e *queue.Event) *jqv1.JobEvent {
	return &jqv1.JobEvent{
		JobId:     e.JobID,
		Queue:     e.Queue,
		Seq:       e.Seq,
		FromState: stateToProto[e.From],
		ToState:   stateToProto[e.To],
		Timestamp: timestamppb.New(e.At),
		WorkerId:  e.WorkerID,
		Reason:    e.Reason,
		Attempt:   int32(e.Attempt), //nolint:gosec // attempts are small
		Type:      e.Type,
	}
}

// traceHeaders are the W3C trace-context keys carried as message headers.
var traceHeaders = []string{"traceparent", "tracestate", "baggage"}

// encode builds the Kafka message of an event: key job_id, value protobuf, and the job's trace
// context as headers when withTrace.
func encode(e *store.OutboxEvent, withTrace bool) (store.EventMessage, error) {
	v, err := proto.Marshal(EventProto(&e.Event))
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
