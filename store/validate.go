package store

import (
	"errors"
	"fmt"
	"math"
	"strings"
	"unicode/utf8"

	"github.com/google/uuid"

	"github.com/jq-dev/jq/queue"
)

// Limits on submitted strings; they keep one bad request from bloating indexes.
const (
	MaxIdempotencyKeyLen = 256
	MaxTypeLen           = 256
	MaxLabels            = 64
	MaxLabelLen          = 256
)

// The helpers below hold the argument checks every backend shares, so that they all refuse the same
// input with the same ErrInvalidArgument.

func invalid(format string, args ...any) error {
	return fmt.Errorf("%w: "+format, append([]any{queue.ErrInvalidArgument}, args...)...)
}

// ParseJobID returns the canonical form of a job id, or ErrInvalidArgument when it is not a UUID.
func ParseJobID(id string) (string, error) {
	u, err := uuid.Parse(id)
	if err != nil {
		return "", invalid("job id %q is not a UUID", id)
	}
	return u.String(), nil
}

// Queue validates p and returns the queue it describes with the defaults applied (timestamps unset).
func (p QueueCreateParams) Queue() (*queue.Queue, error) {
	if err := queue.ValidateQueueName(p.Name); err != nil {
		return nil, err
	}
	q := &queue.Queue{
		Name:            p.Name,
		MaxRetries:      queue.DefaultMaxRetries,
		TTL:             p.TTL,
		PriorityWeights: map[int]int{},
		BackoffBase:     p.BackoffBase,
		BackoffMax:      p.BackoffMax,
	}
	var errs []error
	if p.MaxRetries != nil {
		if *p.MaxRetries < 0 || *p.MaxRetries > math.MaxInt32 {
			errs = append(errs, invalid("max_retries %d is out of range", *p.MaxRetries))
		}
		q.MaxRetries = *p.MaxRetries
	}
	if p.TTL < 0 {
		errs = append(errs, invalid("ttl %v is negative", p.TTL))
	}
	if q.BackoffBase == 0 {
		q.BackoffBase = queue.DefaultBackoffBase
	}
	if q.BackoffMax == 0 {
		q.BackoffMax = max(queue.DefaultBackoffMax, q.BackoffBase)
	}
	if q.BackoffBase < 0 || q.BackoffMax < 0 {
		errs = append(errs, invalid("backoff durations must not be negative"))
	} else if q.BackoffMax < q.BackoffBase {
		errs = append(errs, invalid("backoff max %v is below backoff base %v", q.BackoffMax, q.BackoffBase))
	}
	for prio, w := range p.PriorityWeights {
		if prio < queue.MinPriority || prio > queue.MaxPriority {
			errs = append(errs, invalid("priority weight key %d is outside %d..%d", prio, queue.MinPriority, queue.MaxPriority))
		}
		if w <= 0 {
			errs = append(errs, invalid("priority weight %d of priority %d must be positive", w, prio))
		}
		q.PriorityWeights[prio] = w
	}
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	return q, nil
}

// Validate checks one job's arguments (not whether its queue exists).
func (p JobInsertParams) Validate() error {
	var errs []error
	if p.ID != "" {
		if _, err := ParseJobID(p.ID); err != nil {
			errs = append(errs, err)
		}
	}
	if err := queue.ValidateQueueName(p.Queue); err != nil {
		errs = append(errs, err)
	}
	for name, v := range map[string]string{"type": p.Type, "idempotency key": p.IdempotencyKey} {
		if strings.ContainsRune(v, 0) {
			errs = append(errs, invalid("%s contains a NUL byte", name))
		}
	}
	for _, m := range []map[string]string{p.Labels, p.TraceContext} {
		for k, v := range m {
			if strings.ContainsRune(k, 0) || strings.ContainsRune(v, 0) {
				errs = append(errs, invalid("label or trace context %q contains a NUL byte", k))
			}
		}
	}
	if len(p.Type) > MaxTypeLen {
		errs = append(errs, invalid("type is longer than %d bytes", MaxTypeLen))
	}
	if p.Priority < queue.MinPriority || p.Priority > queue.MaxPriority {
		errs = append(errs, invalid("priority %d is outside %d..%d", p.Priority, queue.MinPriority, queue.MaxPriority))
	}
	if p.MaxRetries != nil && (*p.MaxRetries < 0 || *p.MaxRetries > math.MaxInt32) {
		errs = append(errs, invalid("max_retries %d is out of range", *p.MaxRetries))
	}
	if p.TTL < 0 {
		errs = append(errs, invalid("ttl %v is negative", p.TTL))
	}
	if p.Timeout < 0 {
		errs = append(errs, invalid("timeout %v is negative", p.Timeout))
	}
	if len(p.IdempotencyKey) > MaxIdempotencyKeyLen {
		errs = append(errs, invalid("idempotency key is longer than %d bytes", MaxIdempotencyKeyLen))
	}
	if len(p.Labels) > MaxLabels {
		errs = append(errs, invalid("more than %d labels", MaxLabels))
	}
	for k, v := range p.Labels {
		if k == "" || len(k) > MaxLabelLen || len(v) > MaxLabelLen {
			errs = append(errs, invalid("label %q: keys must be 1..%d bytes, values at most %d", k, MaxLabelLen, MaxLabelLen))
		}
	}
	return errors.Join(errs...)
}

// Validate checks a list request and returns it with the page size resolved and the cursor decoded.
func (p JobListParams) Validate() (limit int, cursor *JobCursor, err error) {
	var errs []error
	if p.Queue != "" {
		if err := queue.ValidateQueueName(p.Queue); err != nil {
			errs = append(errs, err)
		}
	}
	for _, s := range p.States {
		if !s.Valid() {
			errs = append(errs, invalid("unknown job state %q", s))
		}
	}
	switch {
	case p.Limit < 0:
		errs = append(errs, invalid("limit %d is negative", p.Limit))
	case p.Limit == 0:
		limit = DefaultListLimit
	default:
		limit = min(p.Limit, MaxListLimit)
	}
	if p.Cursor != "" {
		c, err := DecodeJobCursor(p.Cursor)
		if err != nil {
			errs = append(errs, err)
		}
		cursor = &c
	}
	if err := errors.Join(errs...); err != nil {
		return 0, nil, err
	}
	return limit, cursor, nil
}

// Validate checks a transition request: first the transition table (ErrIllegalTransition, before
// any I/O), then the arguments. It returns the canonical job id.
func (p JobTransitionParams) Validate() (id string, err error) {
	if err := queue.CheckTransition(p.From, p.To); err != nil {
		return "", err
	}
	id, err = ParseJobID(p.ID)
	if err != nil {
		return "", err
	}
	var errs []error
	if p.Attempt < AnyAttempt {
		errs = append(errs, invalid("attempt %d is negative", p.Attempt))
	}
	if p.To == queue.StateAssigned && p.WorkerID == "" {
		errs = append(errs, invalid("a worker id is required to assign a job"))
	}
	if p.To != queue.StateDone && p.Result != nil {
		errs = append(errs, invalid("a result is only recorded on the way to DONE"))
	}
	if p.To != queue.StatePending {
		if !p.NotBefore.IsZero() {
			errs = append(errs, invalid("not_before is only set on the way to PENDING"))
		}
		if p.ResetRetries {
			errs = append(errs, invalid("retries are only reset on the way to PENDING"))
		}
	}
	return id, errors.Join(errs...)
}

// Validate checks a registration.
func (p WorkerRegisterParams) Validate() error {
	var errs []error
	if p.ID == "" {
		errs = append(errs, invalid("worker id is empty"))
	}
	if p.Concurrency < 0 {
		errs = append(errs, invalid("concurrency %d is negative", p.Concurrency))
	}
	for _, q := range p.Queues {
		if err := queue.ValidateQueueName(q); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// Validate checks a status change.
func (p WorkerSetStatusParams) Validate() error {
	if p.ID == "" {
		return invalid("worker id is empty")
	}
	if !p.Status.Valid() {
		return invalid("unknown worker status %q", p.Status)
	}
	return nil
}

// Validate checks a due-jobs query.
func (p JobDueParams) Validate() error {
	var errs []error
	if err := queue.ValidateQueueName(p.Queue); err != nil {
		errs = append(errs, err)
	}
	if p.Limit < 1 || p.Limit > MaxDispatchBatch {
		errs = append(errs, invalid("limit %d is outside 1..%d", p.Limit, MaxDispatchBatch))
	}
	return errors.Join(errs...)
}

// Validate checks what concerns the whole assignment. Malformed ids are not an error: the backend
// skips them (see DispatchStore.JobAssignMany).
func (p JobAssignParams) Validate() error {
	var errs []error
	if err := validateWorkerID(p.WorkerID); err != nil {
		errs = append(errs, err)
	}
	if err := ValidateDispatchBatch(len(p.IDs)); err != nil {
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}

// Validate checks one lease and returns the canonical job id. A lease always comes from an
// assignment, so its attempt is at least 1 and it names a worker.
func (l JobLease) Validate() (id string, err error) {
	id, err = ParseJobID(l.ID)
	if err != nil {
		return "", err
	}
	if l.Attempt < 1 || l.Attempt > math.MaxInt32 {
		return "", invalid("attempt %d of job %s is outside 1..%d", l.Attempt, id, math.MaxInt32)
	}
	if err := validateWorkerID(l.WorkerID); err != nil {
		return "", err
	}
	return id, nil
}

// ValidateDispatchBatch refuses a DispatchStore batch of more than MaxDispatchBatch items.
func ValidateDispatchBatch(n int) error {
	if n > MaxDispatchBatch {
		return invalid("batch of %d items exceeds %d", n, MaxDispatchBatch)
	}
	return nil
}

// validateWorkerID accepts a non-empty UTF-8 string without NUL bytes: what every backend can store
// and compare.
func validateWorkerID(id string) error {
	if id == "" {
		return invalid("worker id is empty")
	}
	if !utf8.ValidString(id) || strings.ContainsRune(id, 0) {
		return invalid("worker id %q is not NUL-free UTF-8", id)
	}
	return nil
}
