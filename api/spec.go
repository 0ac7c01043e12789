package api

import (
	"fmt"
	"time"

	"google.golang.org/protobuf/types/known/durationpb"

	jqv1 "github.com/jq-dev/jq/api/gen/jq/v1"
	"github.com/jq-dev/jq/queue"
	"github.com/jq-dev/jq/store"
)

// JobSpecParams validates one JobSpec and converts it into store parameters: the one reading of a
// submitted spec, shared by the server's SubmitJob and SubmitJobs and by a transactional insert
// (client/jqpgx), so every way in accepts and refuses the same jobs. What only the wire knows is
// checked here (presence, a duration's encoding, the payload limit, run_at's horizon); the limits
// of the job itself are store.JobInsertParams.Validate, called last. Every refusal wraps
// queue.ErrInvalidArgument with a one-line message; nothing is written.
func JobSpecParams(spec *jqv1.JobSpec, maxPayload int, now time.Time) (store.JobInsertParams, error) {
	if spec == nil {
		return store.JobInsertParams{}, invalid("job: missing")
	}
	if len(spec.GetPayload()) > maxPayload {
		return store.JobInsertParams{}, invalid(fmt.Sprintf("payload of %d bytes exceeds the limit of %d", len(spec.GetPayload()), maxPayload))
	}
	p := store.JobInsertParams{
		Queue:          spec.GetQueue(),
		Type:           spec.GetType(),
		Payload:        spec.GetPayload(),
		Priority:       int(spec.GetPriority()),
		IdempotencyKey: spec.GetIdempotencyKey(),
		Labels:         spec.GetLabels(),
		KeepResult:     spec.GetKeepResult(),
		TraceContext:   spec.GetTraceContext(),
	}
	if spec.MaxRetries != nil {
		n := int(spec.GetMaxRetries())
		p.MaxRetries = &n
	}
	if err := OptionalDuration("ttl", spec.GetTtl(), &p.TTL); err != nil {
		return p, err
	}
	if err := OptionalDuration("timeout", spec.GetTimeout(), &p.Timeout); err != nil {
		return p, err
	}
	if spec.GetRunAt() != nil {
		if err := spec.GetRunAt().CheckValid(); err != nil {
			return p, invalid("run_at: not a valid timestamp")
		}
		p.RunAt = spec.GetRunAt().AsTime()
		if p.RunAt.After(now.Add(store.MaxDuration)) {
			return p, invalid(fmt.Sprintf("run_at: at most %v ahead", store.MaxDuration))
		}
	}
	if err := p.Validate(); err != nil {
		return p, err
	}
	return p, nil
}

// OptionalDuration reads an optional duration: unset (nil) leaves dst alone (the default applies);
// when set it must be valid and positive. Upper bounds are store's.
func OptionalDuration(name string, d *durationpb.Duration, dst *time.Duration) error {
	if d == nil {
		return nil
	}
	if err := d.CheckValid(); err != nil {
		return invalid(name + ": not a valid duration")
	}
	v := d.AsDuration()
	if v <= 0 {
		return invalid(name + " " + v.String() + ": must be positive when set (leave it unset for the default)")
	}
	*dst = v
	return nil
}

// invalid wraps queue.ErrInvalidArgument, so the code (INVALID_ARGUMENT) survives added context.
func invalid(msg string) error {
	return fmt.Errorf("%w: %s", queue.ErrInvalidArgument, msg)
}
