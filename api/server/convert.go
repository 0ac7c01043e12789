package apiserver

import (
	"time"

	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/jq-dev/jq/api"
	jqv1 "github.com/jq-dev/jq/api/gen/jq/v1"
	"github.com/jq-dev/jq/queue"
)

// Conversions between the domain (queue) and the wire (jqv1). Zero times and
// durations become absent fields.

// ts and dur are the wire's optional time and duration (absent when zero).
var (
	ts  = api.Timestamp
	dur = api.Duration
)

func queueToProto(q *queue.Queue) *jqv1.Queue {
	w := make(map[int32]int32, len(q.PriorityWeights))
	for k, v := range q.PriorityWeights {
		w[int32(k)] = int32(v) //nolint:gosec // priorities are 0-9, weights validated on create
	}
	return &jqv1.Queue{
		Name:            q.Name,
		MaxRetries:      int32(q.MaxRetries), //nolint:gosec // bounded on create
		Ttl:             dur(q.TTL),
		PriorityWeights: w,
		BackoffBase:     dur(q.BackoffBase),
		BackoffMax:      dur(q.BackoffMax),
		Paused:          q.Paused,
		ResultRetention: dur(q.ResultRetention),
		MaxWait:         dur(q.MaxWait),
		CreatedAt:       ts(q.CreatedAt),
		UpdatedAt:       ts(q.UpdatedAt),
	}
}

func queueStatsToProto(s *queue.QueueStats) *jqv1.QueueStats {
	return &jqv1.QueueStats{
		Queue:              s.Queue,
		Pending:            s.Pending,
		Assigned:           s.Assigned,
		Running:            s.Running,
		Done:               s.Done,
		Failed:             s.Failed,
		DeadLettered:       s.DeadLettered,
		TotalProcessed:     s.TotalProcessed,
		AvgProcessingTime:  durationpb.New(s.AvgProcessingTime),
		ErrorRate:          s.ErrorRate,
		OldestPendingAge:   durationpb.New(s.OldestPendingAge),
		DoneEstimated:      s.DoneEstimated,
		Window:             durationpb.New(s.Window),
		Finished:           s.Finished,
		FailedAttempts:     s.FailedAttempts,
		FinishedLastMinute: s.FinishedLastMinute,
		FailedLastMinute:   s.FailedLastMinute,
	}
}

func workerToProto(w *queue.Worker) *jqv1.Worker {
	status := jqv1.WorkerStatus_WORKER_STATUS_UNSPECIFIED
	switch w.Status {
	case queue.WorkerOnline:
		status = jqv1.WorkerStatus_WORKER_STATUS_ONLINE
	case queue.WorkerDraining:
		status = jqv1.WorkerStatus_WORKER_STATUS_DRAINING
	case queue.WorkerOffline:
		status = jqv1.WorkerStatus_WORKER_STATUS_OFFLINE
	}
	return &jqv1.Worker{
		Id:              w.ID,
		Hostname:        w.Hostname,
		Status:          status,
		Concurrency:     int32(w.Concurrency), //nolint:gosec // validated on register
		Queues:          w.Queues,
		RunningJobs:     int32(w.RunningJobs), //nolint:gosec // ≤ concurrency
		Version:         w.Version,
		StartedAt:       ts(w.StartedAt),
		LastHeartbeatAt: ts(w.LastHeartbeatAt),
		Breakers:        breakersToProto(w.Breakers),
		Types:           w.Types,
	}
}

func breakersToProto(bs []queue.QueueBreaker) []*jqv1.QueueBreaker {
	if len(bs) == 0 {
		return nil
	}
	out := make([]*jqv1.QueueBreaker, len(bs))
	for i, b := range bs {
		out[i] = api.BreakerProto(b)
	}
	return out
}

// breakersFromProto keeps the breakers of a heartbeat that limit the worker's intake: closed
// ones (or unspecified) say nothing. An unknown state is kept for the store to refuse.
func breakersFromProto(bs []*jqv1.QueueBreaker) []queue.QueueBreaker {
	var out []queue.QueueBreaker
	for _, b := range bs {
		var state queue.BreakerState
		switch b.GetState() {
		case jqv1.CircuitBreakerState_CIRCUIT_BREAKER_STATE_UNSPECIFIED, jqv1.CircuitBreakerState_CIRCUIT_BREAKER_STATE_CLOSED:
			continue
		case jqv1.CircuitBreakerState_CIRCUIT_BREAKER_STATE_OPEN:
			state = queue.BreakerOpen
		case jqv1.CircuitBreakerState_CIRCUIT_BREAKER_STATE_HALF_OPEN:
			state = queue.BreakerHalfOpen
		default:
			state = queue.BreakerState(b.GetState().String())
		}
		var since time.Time
		if b.GetSince() != nil {
			since = b.GetSince().AsTime()
		}
		out = append(out, queue.QueueBreaker{Queue: b.GetQueue(), State: state, FailureRate: b.GetFailureRate(),
			Samples: int(b.GetSamples()), Since: since})
	}
	return out
}
