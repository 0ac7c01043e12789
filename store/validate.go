package store

import (
	"errors"
	"fmt"
	"math"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/google/uuid"

	"github.com/jq-dev/jq/queue"
)

// This file is the one place of the limits on what a job, a queue, a worker or a listing may carry:
// the bounds the API contract (api/proto/jq/v1, docs/api.md) promises. The API converts a request
// and calls these; store/storewrap, which every store is reached through, calls them again before
// the backend sees the call, so a client, a test or a future backend all meet the same rules and the
// same ErrInvalidArgument. Messages are one line and quote
// at most queue.MaxExcerpt bytes of the input.

// Limits of a job spec.
const (
	MaxTypeLen           = 128 // type: 1..128 bytes of printable ASCII without spaces
	MaxIdempotencyKeyLen = 255
	MaxLabels            = 64
	MaxLabelKeyLen       = 63
	MaxLabelValueLen     = 255
	MaxJobRetries        = 100
	MaxJobTimeout        = 24 * time.Hour
	MaxDuration          = 366 * 24 * time.Hour // ttl, run_at ahead, backoff

	// The trace context is what an OpenTelemetry text-map propagator writes: traceparent (55 bytes),
	// tracestate and perhaps baggage. It travels with the job to every worker and into events, so
	// it is bounded like the rest.
	MaxTraceContextEntries  = 8
	MaxTraceContextKeyLen   = 64
	MaxTraceContextValueLen = 512
	MaxTraceContextBytes    = 2 << 10 // keys and values together
)

// Limits of a queue.
const (
	MaxPriorityWeight = 1000
)

// Limits of a worker and its reports.
const (
	MaxWorkerIDLen       = 255 // printable ASCII without spaces
	MaxHostnameLen       = 255
	MaxVersionLen        = 128
	MaxWorkerConcurrency = 1024
	MaxWorkerQueues      = 64
	MaxWorkerTypes       = 256

	// A failure's reason is a short machine word (error, timeout, output_too_large, ...); its error
	// text is cut to MaxFailureErrorLen. Both travel in the job's events, so bounding them keeps
	// every event far below Kafka's message size limit: an event the broker refuses would hold up
	// the outbox behind it.
	MaxFailureReasonLen = 64
	MaxFailureErrorLen  = 4 << 10
)

// MaxRetryAfter bounds a report's RetryAfter (the longest job timeout the API accepts): a longer
// one is cut to it, so an endpoint's far-future Retry-After cannot park a job for years.
const MaxRetryAfter = 24 * time.Hour

func invalid(format string, args ...any) error {
	return fmt.Errorf("%w: "+format, append([]any{queue.ErrInvalidArgument}, args...)...)
}

// ParseJobID returns the canonical form of a job id, or ErrInvalidArgument when it is not a UUID.
func ParseJobID(id string) (string, error) {
	u, err := uuid.Parse(id)
	if err != nil {
		return "", invalid("job_id %s is not a UUID", queue.Excerpt(id))
	}
	return u.String(), nil
}

// MinJobIDPrefix and MaxIDPrefixMatches bound a lookup by id prefix (JobPrefixList).
const (
	MinJobIDPrefix     = 4
	MaxIDPrefixMatches = 100
)

// ValidateJobPrefixList checks the arguments of JobPrefixList: a prefix of MinJobIDPrefix to 32 hex
// digits of a job id (dashes allowed where a UUID has them, any case) and a limit of
// 1..MaxIDPrefixMatches. Errors: ErrInvalidArgument.
func ValidateJobPrefixList(prefix string, limit int) error {
	digits := strings.ToLower(strings.ReplaceAll(prefix, "-", ""))
	if len(digits) < MinJobIDPrefix || len(digits) > 32 || strings.Trim(digits, "0123456789abcdef") != "" {
		return invalid("job id prefix %s: want %d to 32 hex digits of a job id", queue.Excerpt(prefix), MinJobIDPrefix)
	}
	if limit < 1 || limit > MaxIDPrefixMatches {
		return invalid("limit %d: want 1..%d", limit, MaxIDPrefixMatches)
	}
	return nil
}

// ValidateJobType checks a job type, named field in the message: 1..MaxTypeLen bytes of printable
// ASCII without spaces.
func ValidateJobType(field, typ string) error {
	if typ == "" || len(typ) > MaxTypeLen || !isToken(typ) {
		return invalid("%s %s: want 1..%d bytes of printable ASCII without spaces (the handler name, e.g. noop)",
			field, queue.Excerpt(typ), MaxTypeLen)
	}
	return nil
}

// isToken reports whether s is printable ASCII without spaces (0x21..0x7e): job types, worker ids,
// trace context keys.
func isToken(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] <= ' ' || s[i] > '~' {
			return false
		}
	}
	return true
}

// isPrintableASCII reports whether s is printable ASCII, spaces included (trace context values).
func isPrintableASCII(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] < ' ' || s[i] > '~' {
			return false
		}
	}
	return true
}

// isText reports whether s is UTF-8 without control characters (C0, DEL, C1): what may be stored
// and shown on a terminal. Postgres refuses NUL in text, so this also keeps a NUL from failing a
// statement that carries other clients' rows.
func isText(s string) bool {
	for i := 0; i < len(s); i++ {
		if c := s[i]; c < ' ' || c == 0x7f || c >= utf8.RuneSelf {
			return utf8.ValidString(s) && !strings.ContainsFunc(s, unicode.IsControl)
		}
	}
	return true
}

// ValidateWorkerID accepts 1..MaxWorkerIDLen bytes of printable ASCII without spaces.
func ValidateWorkerID(id string) error {
	if id == "" || len(id) > MaxWorkerIDLen || !isToken(id) {
		return invalid("worker_id %s: want 1..%d bytes of printable ASCII without spaces", queue.Excerpt(id), MaxWorkerIDLen)
	}
	return nil
}

// ValidateLabels checks a label map (a job's labels, a listing's label filter, a worker's labels):
// at most MaxLabels entries, keys 1..MaxLabelKeyLen bytes, values at most MaxLabelValueLen bytes,
// both UTF-8 without control characters. It reports the first problem only.
func ValidateLabels(field string, labels map[string]string) error {
	if len(labels) > MaxLabels {
		return invalid("%s: at most %d entries, got %d", field, MaxLabels, len(labels))
	}
	for k, v := range labels {
		switch {
		case k == "" || len(k) > MaxLabelKeyLen:
			return invalid("%s: key %s: want 1..%d bytes", field, queue.Excerpt(k), MaxLabelKeyLen)
		case len(v) > MaxLabelValueLen:
			return invalid("%s: value of %s: at most %d bytes", field, queue.Excerpt(k), MaxLabelValueLen)
		case !isText(k) || !isText(v):
			return invalid("%s: %s: control characters are not allowed", field, queue.Excerpt(k))
		}
	}
	return nil
}

// ValidateTraceContext checks a job's trace context: at most MaxTraceContextEntries entries, keys
// 1..MaxTraceContextKeyLen bytes of printable ASCII without spaces, values at most
// MaxTraceContextValueLen bytes of printable ASCII, MaxTraceContextBytes in all.
func ValidateTraceContext(tc map[string]string) error {
	if len(tc) > MaxTraceContextEntries {
		return invalid("trace_context: at most %d entries, got %d", MaxTraceContextEntries, len(tc))
	}
	total := 0
	for k, v := range tc {
		total += len(k) + len(v)
		switch {
		case k == "" || len(k) > MaxTraceContextKeyLen || !isToken(k):
			return invalid("trace_context: key %s: want 1..%d bytes of printable ASCII without spaces", queue.Excerpt(k), MaxTraceContextKeyLen)
		case len(v) > MaxTraceContextValueLen || !isPrintableASCII(v):
			return invalid("trace_context: value of %s: want at most %d bytes of printable ASCII", queue.Excerpt(k), MaxTraceContextValueLen)
		}
	}
	if total > MaxTraceContextBytes {
		return invalid("trace_context: %d bytes in all, at most %d", total, MaxTraceContextBytes)
	}
	return nil
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
		ResultRetention: p.ResultRetention,
		MaxWait:         p.MaxWait,
	}
	var errs []error
	if p.MaxRetries != nil {
		if *p.MaxRetries < 0 || *p.MaxRetries > MaxJobRetries {
			errs = append(errs, invalid("max_retries %d: want 0..%d", *p.MaxRetries, MaxJobRetries))
		}
		q.MaxRetries = *p.MaxRetries
	}
	if p.TTL < 0 || p.TTL > MaxDuration {
		errs = append(errs, invalid("ttl %v: want 0..%v", p.TTL, MaxDuration))
	}
	if q.BackoffBase == 0 {
		q.BackoffBase = queue.DefaultBackoffBase
	}
	if q.BackoffMax == 0 {
		q.BackoffMax = max(queue.DefaultBackoffMax, q.BackoffBase)
	}
	switch {
	case q.BackoffBase < 0 || q.BackoffMax < 0:
		errs = append(errs, invalid("backoff durations must not be negative"))
	case q.BackoffMax > MaxDuration:
		errs = append(errs, invalid("backoff_max %v: at most %v", q.BackoffMax, MaxDuration))
	case q.BackoffMax < q.BackoffBase:
		errs = append(errs, invalid("backoff_max %v is below backoff_base %v", q.BackoffMax, q.BackoffBase))
	}
	switch {
	case q.ResultRetention == 0:
		q.ResultRetention = queue.DefaultResultRetention
	case q.ResultRetention < time.Millisecond || q.ResultRetention > MaxDuration:
		// Stored in milliseconds: less would be stored as none.
		errs = append(errs, invalid("result_retention %v: want 1ms..%v", q.ResultRetention, MaxDuration))
	}
	if p.MaxWait != 0 && (p.MaxWait < time.Millisecond || p.MaxWait > MaxDuration) {
		// Stored in milliseconds, as result_retention.
		errs = append(errs, invalid("max_wait %v: want 0 (none) or 1ms..%v", p.MaxWait, MaxDuration))
	}
	for prio, w := range p.PriorityWeights {
		if prio < queue.MinPriority || prio > queue.MaxPriority || w < 1 || w > MaxPriorityWeight {
			errs = append(errs, invalid("priority_weights %d=%d: want priority %d..%d and weight 1..%d",
				prio, w, queue.MinPriority, queue.MaxPriority, MaxPriorityWeight))
		}
		q.PriorityWeights[prio] = w
	}
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	return q, nil
}

// Apply returns cur with p's changes, validated as QueueCreateParams.Queue validates a new queue;
// name, pause state and timestamps are cur's.
func (p QueueUpdateParams) Apply(cur *queue.Queue) (*queue.Queue, error) {
	c := QueueCreateParams{
		Name: cur.Name, MaxRetries: &cur.MaxRetries, TTL: cur.TTL, PriorityWeights: cur.PriorityWeights,
		BackoffBase: cur.BackoffBase, BackoffMax: cur.BackoffMax, ResultRetention: cur.ResultRetention,
		MaxWait: cur.MaxWait,
	}
	if p.MaxRetries != nil {
		c.MaxRetries = p.MaxRetries
	}
	if p.PriorityWeights != nil {
		c.PriorityWeights = p.PriorityWeights
	}
	for _, d := range []struct {
		v   *time.Duration
		dst *time.Duration
	}{{p.TTL, &c.TTL}, {p.BackoffBase, &c.BackoffBase}, {p.BackoffMax, &c.BackoffMax},
		{p.ResultRetention, &c.ResultRetention}, {p.MaxWait, &c.MaxWait}} {
		if d.v != nil {
			*d.dst = *d.v
		}
	}
	q, err := c.Queue()
	if err != nil {
		return nil, err
	}
	q.Paused, q.CreatedAt, q.UpdatedAt = cur.Paused, cur.CreatedAt, cur.UpdatedAt
	return q, nil
}

// ValidateInserts checks every job of a batch for JobInsertMany and reports all the bad ones
// together, each with its index in the batch.
func ValidateInserts(ps []JobInsertParams) error {
	var bad []error
	for i, p := range ps {
		if err := p.Validate(); err != nil {
			bad = append(bad, fmt.Errorf("job %d: %w", i, err))
		}
	}
	return errors.Join(bad...)
}

// Validate checks one job's arguments (not whether its queue exists). Zero TTL and Timeout mean
// "the default"; the API refuses an explicit zero before it gets here.
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
	if err := ValidateJobType("type", p.Type); err != nil {
		errs = append(errs, err)
	}
	if p.Priority < queue.MinPriority || p.Priority > queue.MaxPriority {
		errs = append(errs, invalid("priority %d: want %d..%d", p.Priority, queue.MinPriority, queue.MaxPriority))
	}
	if p.MaxRetries != nil && (*p.MaxRetries < 0 || *p.MaxRetries > MaxJobRetries) {
		errs = append(errs, invalid("max_retries %d: want 0..%d", *p.MaxRetries, MaxJobRetries))
	}
	if p.TTL < 0 || p.TTL > MaxDuration {
		errs = append(errs, invalid("ttl %v: want at most %v", p.TTL, MaxDuration))
	}
	if p.Timeout < 0 || p.Timeout > MaxJobTimeout {
		errs = append(errs, invalid("timeout %v: want at most %v", p.Timeout, MaxJobTimeout))
	}
	if len(p.IdempotencyKey) > MaxIdempotencyKeyLen || !isText(p.IdempotencyKey) {
		errs = append(errs, invalid("idempotency_key: want at most %d bytes without control characters", MaxIdempotencyKeyLen))
	}
	if err := ValidateLabels("labels", p.Labels); err != nil {
		errs = append(errs, err)
	}
	if err := ValidateTraceContext(p.TraceContext); err != nil {
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}

// Validate checks a list request and returns it with the page size resolved and the cursor decoded.
// A cursor continues only the listing it was issued for: with other filters it is refused.
func (p JobListParams) Validate() (limit int, cursor *JobCursor, err error) {
	var errs []error
	if p.Queue != "" {
		if err := queue.ValidateQueueName(p.Queue); err != nil {
			errs = append(errs, err)
		}
	}
	for _, s := range p.States {
		if !s.Valid() {
			errs = append(errs, invalid("unknown job state %s", queue.Excerpt(string(s))))
		}
	}
	if err := ValidateLabels("labels", p.Labels); err != nil {
		errs = append(errs, err)
	}
	for s := range p.CancelledIn {
		if !s.Valid() {
			errs = append(errs, invalid("cancelled filter: unknown job state %s", queue.Excerpt(string(s))))
		}
	}
	if p.Type != "" {
		if err := ValidateJobType("type", p.Type); err != nil {
			errs = append(errs, err)
		}
	}
	if !p.CreatedAfter.IsZero() && !p.CreatedBefore.IsZero() && !p.CreatedBefore.After(p.CreatedAfter) {
		errs = append(errs, invalid("created_before %s is not after created_after %s",
			p.CreatedBefore.UTC().Format(time.RFC3339), p.CreatedAfter.UTC().Format(time.RFC3339)))
	}
	if !p.CompletedAfter.IsZero() && !p.CompletedBefore.IsZero() && !p.CompletedBefore.After(p.CompletedAfter) {
		errs = append(errs, invalid("completed_before %s is not after completed_after %s",
			p.CompletedBefore.UTC().Format(time.RFC3339), p.CompletedAfter.UTC().Format(time.RFC3339)))
	}
	if p.Scheduled && (len(p.States) > 1 || len(p.States) == 1 && p.States[0] != queue.StatePending) {
		errs = append(errs, invalid("scheduled jobs are PENDING: a states filter with it must be empty or PENDING"))
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
		c, err := decodeJobCursor(p.Cursor)
		switch {
		case err != nil:
			errs = append(errs, err)
		case c.Filter != p.filterHash():
			errs = append(errs, invalid("page_token belongs to a listing with other filters or order (queue, states, labels, type, times, sort)"))
		}
		cursor = &c
	}
	if err := errors.Join(errs...); err != nil {
		return 0, nil, err
	}
	return limit, cursor, nil
}

// Validate checks p and returns the effective limit.
func (p JobPeekParams) Validate() (limit int, err error) {
	if err := queue.ValidateQueueName(p.Queue); err != nil {
		return 0, err
	}
	switch {
	case p.Limit == 0:
		return DefaultPeekLimit, nil
	case p.Limit < 0 || p.Limit > MaxPeekLimit:
		return 0, invalid("peek limit %d: want 1..%d", p.Limit, MaxPeekLimit)
	}
	return p.Limit, nil
}

// Validate checks p.
func (p JobPurgeDeadLettersParams) Validate() error {
	if p.Queue == "" {
		return nil
	}
	return queue.ValidateQueueName(p.Queue)
}

// Validate checks p — first that its state may be deleted (ErrIllegalTransition, before any I/O),
// then the id — and returns the canonical job id.
func (p JobDeleteParams) Validate() (id string, err error) {
	if err := queue.Delete(p.State); err != nil {
		return "", err
	}
	return ParseJobID(p.ID)
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
		if !p.ExpiresAt.IsZero() {
			errs = append(errs, invalid("expires_at is only set on the way to PENDING"))
		}
		if p.ResetRetries {
			errs = append(errs, invalid("retries are only reset on the way to PENDING"))
		}
	}
	return id, errors.Join(errs...)
}

// Validate checks a registration: the worker id, hostname and version (UTF-8 without control
// characters, at most MaxHostnameLen and MaxVersionLen bytes; both may be empty), a concurrency of
// 1..MaxWorkerConcurrency, 1..MaxWorkerQueues distinct valid queue names and at most
// MaxWorkerTypes distinct valid job types.
func (p WorkerRegisterParams) Validate() error {
	var errs []error
	if err := ValidateWorkerID(p.ID); err != nil {
		errs = append(errs, err)
	}
	if len(p.Hostname) > MaxHostnameLen || !isText(p.Hostname) {
		errs = append(errs, invalid("hostname %s: want at most %d bytes without control characters", queue.Excerpt(p.Hostname), MaxHostnameLen))
	}
	if len(p.Version) > MaxVersionLen || !isText(p.Version) {
		errs = append(errs, invalid("version %s: want at most %d bytes without control characters", queue.Excerpt(p.Version), MaxVersionLen))
	}
	if p.Concurrency < 1 || p.Concurrency > MaxWorkerConcurrency {
		errs = append(errs, invalid("concurrency %d: want 1..%d", p.Concurrency, MaxWorkerConcurrency))
	}
	if len(p.Queues) < 1 || len(p.Queues) > MaxWorkerQueues {
		errs = append(errs, invalid("queues: want 1..%d names, got %d", MaxWorkerQueues, len(p.Queues)))
	}
	seen := make(map[string]bool, len(p.Queues))
	for _, q := range p.Queues {
		if err := queue.ValidateQueueName(q); err != nil {
			errs = append(errs, err)
			break
		}
		if seen[q] {
			errs = append(errs, invalid("queues: %s is listed twice", queue.Excerpt(q)))
			break
		}
		seen[q] = true
	}
	if err := validateWorkerTypes(p.Types); err != nil {
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}

// validateWorkerTypes checks the job types a worker handles: at most MaxWorkerTypes distinct
// valid types.
func validateWorkerTypes(types []string) error {
	if len(types) > MaxWorkerTypes {
		return invalid("types: want at most %d, got %d", MaxWorkerTypes, len(types))
	}
	seen := make(map[string]bool, len(types))
	for _, t := range types {
		if err := ValidateJobType("types", t); err != nil {
			return err
		}
		if seen[t] {
			return invalid("types: %s is listed twice", queue.Excerpt(t))
		}
		seen[t] = true
	}
	return nil
}

// Validate checks a heartbeat.
func (p WorkerHeartbeatParams) Validate() error {
	var errs []error
	if err := ValidateWorkerID(p.ID); err != nil {
		errs = append(errs, err)
	}
	if len(p.Breakers) > MaxWorkerQueues {
		errs = append(errs, invalid("breakers: want at most %d, got %d", MaxWorkerQueues, len(p.Breakers)))
	}
	seen := make(map[string]bool, len(p.Breakers))
	for _, b := range p.Breakers {
		if err := queue.ValidateQueueName(b.Queue); err != nil {
			errs = append(errs, err)
		} else if seen[b.Queue] {
			errs = append(errs, invalid("breakers: queue %q listed twice", b.Queue))
		}
		seen[b.Queue] = true
		if !b.State.Valid() {
			errs = append(errs, invalid("breaker of queue %s: unknown state %s", queue.Excerpt(b.Queue), queue.Excerpt(string(b.State))))
		}
		if !(b.FailureRate >= 0 && b.FailureRate <= 1) || b.Samples < 0 {
			errs = append(errs, invalid("breaker of queue %s: failure rate %v, samples %d: want 0..1 and 0 or more",
				queue.Excerpt(b.Queue), b.FailureRate, b.Samples))
		}
	}
	return errors.Join(errs...)
}

// Validate checks a status change.
func (p WorkerSetStatusParams) Validate() error {
	if err := ValidateWorkerID(p.ID); err != nil {
		return err
	}
	if !p.Status.Valid() {
		return invalid("unknown worker status %s", queue.Excerpt(string(p.Status)))
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

// Validate checks the claim before any I/O.
func (p JobClaimParams) Validate() error {
	var errs []error
	if err := queue.ValidateQueueName(p.Queue); err != nil {
		errs = append(errs, err)
	}
	if err := ValidateWorkerID(p.WorkerID); err != nil {
		errs = append(errs, err)
	}
	if p.Limit < 1 || p.Limit > MaxDispatchBatch {
		errs = append(errs, invalid("limit %d is outside 1..%d", p.Limit, MaxDispatchBatch))
	}
	if err := validateWorkerTypes(p.Types); err != nil {
		errs = append(errs, err)
	}
	if len(p.Levels) > queue.MaxPriority-queue.MinPriority+1 {
		errs = append(errs, invalid("%d level quotas: at most one per priority", len(p.Levels)))
	}
	seen := map[int]bool{}
	for _, l := range p.Levels {
		if l.Priority < queue.MinPriority || l.Priority > queue.MaxPriority || l.Max < 0 || l.Max > p.Limit || seen[l.Priority] {
			errs = append(errs, invalid("level quota %d=%d: want a priority %d..%d once and 0..limit jobs",
				l.Priority, l.Max, queue.MinPriority, queue.MaxPriority))
		}
		seen[l.Priority] = true
	}
	if p.MaxWait < 0 || p.MaxWait > MaxDuration {
		errs = append(errs, invalid("max_wait %v: want 0..%v", p.MaxWait, MaxDuration))
	}
	return errors.Join(errs...)
}

// Validate checks what concerns the whole assignment. Malformed ids are not an error: the backend
// skips them (see DispatchStore.JobAssignMany).
func (p JobAssignParams) Validate() error {
	var errs []error
	if err := ValidateWorkerID(p.WorkerID); err != nil {
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
	if err := ValidateWorkerID(l.WorkerID); err != nil {
		return "", err
	}
	return id, nil
}

// ValidFailureReason accepts a reason of at most MaxFailureReasonLen characters of a-z, 0-9 and _
// (empty means queue.DefaultFailureReason).
func ValidFailureReason(r string) bool {
	if len(r) > MaxFailureReasonLen {
		return false
	}
	for i := 0; i < len(r); i++ {
		if c := r[i]; (c < 'a' || c > 'z') && (c < '0' || c > '9') && c != '_' {
			return false
		}
	}
	return true
}

// trimFailureError cuts a worker's error text to MaxFailureErrorLen bytes at a rune boundary,
// marking the cut with "…": a long text is kept in part rather than refused (the report must land,
// or the job waits for its timeout). Line breaks stay (error texts are often stack traces); the
// backends replace what they cannot store (NUL, invalid UTF-8).
func trimFailureError(s string) string {
	if len(s) <= MaxFailureErrorLen {
		return s
	}
	const mark = "…"
	cut := MaxFailureErrorLen - len(mark)
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut] + mark
}

// ValidateDispatchBatch refuses a DispatchStore batch of more than MaxDispatchBatch items.
func ValidateDispatchBatch(n int) error {
	if n > MaxDispatchBatch {
		return invalid("batch of %d items exceeds %d", n, MaxDispatchBatch)
	}
	return nil
}
