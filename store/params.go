package store

import (
	"time"

	"github.com/jq-dev/jq/queue"
)

// QueueCreateParams describes a new queue. Zero fields take the queue defaults.
type QueueCreateParams struct {
	Name            string
	MaxRetries      *int          // nil: queue.DefaultMaxRetries
	TTL             time.Duration // default job TTL; 0: none
	PriorityWeights map[int]int   // priority (0–9) → weight (> 0); empty: strict priority
	BackoffBase     time.Duration // 0: queue.DefaultBackoffBase
	BackoffMax      time.Duration // 0: queue.DefaultBackoffMax; must be ≥ BackoffBase
	ResultRetention time.Duration // 0: queue.DefaultResultRetention; at least 1 ms
	MaxWait         time.Duration // aging bound (queue.Queue.MaxWait); 0: none; else 1ms..MaxDuration
}

// QueueUpdateParams changes an existing queue's settings: a nil field keeps the current value. The
// result is validated as a create with the same settings would be (QueueCreateParams.Queue): a zero
// TTL or MaxWait removes it, a zero BackoffBase, BackoffMax or ResultRetention takes the default, an
// empty (non-nil) PriorityWeights means strict priority.
type QueueUpdateParams struct {
	Name            string
	MaxRetries      *int
	TTL             *time.Duration
	PriorityWeights map[int]int // nil: keep; empty: strict priority
	BackoffBase     *time.Duration
	BackoffMax      *time.Duration
	ResultRetention *time.Duration
	MaxWait         *time.Duration
}

// QueueDeleteParams names the queue to delete. Force also deletes its jobs.
type QueueDeleteParams struct {
	Name  string
	Force bool
}

// QueueSetPausedParams pauses (Paused) or resumes a queue.
type QueueSetPausedParams struct {
	Name   string
	Paused bool
}

// JobInsertParams is one job to submit.
type JobInsertParams struct {
	ID         string // optional caller-chosen UUID; "": a new UUID v4
	Queue      string // must exist
	Type       string // handler name
	Payload    []byte
	Priority   int           // queue.MinPriority..queue.MaxPriority
	MaxRetries *int          // nil: the queue's max_retries
	TTL        time.Duration // 0: the queue's TTL (which may be none)
	Timeout    time.Duration // 0: queue.DefaultJobTimeout
	RunAt      time.Time     // zero: due at once

	// IdempotencyKey, when set, makes the submit idempotent per queue: see JobStore.JobInsertMany and
	// SpecHash.
	IdempotencyKey string
	Labels         map[string]string
	KeepResult     bool
	TraceContext   map[string]string
	// Principal is the submitting caller ("" with authentication off): producers see only their
	// own jobs.
	Principal string
	// Limits, when set, are the job's constraint entries computed at submit: the
	// engine keys the jobs of queues constraints apply to, so that claims pass over the jobs of a
	// key at its limit without computing anything. nil: computed by the first constrained claim
	// that reads the job.
	Limits *LimitKeys
}

// LimitKeys are a job's constraint entries (queue.LimitEntry) as computed with the constraint set
// of generation Gen.
type LimitKeys struct {
	Entries []string // none: no constraint of that generation matches the job
	Gen     int64
}

// JobInsertResult is the outcome of one JobInsertParams.
type JobInsertResult struct {
	Job *queue.Job
	// Existing: the idempotency key was taken by a job of the same spec, and Job is that job.
	Existing bool
}

// Page sizes of JobList.
const (
	DefaultListLimit = 20 // FR-032
	MaxListLimit     = 1000
)

// JobListParams filters and pages JobList. Empty filters match everything.
type JobListParams struct {
	Queue  string
	States []queue.State     // any of these
	Labels map[string]string // all of these
	// CancelledIn narrows the jobs of the states it names to those cancelled (true) or not
	// (false); jobs of other states are not affected. A job is cancelled when its cancellation
	// was requested (cancel_requested) or recorded (failure_reason "cancelled"): queue.Job.Cancelled. It lets a listing
	// tell apart what a FAILED or DEAD_LETTERED job is becoming (the taskqueue.v1 facade's
	// statuses) without reading every job.
	CancelledIn map[queue.State]bool
	// Principal, when set, lists only the jobs that principal submitted.
	Principal string
	// Type, when set, lists only the jobs of that type.
	Type string
	// CreatedAfter (inclusive) and CreatedBefore (exclusive) bound created_at; zero: unbounded.
	CreatedAfter, CreatedBefore time.Time
	// CompletedAfter (inclusive) and CompletedBefore (exclusive) bound completed_at (set when a
	// job became DONE or DEAD_LETTERED); a job that has not completed never matches either.
	CompletedAfter, CompletedBefore time.Time
	// Scheduled lists only the PENDING jobs not due yet (not_before after the store's now): delayed
	// submits and retries in their backoff. States must be empty or exactly PENDING with it.
	Scheduled bool
	// Ascending lists oldest first (created_at ASC, id ASC) instead of newest first. A cursor
	// continues only a listing in the same direction.
	Ascending bool
	Limit     int    // 0: DefaultListLimit; capped at MaxListLimit
	Cursor    string // NextCursor of the previous page; "": first page
	// WithData returns each job's payload and result; without it they are not even read (Payload
	// is empty, Result nil).
	WithData bool
	// MaxBytes ends the page early, with a NextCursor, before its jobs' encoded size (estimated from above) passes it;
	// the page still holds at least one job. 0: only Limit bounds the page.
	MaxBytes int
}

// JobListResult is one page of jobs, newest first (oldest first with Ascending).
type JobListResult struct {
	Jobs       []*queue.Job
	NextCursor string // "": no further page
}

// AnyAttempt in JobTransitionParams.Attempt skips the attempt check (operator actions, TTL expiry).
const AnyAttempt = -1

// JobTransitionParams is one compare-and-set state change.
//
// Field effects by target state:
//
//	→ASSIGNED       attempt+1 (the new fencing token), worker_id = WorkerID (required)
//	→RUNNING        started_at = now
//	→DONE           completed_at = now, result = Result, result_checksum = SHA-256 of Result
//	→FAILED         failure_reason = Reason, last_error = Error (when set)
//	→DEAD_LETTERED  completed_at = now, failure_reason = Reason, last_error = Error (when set)
//	→PENDING        not_before = NotBefore (zero: now), expires_at = ExpiresAt (zero: none; the
//	                caller computes it with queue.PendingExpiry), completed_at cleared;
//	                retry_count+1 from FAILED (an automatic retry), or 0 with ResetRetries (a
//	                manual retry, FR-013, which also clears no_retry and cancel_requested).
//	                worker_id keeps the last holder.
//
// The store computes no rule: NotBefore and ExpiresAt are the values queue's rules decided.
// Result, NotBefore, ExpiresAt and ResetRetries are refused with ErrInvalidArgument for other targets.
type JobTransitionParams struct {
	ID       string
	From, To queue.State
	// Attempt is the job's current attempt as the caller knows it; AnyAttempt skips the check.
	// Note that 0 is a real value: a never-dispatched job has attempt 0.
	Attempt int
	Reason  string // recorded on the event
	// WorkerID is the worker taking the job for →ASSIGNED; otherwise it is only recorded on the
	// event ("": the job's current worker).
	WorkerID     string
	Error        string
	NotBefore    time.Time
	ExpiresAt    time.Time
	ResetRetries bool
	Result       []byte
}

// WorkerRegisterParams describes a worker process registering (FR-018).
type WorkerRegisterParams struct {
	ID          string
	Hostname    string
	Concurrency int
	Queues      []string
	Version     string
	// Types are the job types the worker handles, at most MaxWorkerTypes distinct valid types;
	// none: every type. Dispatch hands the worker only jobs of these types (JobClaimParams.Types).
	Types []string
	// Principal is the registering caller ("" with authentication off). An id registered by
	// one principal cannot be registered by another: ErrPermissionDenied.
	Principal string
	// AnyOwner lets the caller (an admin) register an id another principal owns; the owner stays.
	AnyOwner bool
	// MaxOfPrincipal, when above 0 and Principal is set, refuses (queue.ErrLimitReached) a
	// registration while that many other workers of Principal are live (not OFFLINE). A principal
	// also holds at most that many rows: when one more would exceed it, its oldest OFFLINE rows are
	// deleted in the same transaction (their ids are free again, for any principal). The count and
	// the insert are one transaction, serialised per principal, so concurrent registrations cannot
	// overshoot.
	MaxOfPrincipal int
	// MaxLive, when above 0, refuses (queue.ErrLimitReached) a registration while that many
	// other workers of the whole cluster are live (not OFFLINE): server.max_workers. The count
	// and the insert are one transaction, serialised across the cluster, so concurrent
	// registrations on any number of replicas cannot overshoot.
	MaxLive int
	// OfflineRetention, when above 0, deletes the workers OFFLINE for longer in the same
	// transaction (a bounded batch each time): their ids are free again and no
	// longer count against their owner.
	OfflineRetention time.Duration
}

// WorkerCounts are the live (not OFFLINE) workers, for the registration limits.
type WorkerCounts struct {
	Live            int // in the cluster
	LiveOfPrincipal int // registered by the principal asked about
}

// WorkerHeartbeatParams record a worker's heartbeat.
type WorkerHeartbeatParams struct {
	ID string
	// Breakers replace the worker's recorded circuit breakers: those not closed, at most one
	// per queue (nil: all closed).
	Breakers []queue.QueueBreaker
}

// WorkerSetStatusParams sets a worker's status.
type WorkerSetStatusParams struct {
	ID     string
	Status queue.WorkerStatus
}

// MaxDispatchBatch bounds every DispatchStore batch: JobDueParams.Limit, and the number of ids,
// leases or reports in one call.
const MaxDispatchBatch = 10000
