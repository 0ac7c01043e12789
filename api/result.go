package api

import (
	"encoding/json"
	"strings"

	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/structpb"

	jqv1 "github.com/jq-dev/jq/api/gen/jq/v1"
	"github.com/jq-dev/jq/queue"
)

// Result types: seed 001's result object is one or the other (JobResult.type).
const (
	ResultSuccess = "success"
	ResultFailure = "failure"
)

// Outcome is the result GetJobResult answers for a job, in seed 001's shape, and whether there is
// one: a success while a DONE job's result bytes are retained (ResultProto), a failure for a
// FAILED or DEAD_LETTERED job (FailureProto). A job still running, or a DONE job whose result was
// not kept, was consumed or passed its retention, has none.
func Outcome(j *queue.Job) (*jqv1.JobResult, bool) {
	switch {
	case j.ResultKept():
		return ResultProto(j), true
	case j.State == queue.StateFailed || j.State == queue.StateDeadLettered:
		return FailureProto(j), true
	}
	return nil, false
}

// ResultProto is the success result of a DONE job. The runtime is the server's view (started_at to
// completed_at): the worker's own measure is not stored.
func ResultProto(j *queue.Job) *jqv1.JobResult {
	r := &jqv1.JobResult{
		Type:           ResultSuccess,
		Data:           j.Result,
		ChecksumSha256: j.ResultChecksum,
		Size:           j.ResultSize,
		CompletedAt:    Timestamp(j.CompletedAt),
		FinishedAt:     Timestamp(j.CompletedAt),
	}
	if !j.StartedAt.IsZero() && !j.CompletedAt.IsZero() {
		r.Runtime = durationpb.New(j.CompletedAt.Sub(j.StartedAt))
	}
	return r
}

// FailureProto is the failure result of a FAILED or DEAD_LETTERED job, built from its record:
// reason is failure_reason, should_retry says whether the server will retry it on its own
// (queue.Job.WillRetry), error is last_error as a JSON value, message its display line. A FAILED
// job has no completed_at; its failure happened when it last changed (updated_at).
func FailureProto(j *queue.Job) *jqv1.JobResult {
	finished := j.CompletedAt
	if finished.IsZero() {
		finished = j.UpdatedAt
	}
	errValue, message := ErrorValue(j.LastError)
	if message == "" {
		message = reasonMessage(j.FailureReason)
	}
	return &jqv1.JobResult{
		Type:        ResultFailure,
		CompletedAt: Timestamp(j.CompletedAt),
		FinishedAt:  Timestamp(finished),
		Reason:      j.FailureReason,
		ShouldRetry: j.WillRetry(),
		Error:       errValue,
		Message:     message,
	}
}

// ErrorValue turns a job's error text into seed 001's "error" (any value) and "message": text that
// is valid JSON is passed as that JSON value (a worker may report a structured error), other text
// as a string. The message is the "message" member of a JSON object when it is a string, else the
// text itself; empty text gives a null value and no message.
func ErrorValue(text string) (*structpb.Value, string) {
	if text == "" {
		return structpb.NewNullValue(), ""
	}
	var v any
	if json.Unmarshal([]byte(strings.TrimSpace(text)), &v) == nil {
		if pv, err := structpb.NewValue(v); err == nil {
			if obj, ok := v.(map[string]any); ok {
				if m, ok := obj["message"].(string); ok && m != "" {
					return pv, m
				}
			}
			return pv, text
		}
	}
	return structpb.NewStringValue(text), text
}

// reasonMessage describes a failure that carries no error text (the server's own decisions).
func reasonMessage(reason string) string {
	switch reason {
	case "timeout":
		return "the attempt exceeded the job's timeout"
	case "worker_lost":
		return "the worker running the job was lost"
	case "assignment_timeout":
		return "the worker did not acknowledge the job in time"
	case "cancelled":
		return "the job was cancelled"
	case "ttl_expired":
		return "the job did not start within its ttl"
	case "":
		return "the job failed"
	}
	return "the job failed: " + reason
}
