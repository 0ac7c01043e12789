package apiserver

import (
	"fmt"
	"time"

	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/jq-dev/jq/api"
	jqv1 "github.com/jq-dev/jq/api/gen/jq/v1"
	"github.com/jq-dev/jq/queue"
	"github.com/jq-dev/jq/store"
)

// Request validation: where a request message becomes store parameters. What only the wire knows
// is checked here (a field's presence, a duration's encoding, enum values, page and batch sizes,
// the configured payload limit); the limits of jobs, queues, workers and listings themselves are
// store's Validate methods (store/validate.go), which this calls before any I/O and the store's
// wrapper (store/storewrap) calls again. Every refusal wraps queue.ErrInvalidArgument (INVALID_ARGUMENT, see errors.go) with a
// one-line message that quotes at most queue.MaxExcerpt bytes of the input; nothing is written.

// Request-level limits of the contract (api/proto/jq/v1).
const (
	maxSubmitBatchJobs = 1000
	maxLeasesPerCall   = 1000
	defaultPageSize    = store.DefaultListLimit
	maxPageSize        = store.MaxListLimit
)

// specToParams validates one JobSpec and converts it (api.JobSpecParams).
func specToParams(spec *jqv1.JobSpec, maxPayload int, now time.Time) (store.JobInsertParams, error) {
	return api.JobSpecParams(spec, maxPayload, now)
}

// positiveDuration reads an optional duration (api.OptionalDuration).
var positiveDuration = api.OptionalDuration

// submitBatch checks the size of a SubmitJobs batch.
func submitBatch(n int) error {
	if n == 0 || n > maxSubmitBatchJobs {
		return invalid(fmt.Sprintf("jobs: want 1..%d, got %d", maxSubmitBatchJobs, n))
	}
	return nil
}

func validJobID(id string) error {
	_, err := store.ParseJobID(id)
	return err
}

// listParams converts a ListJobs request. Every state must be a known one: an unknown value (a
// newer client's, or a typo) would otherwise filter by nothing and list everything.
func listParams(m *jqv1.ListJobsRequest) (store.JobListParams, error) {
	p := store.JobListParams{Queue: m.GetQueue(), Labels: m.GetLabels(), Cursor: m.GetPageToken(), Limit: int(m.GetPageSize()),
		Type: m.GetType(), Scheduled: m.GetScheduled()}
	for _, t := range []struct {
		name string
		ts   *timestamppb.Timestamp
		dst  *time.Time
	}{{"created_after", m.GetCreatedAfter(), &p.CreatedAfter}, {"created_before", m.GetCreatedBefore(), &p.CreatedBefore},
		{"completed_after", m.GetCompletedAfter(), &p.CompletedAfter}, {"completed_before", m.GetCompletedBefore(), &p.CompletedBefore}} {
		if t.ts == nil {
			continue
		}
		if err := t.ts.CheckValid(); err != nil {
			return p, invalid(fmt.Sprintf("%s: %v", t.name, err))
		}
		*t.dst = t.ts.AsTime()
	}
	switch {
	case p.Limit == 0:
		p.Limit = defaultPageSize
	case p.Limit < 0 || p.Limit > maxPageSize:
		return p, invalid(fmt.Sprintf("page_size %d: want 1..%d (0 means %d)", p.Limit, maxPageSize, defaultPageSize))
	}
	for i, st := range m.GetStates() {
		s, ok := api.StateFromProto(st)
		if !ok {
			return p, invalid(fmt.Sprintf("states[%d]: %d is not a job state (want JOB_STATE_PENDING..JOB_STATE_DEAD_LETTERED)", i, int32(st)))
		}
		p.States = append(p.States, s)
	}
	if _, _, err := p.Validate(); err != nil {
		return p, err
	}
	return p, nil
}

// queueParams converts a CreateQueue request.
func queueParams(m *jqv1.CreateQueueRequest) (store.QueueCreateParams, error) {
	p := store.QueueCreateParams{Name: m.GetName()}
	if m.MaxRetries != nil {
		n := int(m.GetMaxRetries())
		p.MaxRetries = &n
	}
	for _, d := range []struct {
		name string
		v    *durationpb.Duration
		dst  *time.Duration
	}{{"ttl", m.GetTtl(), &p.TTL}, {"backoff_base", m.GetBackoffBase(), &p.BackoffBase}, {"backoff_max", m.GetBackoffMax(), &p.BackoffMax},
		{"result_retention", m.GetResultRetention(), &p.ResultRetention}, {"max_wait", m.GetMaxWait(), &p.MaxWait}} {
		if err := positiveDuration(d.name, d.v, d.dst); err != nil {
			return p, err
		}
	}
	if len(m.GetPriorityWeights()) > 0 {
		p.PriorityWeights = make(map[int]int, len(m.GetPriorityWeights()))
		for prio, w := range m.GetPriorityWeights() {
			p.PriorityWeights[int(prio)] = int(w)
		}
	}
	if _, err := p.Queue(); err != nil {
		return p, err
	}
	return p, nil
}

// queueUpdateParams converts an UpdateQueue request: set fields change, zero durations are allowed
// (they remove or reset the setting, see the proto); every setting's rule is the store's, applied
// to the merged result.
func queueUpdateParams(m *jqv1.UpdateQueueRequest) (store.QueueUpdateParams, error) {
	p := store.QueueUpdateParams{Name: m.GetName()}
	if err := queue.ValidateQueueName(p.Name); err != nil {
		return p, err
	}
	if m.MaxRetries != nil {
		n := int(m.GetMaxRetries())
		p.MaxRetries = &n
	}
	for _, d := range []struct {
		name string
		v    *durationpb.Duration
		dst  **time.Duration
	}{{"ttl", m.GetTtl(), &p.TTL}, {"backoff_base", m.GetBackoffBase(), &p.BackoffBase}, {"backoff_max", m.GetBackoffMax(), &p.BackoffMax},
		{"result_retention", m.GetResultRetention(), &p.ResultRetention}, {"max_wait", m.GetMaxWait(), &p.MaxWait}} {
		if d.v == nil {
			continue
		}
		if err := d.v.CheckValid(); err != nil {
			return p, fmt.Errorf("%w: %s: not a valid duration", queue.ErrInvalidArgument, d.name)
		}
		v := d.v.AsDuration()
		*d.dst = &v
	}
	if w := m.GetPriorityWeights(); w != nil {
		p.PriorityWeights = make(map[int]int, len(w.GetWeights()))
		for prio, wt := range w.GetWeights() {
			p.PriorityWeights[int(prio)] = int(wt)
		}
	}
	return p, nil
}

// registerParams converts a RegisterWorker request. The worker's labels are not stored, but they
// are held to the documented limits all the same.
func registerParams(m *jqv1.RegisterWorkerRequest) (store.WorkerRegisterParams, error) {
	p := store.WorkerRegisterParams{
		ID: m.GetWorkerId(), Hostname: m.GetHostname(), Concurrency: int(m.GetConcurrency()),
		Queues: m.GetQueues(), Version: m.GetVersion(), Types: m.GetTypes(),
	}
	if err := p.Validate(); err != nil {
		return p, err
	}
	if err := store.ValidateLabels("labels", m.GetLabels()); err != nil {
		return p, err
	}
	return p, nil
}

func validWorkerID(id string) error {
	return store.ValidateWorkerID(id)
}

// heldLeases converts a heartbeat's leases.
func heldLeases(workerID string, ls []*jqv1.JobLease) ([]store.JobLease, error) {
	if err := validWorkerID(workerID); err != nil {
		return nil, err
	}
	if len(ls) > store.MaxDispatchBatch {
		return nil, invalid(fmt.Sprintf("running: at most %d leases, got %d", store.MaxDispatchBatch, len(ls)))
	}
	out := make([]store.JobLease, len(ls))
	for i, l := range ls {
		out[i] = store.JobLease{ID: l.GetJobId(), Attempt: int(l.GetAttempt()), WorkerID: workerID}
	}
	return out, nil
}

// leases converts the leases of an ack (or the leases of a report's items). A malformed job id or
// attempt is not a refusal of the call: the store answers it for that lease alone.
func leases(workerID string, ls []*jqv1.JobLease) ([]store.JobLease, error) {
	if err := validWorkerID(workerID); err != nil {
		return nil, err
	}
	if len(ls) == 0 || len(ls) > maxLeasesPerCall {
		return nil, invalid(fmt.Sprintf("want 1..%d items, got %d", maxLeasesPerCall, len(ls)))
	}
	out := make([]store.JobLease, len(ls))
	for i, l := range ls {
		out[i] = store.JobLease{ID: l.GetJobId(), Attempt: int(l.GetAttempt()), WorkerID: workerID,
			StartedAgo: durationOf(l.GetStartedAgo())}
	}
	return out, nil
}

// durationOf is a worker's duration, 0 when unset or malformed; the store bounds what it keeps
// (store.JobReportParams.Bounded).
func durationOf(d *durationpb.Duration) time.Duration {
	if !d.IsValid() {
		return 0
	}
	return d.AsDuration()
}

// reportParams converts a ReportJobs request. A failure's reason is a short machine word or the
// request is refused; its error text, runtime and retry delay are bounded by the store, not refused.
func reportParams(m *jqv1.ReportJobsRequest) ([]store.JobReportParams, error) {
	ls := make([]*jqv1.JobLease, len(m.GetReports()))
	for i, r := range m.GetReports() {
		ls[i] = &jqv1.JobLease{JobId: r.GetJobId(), Attempt: r.GetAttempt(), StartedAgo: r.GetStartedAgo()}
	}
	base, err := leases(m.GetWorkerId(), ls)
	if err != nil {
		return nil, err
	}
	reports := make([]store.JobReportParams, len(base))
	for i, r := range m.GetReports() {
		p := store.JobReportParams{JobLease: base[i]}
		switch o := r.GetOutcome().(type) {
		case *jqv1.JobReport_Success:
			p.Success, p.Result = true, o.Success.GetResult()
		case *jqv1.JobReport_Failure:
			if !store.ValidFailureReason(o.Failure.GetReason()) {
				return nil, invalid(fmt.Sprintf("reports[%d]: failure.reason %s: at most %d characters of a-z, 0-9 and _ (or empty)",
					i, queue.Excerpt(o.Failure.GetReason()), store.MaxFailureReasonLen))
			}
			p.Error, p.Reason, p.Permanent = o.Failure.GetError(), o.Failure.GetReason(), o.Failure.GetPermanent()
			p.RetryAfter = durationOf(o.Failure.GetRetryAfter())
		default:
			return nil, invalid(fmt.Sprintf("reports[%d]: outcome: success or failure required", i))
		}
		d := r.GetSuccess().GetRuntime()
		if d == nil {
			d = r.GetFailure().GetRuntime()
		}
		p.Runtime = durationOf(d)
		reports[i] = p
	}
	return reports, nil
}

// peekParams converts a PeekQueue request.
func peekParams(m *jqv1.PeekQueueRequest) (store.JobPeekParams, error) {
	p := store.JobPeekParams{Queue: m.GetQueue(), Limit: int(m.GetLimit()), Dead: m.GetDead()}
	if _, err := p.Validate(); err != nil {
		return p, err
	}
	return p, nil
}
