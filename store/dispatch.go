package store

import (
	"context"
	"time"

	"github.com/jq-dev/jq/queue"
)

// This file is the contract of the hot path: the
// batched Postgres writes of dispatch, ack and report (DispatchStore), and the
// Redis dispatch structures (Dispatcher). Every method works on a batch; one
// call is one statement (Postgres) or one round trip (Redis).

// DueJob is a PENDING job whose not_before has passed, as the scheduler sees it.
type DueJob struct {
	ID        string
	Priority  int
	CreatedAt time.Time
}

// JobDueParams selects due jobs of one queue.
type JobDueParams struct {
	Queue string
	Limit int // 1..10000
}

// JobAssignParams moves claimed jobs PENDING→ASSIGNED for one worker.
type JobAssignParams struct {
	WorkerID string
	IDs      []string
}

// JobClaimParams claims due jobs of one queue for one worker.
type JobClaimParams struct {
	Queue    string
	WorkerID string
	Limit    int // 1..MaxDispatchBatch
	// Types, when not empty, restricts the claim to jobs of these types (the worker's registered
	// types, at most MaxWorkerTypes); jobs of other types stay PENDING, in place, for workers that
	// handle them. Empty: every type.
	Types []string

	// Weighted dispatch (queue.LevelScheduler; the engine decides, the store executes). With neither
	// Levels nor MaxWait the claim is the plain one, in dispatch order.
	//
	// MaxWait > 0: the claim first takes the due jobs that have waited at least MaxWait (their due
	// time, the later of created_at and not_before, at or before the store's now − MaxWait), oldest
	// due time first (then created_at, id), whatever their priority.
	MaxWait time.Duration
	// Levels: then, for each level in the order given, up to Max of its due jobs in FIFO order
	// (created_at, id), plus whatever the levels before it left of their quotas (work-conserving:
	// a level with fewer due jobs than its quota passes the rest on). Finally, what is left of Limit
	// goes to any due job in dispatch order (priority DESC, created_at, id): levels without a quota,
	// or more of the listed ones. Each priority at most once, each Max within 0..Limit.
	Levels []queue.LevelQuota

	// Expect (JobClaimConstrained) is the constraint set the caller believes in force (the engine's
	// cache). When it is the set in force, a store may take the constraints' locks and read their
	// use in its first round trip; when it is not, the store finds out under its lock and does it
	// again with the set in force. nil: no belief. JobClaim ignores it.
	Expect *queue.ConstraintSet
}

// Weighted reports whether the claim takes the weighted path (Levels or MaxWait).
func (p JobClaimParams) Weighted() bool { return len(p.Levels) > 0 || p.MaxWait > 0 }

// JobLease identifies one attempt of one job held by a worker.
type JobLease struct {
	ID       string
	Attempt  int
	WorkerID string
	// StartedAgo (acks and reports) is how long before the call the handler started, on the
	// worker's clock: the server records started_at as its own time minus it, so the time is the
	// handler's whatever the batching and without trusting the worker's wall clock. 0: at the call
	// (an ack), or the report's Runtime (a worker that does not say). At most MaxReportedRuntime.
	StartedAgo time.Duration
}

// MaxReportedRuntime bounds a reported Runtime or StartedAgo: past it the value is nonsense (a job's
// timeout is at most 24 h), and it only places started_at and completed_at, never before the
// assignment.
const MaxReportedRuntime = 48 * time.Hour

// JobReportParams is the outcome of one attempt.
type JobReportParams struct {
	JobLease
	Success bool
	Result  []byte // Success: stored with its SHA-256 checksum
	Error   string // !Success: the failure message
	Reason  string // !Success: error | timeout | cancelled | output_too_large | ...
	// Permanent (!Success): the handler said do not retry; the retry sweep dead-letters the job at
	// once (seed 001 should_retry=false).
	Permanent bool
	// RetryAfter (!Success, !Permanent): the next attempt starts no earlier than this long after the
	// report (the handler's queue.RetryAfter, e.g. an HTTP Retry-After); the retry sweep waits for
	// the longer of it and the queue's backoff. 0: the backoff alone. At most MaxRetryAfter.
	RetryAfter time.Duration
	// Runtime is how long the handler ran, as the worker measured it: completed_at is started_at
	// (see JobLease.StartedAgo) plus Runtime. A report for a job still ASSIGNED (its start never
	// acknowledged: a short job) also records the start, not earlier than the assignment.
	Runtime time.Duration
}

// LeaseOutcome says what happened to one item of a batch. Err is nil when the
// write applied; queue.ErrStaleAttempt when the job is no longer in the
// expected state at that attempt held by that worker; queue.ErrJobNotFound;
// or queue.ErrInvalidArgument for a malformed lease (id not a UUID, attempt
// outside 1..MaxInt32, worker id empty or not NUL-free UTF-8).
type LeaseOutcome struct {
	ID  string // the job id, canonical (lower case) unless malformed
	Err error
	// Job is the job after the write (nil when Err != nil), lean: without its payload, labels,
	// trace context and result (LeanJob), which nothing on the hot path needs and every report would
	// otherwise read back.
	Job *queue.Job
	// Started: this write moved the job ASSIGNED→RUNNING (an ack, or the ack a report implied);
	// false for a repeated ack that changed nothing. Job.StartedAt is then the start (metrics).
	Started bool
}

// DispatchStore holds the batched writes of the core loop. A batch longer
// than MaxDispatchBatch fails the call with ErrInvalidArgument; a bad item
// never does. Within one ack or report batch, the first occurrence of a job
// id is the one evaluated; later ones get ErrStaleAttempt (ErrJobNotFound
// when the job does not exist). Event reasons are the store.Reason…
// constants; a failure's event carries its failure reason and error.
type DispatchStore interface {
	// JobDue returns up to Limit due PENDING jobs of the queue in dispatch
	// order: priority DESC, created_at, id (FR-014). Jobs of a paused queue
	// are never due; an unknown queue has none. It takes no locks. Since
	// JobClaim dispatch does not call it: it is the order JobClaim
	// must follow, as the contract tests and the NFR-012 evaluation read it.
	JobDue(ctx context.Context, p JobDueParams) ([]DueJob, error)
	// JobAssignMany assigns named jobs; dispatch uses JobClaim instead, and
	// it remains for assigning given jobs (the contract tests' fixtures, the
	// statement benchmarks). It compare-and-sets each job PENDING→ASSIGNED, increments
	// its attempt (the fencing token), records worker_id, and writes the
	// events, all in one statement. It returns the jobs it assigned (full
	// rows, in the order of p.IDs); ids it could not assign (not PENDING any
	// more, unknown, malformed, or locked by a concurrent writer at that
	// instant) are simply absent, and a repeated id appears once.
	// Errors: ErrInvalidArgument (worker id, batch size).
	JobAssignMany(ctx context.Context, p JobAssignParams) ([]*queue.Job, error)
	// JobClaim is dispatch in one statement: it takes up to Limit due PENDING jobs of the queue in
	// dispatch order (priority DESC, created_at, id: FR-014), skipping rows a concurrent writer holds
	// (FOR NO KEY UPDATE SKIP LOCKED: claims of several sessions and replicas never wait for each
	// other and never take the same job), and compare-and-sets them PENDING→ASSIGNED for the worker
	// with attempt+1 (the fencing token) and their events. With p.Types it takes only jobs of those
	// types, in the same order, passing over the others. A paused queue, or an unknown one, yields
	// none. It returns the assigned jobs (full rows) in dispatch order. With p.MaxWait or p.Levels
	// (weighted dispatch) it takes the aged jobs, then the levels' quotas, then the rest, as
	// JobClaimParams says, and returns the jobs in the order taken. Errors: ErrInvalidArgument.
	JobClaim(ctx context.Context, p JobClaimParams) ([]*queue.Job, error)
	// JobAckMany moves each lease ASSIGNED→RUNNING (started_at = now) when the
	// job is ASSIGNED at that attempt to that worker; one statement for the
	// batch with its events. One outcome per lease, in order. Acks are
	// idempotent: a lease whose job is already RUNNING at that attempt for
	// that worker (a retried ack whose answer was lost) succeeds again without
	// a second event, so the worker runs the job instead of dropping it —
	// also when the retry lands in the same batch as the call it retries.
	JobAckMany(ctx context.Context, leases []JobLease) ([]LeaseOutcome, error)
	// JobReportMany applies outcomes: RUNNING→DONE (result, checksum,
	// completed_at) or RUNNING→FAILED (last_error, failure_reason). A report
	// for a job still ASSIGNED at that attempt implies its ack: the job goes
	// ASSIGNED→RUNNING→DONE/FAILED with both events. One statement per batch;
	// one outcome per report, in order. A failure without Reason records
	// queue.DefaultFailureReason; its Result is ignored.
	JobReportMany(ctx context.Context, reports []JobReportParams) ([]LeaseOutcome, error)
}

// InflightAddParams records jobs just assigned to one worker.
type InflightAddParams struct {
	Queue    string
	WorkerID string
	IDs      []string
	LockTTL  time.Duration // per-job lock lifetime (FR-015); > 0
}

// InflightParams names entries of one worker's in-flight list.
type InflightParams struct {
	Queue    string
	WorkerID string
	IDs      []string
}

// Dispatcher is the Redis side of dispatch (ARCHITECTURE.md): per-worker in-flight sets (the
// processing lists of the BRPOPLPUSH pattern; the atomic move itself is the Postgres claim,
// DispatchStore.JobClaim) and per-job locks. Redis is not the truth: losing everything here loses
// no job; the reaper recovers from Postgres.
type Dispatcher interface {
	// InflightAdd adds the ids to the worker's in-flight set and sets each job's lock (SET PX
	// LockTTL), in one round trip (one script), O(log n) per job.
	InflightAdd(ctx context.Context, p InflightAddParams) error
	// InflightRemove removes the ids from the worker's in-flight set and
	// releases their locks (after the attempt ended), O(log n) per job.
	InflightRemove(ctx context.Context, p InflightParams) error
	// InflightList returns the ids in the worker's in-flight set, oldest first.
	InflightList(ctx context.Context, queueName, workerID string) ([]string, error)
	// Counts returns, for each queue in order, the total size of its in-flight sets (admin stats;
	// a fast approximation, Postgres is the truth). It finds the sets with SCAN (never KEYS), so it
	// never blocks the server; an unknown queue counts zero. Ready is left 0: due jobs are counted
	// in Postgres.
	Counts(ctx context.Context, queues []string) ([]DispatchCounts, error)
	// Ping checks the connection.
	Ping(ctx context.Context) error
}

// Notifier carries "jobs became due in these queues" between server replicas
// (Postgres LISTEN/NOTIFY), so a submit on one replica wakes the schedulers of
// all of them at once instead of at their next tick.
type Notifier interface {
	// Notify announces due work in the queues.
	Notify(ctx context.Context, queues []string) error
	// Listen calls f with the queue of every notification until ctx ends or
	// the connection fails (the caller reconnects).
	Listen(ctx context.Context, f func(queueName string)) error
}

// Bounded is a worker's report as it is stored, whatever the transport that carried it: the error
// cut to MaxFailureErrorLen, RetryAfter kept only for a retryable failure and at most
// MaxRetryAfter, Runtime and StartedAgo within 0..MaxReportedRuntime. (A malformed failure reason
// is a refusal, not a bound: the transports check ValidFailureReason.)
func (r JobReportParams) Bounded() JobReportParams {
	r.JobLease = r.JobLease.Bounded()
	r.Runtime = boundReported(r.Runtime)
	if r.Success {
		r.Error, r.Permanent, r.RetryAfter = "", false, 0
		return r
	}
	r.Error = trimFailureError(r.Error)
	if r.Permanent {
		r.RetryAfter = 0
	}
	r.RetryAfter = min(max(r.RetryAfter, 0), MaxRetryAfter)
	return r
}

// Bounded is the lease with StartedAgo within 0..MaxReportedRuntime.
func (l JobLease) Bounded() JobLease {
	l.StartedAgo = boundReported(l.StartedAgo)
	return l
}

func boundReported(d time.Duration) time.Duration { return min(max(d, 0), MaxReportedRuntime) }
