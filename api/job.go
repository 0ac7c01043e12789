package api

import (
	"math"
	"time"

	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/timestamppb"

	jqv1 "github.com/jq-dev/jq/api/gen/jq/v1"
	"github.com/jq-dev/jq/queue"
)

// Conversions of a job between the domain (queue) and the wire (jqv1), shared by the server and
// the Go client so that both read a record the same way. Zero times and durations are absent
// fields, and absent fields zero values.

// JobProto is the API's record of a job. The result travels only with a DONE job whose result bytes
// are retained (queue.Job.ResultKept).
func JobProto(j *queue.Job) *jqv1.Job {
	p := &jqv1.Job{
		Id:             j.ID,
		Queue:          j.Queue,
		Type:           j.Type,
		Payload:        j.Payload,
		Priority:       int32(j.Priority), //nolint:gosec // 0-9
		State:          StateProto(j.State),
		MaxRetries:     int32(j.MaxRetries), //nolint:gosec // bounded on submit
		RetryCount:     int32(j.RetryCount), //nolint:gosec // ≤ max_retries
		Attempt:        int32(j.Attempt),    //nolint:gosec // small
		Ttl:            Duration(j.TTL),
		NotBefore:      Timestamp(j.NotBefore),
		Timeout:        Duration(j.Timeout),
		IdempotencyKey: j.IdempotencyKey,
		Labels:         j.Labels,
		KeepResult:     j.KeepResult,
		TraceContext:   j.TraceContext,
		WorkerId:       j.WorkerID,
		LastError:      j.LastError,
		FailureReason:  j.FailureReason,
		CreatedAt:      Timestamp(j.CreatedAt),
		UpdatedAt:      Timestamp(j.UpdatedAt),
		StartedAt:      Timestamp(j.StartedAt),
		CompletedAt:    Timestamp(j.CompletedAt),
	}
	if j.ResultKept() {
		p.Result = ResultProto(j)
	}
	if pr := j.Progress; pr != nil {
		p.Progress = &jqv1.JobProgress{Percent: int32(pr.Percent), Message: pr.Message, UpdatedAt: Timestamp(pr.UpdatedAt)} //nolint:gosec // 0..100
	}
	p.Waiting = j.Waiting
	return p
}

// JobFromProto is the domain's view of a job record received from the API. What the wire does not
// carry stays zero: ExpiresAt, NoRetry, CancelRequested (CancelJob reports it beside the job) and
// Principal. An unknown state is kept by its wire name, so a newer server's state is not mistaken
// for an old one.
func JobFromProto(p *jqv1.Job) *queue.Job {
	if p == nil {
		return nil
	}
	state, ok := StateFromProto(p.GetState())
	if !ok {
		state = queue.State(p.GetState().String())
	}
	j := &queue.Job{
		ID:             p.GetId(),
		Queue:          p.GetQueue(),
		Type:           p.GetType(),
		Payload:        p.GetPayload(),
		Priority:       int(p.GetPriority()),
		State:          state,
		MaxRetries:     int(p.GetMaxRetries()),
		RetryCount:     int(p.GetRetryCount()),
		Attempt:        int(p.GetAttempt()),
		TTL:            durationOf(p.GetTtl()),
		Timeout:        durationOf(p.GetTimeout()),
		NotBefore:      timeOf(p.GetNotBefore()),
		IdempotencyKey: p.GetIdempotencyKey(),
		Labels:         p.GetLabels(),
		KeepResult:     p.GetKeepResult(),
		TraceContext:   p.GetTraceContext(),
		WorkerID:       p.GetWorkerId(),
		LastError:      p.GetLastError(),
		FailureReason:  p.GetFailureReason(),
		CreatedAt:      timeOf(p.GetCreatedAt()),
		UpdatedAt:      timeOf(p.GetUpdatedAt()),
		StartedAt:      timeOf(p.GetStartedAt()),
		CompletedAt:    timeOf(p.GetCompletedAt()),
	}
	if r := p.GetResult(); r != nil {
		// Present only with retained bytes; the wire drops an empty result's bytes.
		j.Result, j.ResultChecksum, j.ResultSize = r.GetData(), r.GetChecksumSha256(), r.GetSize()
		if j.Result == nil {
			j.Result = []byte{}
		}
	}
	if pr := p.GetProgress(); pr != nil {
		j.Progress = &queue.JobProgress{Percent: int(pr.GetPercent()), Message: pr.GetMessage(), UpdatedAt: timeOf(pr.GetUpdatedAt())}
	}
	j.Waiting = p.GetWaiting()
	return j
}

// Timestamp is t on the wire; nil for the zero time.
func Timestamp(t time.Time) *timestamppb.Timestamp {
	if t.IsZero() {
		return nil
	}
	return timestamppb.New(t)
}

// Duration is d on the wire; nil for zero.
func Duration(d time.Duration) *durationpb.Duration {
	if d == 0 {
		return nil
	}
	return durationpb.New(d)
}

func timeOf(t *timestamppb.Timestamp) time.Time {
	if t == nil {
		return time.Time{}
	}
	return t.AsTime()
}

func durationOf(d *durationpb.Duration) time.Duration {
	if d == nil {
		return 0
	}
	return d.AsDuration()
}

// BreakerProto is a worker's circuit breaker on the wire (HeartbeatRequest, Worker).
func BreakerProto(b queue.QueueBreaker) *jqv1.QueueBreaker {
	state := jqv1.CircuitBreakerState_CIRCUIT_BREAKER_STATE_CLOSED
	switch b.State {
	case queue.BreakerOpen:
		state = jqv1.CircuitBreakerState_CIRCUIT_BREAKER_STATE_OPEN
	case queue.BreakerHalfOpen:
		state = jqv1.CircuitBreakerState_CIRCUIT_BREAKER_STATE_HALF_OPEN
	}
	return &jqv1.QueueBreaker{
		Queue: b.Queue, State: state, FailureRate: b.FailureRate,
		Samples: int32(min(b.Samples, math.MaxInt32)), //nolint:gosec // bounded just above
		Since:   Timestamp(b.Since),
	}
}

// TimeOf is a wire timestamp as a time; the zero time when unset or invalid.
func TimeOf(t *timestamppb.Timestamp) time.Time { return timeOf(t) }
