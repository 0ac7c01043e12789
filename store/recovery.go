package store

import (
	"context"
	"time"

	"github.com/jq-dev/jq/queue"
)

// Failure reasons recorded by the server itself (failure_reason and the event reason). A worker's
// failure report carries its own (DefaultFailureReason when it names none).
const (
	ReasonAssignmentTimeout = "assignment_timeout" // ASSIGNED and not acked in time (FR-016)
	ReasonTimeout           = "timeout"            // RUNNING past its timeout plus the grace
	ReasonWorkerLost        = "worker_lost"        // the holder went OFFLINE (FR-020)
	ReasonCancelled         = "cancelled"          // CancelJob (FR-012)
	ReasonTTLExpired        = "ttl_expired"        // PENDING past its TTL (FR-004)
	ReasonRetry             = "retry"              // FAILED→PENDING by the retry sweep (FR-033)
	ReasonMaxRetries        = "max_retries_exceeded"
	ReasonPermanent         = "permanent_failure" // the handler said do not retry
	ReasonManualRetry       = "manual_retry"      // RetryJob (FR-013)
)

// RecoveryStore holds the reaper's statements (issue 4, SPEC I3–I6). Every write is a
// compare-and-set on state and attempt: a job that moved on meanwhile is never overwritten.
// Liveness is judged by the store's clock (now() of the database), never by the caller's.
type RecoveryStore interface {
	// JobOverdue returns up to p.Limit leases the reaper must fail, oldest first: ASSIGNED for longer
	// than p.AssignmentTimeout (reason assignment_timeout); RUNNING past started_at + the job's
	// timeout + p.Grace (reason timeout); and, only when p.WorkersLost, ASSIGNED or RUNNING jobs
	// whose worker is OFFLINE or unknown (reason worker_lost). It takes no locks.
	JobOverdue(ctx context.Context, p JobOverdueParams) ([]OverdueLease, error)
	// JobFailMany moves each lease ASSIGNED|RUNNING→FAILED when the job is in that state at that
	// attempt (the lease's worker is recorded but not compared: the reaper fails whoever holds the
	// attempt), with the reason and error, one statement and one event per job. One outcome per
	// lease, in order; a lease that moved on gets ErrStaleAttempt.
	JobFailMany(ctx context.Context, fails []JobFailParams) ([]LeaseOutcome, error)
	// JobRetryFailed settles up to limit FAILED jobs, oldest first: FAILED→PENDING with
	// retry_count+1 and not_before = now + backoff (the queue's RetryPolicy with jitter, FR-033)
	// while retries remain; FAILED→DEAD_LETTERED otherwise (FR-034), at once for a permanent
	// failure or a cancelled job. Concurrent sweeps skip each other's rows.
	JobRetryFailed(ctx context.Context, limit int) (RetrySweep, error)
	// JobExpireTTL moves up to limit PENDING jobs whose expires_at passed to DEAD_LETTERED with
	// reason ttl_expired and returns how many, by queue (no entry for a queue with none).
	JobExpireTTL(ctx context.Context, limit int) (map[string]int, error)
	// WorkerMarkLost marks OFFLINE every ONLINE or DRAINING worker whose last heartbeat is older than
	// timeout and returns their ids. Their jobs are left to JobOverdue (WorkersLost).
	WorkerMarkLost(ctx context.Context, timeout time.Duration) ([]string, error)
	// JobLeasesToCancel returns, among a worker's held leases (as its heartbeat lists them), the ids
	// the worker should stop: leases that are no longer current (another state, attempt or worker;
	// the job gone) and jobs whose cancellation was requested. An ASSIGNED or RUNNING lease of that
	// worker at that attempt without a cancel request is kept.
	JobLeasesToCancel(ctx context.Context, workerID string, leases []JobLease) ([]string, error)
	// JobHeldBy returns the ids of the jobs ASSIGNED to or RUNNING on a worker (in-flight list
	// reconciliation).
	JobHeldBy(ctx context.Context, workerID string) ([]string, error)
}

// OperatorStore holds the operator's job and worker actions (FR-012, FR-013, FR-023, FR-024).
type OperatorStore interface {
	// JobCancel cancels a job: PENDING, ASSIGNED or FAILED → DEAD_LETTERED with reason cancelled;
	// RUNNING → cancel_requested is set (the worker is told by its next heartbeat, and the failure
	// that follows dead-letters the job); a job already cancel-requested stays so. The job is
	// returned as it now stands. Errors: ErrJobNotFound, ErrInvalidArgument (malformed id),
	// ErrIllegalTransition (DONE or DEAD_LETTERED: nothing to cancel).
	JobCancel(ctx context.Context, id string) (*queue.Job, error)
	// JobRetry moves a FAILED or DEAD_LETTERED job back to PENDING, due now, with retry_count 0 and
	// the permanent and cancel flags cleared (FR-013). Errors: ErrJobNotFound, ErrInvalidArgument,
	// ErrIllegalTransition (any other state).
	JobRetry(ctx context.Context, id string) (*queue.Job, error)
	// JobConsumeResult returns a DONE job's kept result and deletes it in the same step (fetch-once,
	// S1): of concurrent callers exactly one gets taken = true with the result; later calls get
	// taken = false and the job as it stands. Errors: ErrJobNotFound, ErrInvalidArgument.
	JobConsumeResult(ctx context.Context, id string) (job *queue.Job, taken bool, err error)
	// WorkerRequestShutdown marks a worker DRAINING with shutdown requested: its heartbeat answers
	// SHUTDOWN from now on. Idempotent. Errors: ErrWorkerNotFound, ErrIllegalTransition (OFFLINE).
	WorkerRequestShutdown(ctx context.Context, id string) (*queue.Worker, error)
}

// JobOverdueParams selects the leases the reaper fails.
type JobOverdueParams struct {
	AssignmentTimeout time.Duration // > 0
	Grace             time.Duration // >= 0, added to each job's own timeout
	WorkersLost       bool          // also jobs of OFFLINE or unknown workers
	Limit             int           // 1..MaxDispatchBatch
}

// OverdueLease is a lease the reaper is to fail, with the reason.
type OverdueLease struct {
	JobLease
	Queue  string
	State  queue.State // ASSIGNED or RUNNING
	Reason string      // ReasonAssignmentTimeout, ReasonTimeout or ReasonWorkerLost
}

// JobFailParams fails one lease on the server's initiative.
type JobFailParams struct {
	JobLease // WorkerID: recorded on the event only
	Reason   string
	Error    string
}

// RetrySweep is what one JobRetryFailed call did.
type RetrySweep struct {
	Retried      int            // FAILED→PENDING
	DeadLettered int            // FAILED→DEAD_LETTERED
	Queues       map[string]int // jobs made PENDING per queue (to wake schedulers)
	// DeadQueues is DeadLettered per queue (metrics); nil or no entry when none.
	DeadQueues map[string]int
}
