package api

import (
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/timestamppb"

	jqv1 "github.com/jq-dev/jq/api/gen/jq/v1"
	"github.com/jq-dev/jq/queue"
)

var stateProto = map[queue.State]jqv1.JobState{
	queue.StatePending:      jqv1.JobState_JOB_STATE_PENDING,
	queue.StateAssigned:     jqv1.JobState_JOB_STATE_ASSIGNED,
	queue.StateRunning:      jqv1.JobState_JOB_STATE_RUNNING,
	queue.StateDone:         jqv1.JobState_JOB_STATE_DONE,
	queue.StateFailed:       jqv1.JobState_JOB_STATE_FAILED,
	queue.StateDeadLettered: jqv1.JobState_JOB_STATE_DEAD_LETTERED,
}

// StateProto is the API's name of a job state (UNSPECIFIED for an unknown one).
func StateProto(s queue.State) jqv1.JobState { return stateProto[s] }

// StateFromProto is the job state an API state names; false for UNSPECIFIED or an unknown value.
func StateFromProto(s jqv1.JobState) (queue.State, bool) {
	for k, v := range stateProto {
		if v == s {
			return k, true
		}
	}
	return "", false
}

// MarshalEvent is the value of an event's Kafka message: EventProto in protobuf's binary form
// (the outbox relay's encoder).
func MarshalEvent(e *queue.Event) ([]byte, error) { return proto.Marshal(EventProto(e)) }

// EventProto is the one conversion of a job event: the item of ListJobEvents and, byte for byte,
// the message the outbox relay publishes to Kafka.
func EventProto(e *queue.Event) *jqv1.JobEvent {
	ev := &jqv1.JobEvent{
		JobId:     e.JobID,
		Queue:     e.Queue,
		Seq:       e.Seq,
		FromState: stateProto[e.From],
		ToState:   stateProto[e.To],
		WorkerId:  e.WorkerID,
		Reason:    e.Reason,
		Attempt:   int32(e.Attempt), //nolint:gosec // attempts are small
		Type:      e.Type,
	}
	if !e.At.IsZero() {
		ev.Timestamp = timestamppb.New(e.At)
	}
	return ev
}
