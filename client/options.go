package client

import (
	"encoding/json"
	"fmt"
	"maps"
	"time"

	"github.com/jq-dev/jq/api"
	jqv1 "github.com/jq-dev/jq/api/gen/jq/v1"
	"github.com/jq-dev/jq/queue"
)

// Job is a job to submit.
type Job struct {
	Queue string // an existing queue
	Type  string // the handler name, e.g. "email.send"
	// Payload is the handler's input: []byte and json.RawMessage are sent as they are, nil as an
	// empty payload, anything else as its JSON encoding.
	Payload any
	// Options apply to this job only, after the options of the call (SubmitMany's options apply to
	// every job of the batch; a per-job IdempotencyKey goes here).
	Options []Option
}

// Option sets a property of a submitted job. The server validates the result: a value out of range
// is an error wrapping [queue.ErrInvalidArgument] and nothing is stored.
type Option func(*jobOptions)

type jobOptions struct {
	priority       int
	maxRetries     *int
	ttl, timeout   time.Duration
	runAt          time.Time
	delay          time.Duration
	idempotencyKey string
	labels         map[string]string
	keepResult     bool
}

// Priority sets the dispatch priority, queue.MinPriority (0, the default) to queue.MaxPriority (9,
// first).
func Priority(n int) Option { return func(o *jobOptions) { o.priority = n } }

// Delay makes the job due d after the submit (d ≤ 0: at once). It replaces an earlier RunAt.
// The due time is part of the job's spec and Delay counts from each submit, so an idempotent submit
// that is repeated should use RunAt with a fixed time: with Delay the repeat is a different spec
// ([queue.ErrIdempotencyConflict]).
func Delay(d time.Duration) Option {
	return func(o *jobOptions) { o.delay, o.runAt = d, time.Time{} }
}

// RunAt makes the job due at t (a time in the past means now). It replaces an earlier Delay.
func RunAt(t time.Time) Option {
	return func(o *jobOptions) { o.runAt, o.delay = t, 0 }
}

// MaxRetries sets how many times a failed attempt is retried before the job is dead-lettered
// (0: never); without it the queue's setting applies.
func MaxRetries(n int) Option { return func(o *jobOptions) { o.maxRetries = &n } }

// Timeout bounds one attempt (default 30 s, at most 24 h).
func Timeout(d time.Duration) Option { return func(o *jobOptions) { o.timeout = d } }

// TTL dead-letters the job ("ttl_expired") if it has not started within d of becoming due;
// without it the queue's TTL applies, if any.
func TTL(d time.Duration) Option { return func(o *jobOptions) { o.ttl = d } }

// IdempotencyKey makes the submit idempotent within the queue: a second submit of the same spec
// with the same key returns the first job (Submitted.Existing); the same key with a different spec
// is an error wrapping [queue.ErrIdempotencyConflict].
func IdempotencyKey(key string) Option { return func(o *jobOptions) { o.idempotencyKey = key } }

// Labels adds labels to the job, for filtering and observability. Several Labels options merge.
func Labels(labels map[string]string) Option {
	return func(o *jobOptions) {
		if o.labels == nil {
			o.labels = make(map[string]string, len(labels))
		}
		maps.Copy(o.labels, labels)
	}
}

// KeepResult keeps the job's result once it is DONE, for [Client.Result] and [Client.Get].
func KeepResult() Option { return func(o *jobOptions) { o.keepResult = true } }

// JobSpec is the job as the API receives it (jq.v1.JobSpec), with the options of the call applied
// first and then the job's own. Delay is counted from now. A payload that cannot be encoded is an
// error wrapping [queue.ErrInvalidArgument].
func (j Job) JobSpec(opts ...Option) (*jqv1.JobSpec, error) {
	var o jobOptions
	for _, opt := range opts {
		opt(&o)
	}
	for _, opt := range j.Options {
		opt(&o)
	}
	payload, err := EncodePayload(j.Payload)
	if err != nil {
		return nil, err
	}
	spec := &jqv1.JobSpec{
		Queue: j.Queue, Type: j.Type, Payload: payload,
		Priority:       int32(min(max(o.priority, -1), queue.MaxPriority+1)), // clamped just outside the range, which the server refuses
		Ttl:            api.Duration(o.ttl),
		Timeout:        api.Duration(o.timeout),
		IdempotencyKey: o.idempotencyKey,
		Labels:         o.labels,
		KeepResult:     o.keepResult,
	}
	if o.maxRetries != nil {
		n := int32(min(max(*o.maxRetries, -1), 1<<20)) // clamped; the server checks the range
		spec.MaxRetries = &n
	}
	switch {
	case o.delay > 0:
		spec.RunAt = api.Timestamp(time.Now().Add(o.delay))
	case !o.runAt.IsZero():
		spec.RunAt = api.Timestamp(o.runAt)
	}
	return spec, nil
}

// EncodePayload is how [Job.Payload] becomes bytes: []byte and json.RawMessage as they are, nil as
// nothing, anything else JSON-encoded.
func EncodePayload(v any) ([]byte, error) {
	switch p := v.(type) {
	case nil:
		return nil, nil
	case []byte:
		return p, nil
	case json.RawMessage:
		return p, nil
	}
	b, err := json.Marshal(v)
	if err != nil {
		return nil, fmt.Errorf("%w: payload: %w", queue.ErrInvalidArgument, err)
	}
	return b, nil
}
