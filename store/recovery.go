package store

import (
	"context"
	"time"

	"github.com/jq-dev/jq/queue"
)

// RecoveryStore holds the reaper's statements (I3, I4, I6). Every write is a
// compare-and-set on state and attempt: a job that moved on meanwhile is never overwritten.
// Liveness is judged by the store's clock (now() of the database), never by the caller's.
type RecoveryStore interface {
	// JobOverdue returns up to p.Limit held jobs that p.Deadlines make overdue at p.Now, oldest
	// first: ASSIGNED before p.Deadlines.AssignedBefore(p.Now); RUNNING with a RunDeadline before
	// p.Now; and, only when p.WorkersLost, ASSIGNED or RUNNING jobs whose worker is OFFLINE or
	// unknown (WorkerLost set). The reason is the caller's: queue.Deadlines.Overdue on what is
	// returned. It takes no locks.
	JobOverdue(ctx context.Context, p JobOverdueParams) ([]OverdueLease, error)
	// JobFailMany moves each lease ASSIGNED|RUNNING→FAILED when the job is in that state at that
	// attempt (the lease's worker is recorded but not compared: the reaper fails whoever holds the
	// attempt), with the reason and error, one statement and one event per job. One outcome per
	// lease, in order; a lease that moved on gets ErrStaleAttempt.
	JobFailMany(ctx context.Context, fails []JobFailParams) ([]LeaseOutcome, error)
	// JobSettleFailed settles up to limit FAILED jobs, oldest first: it locks them (concurrent
	// sweeps skip each other's rows), asks decide for each (queue.SettleFailed with the caller's
	// clock and jitter) and writes exactly what was decided in the same transaction —
	// FAILED→PENDING with retry_count+1 and the decided not_before and expires_at, or
	// FAILED→DEAD_LETTERED with the decided reason — one event per job. A decision for any other
	// edge fails the sweep with ErrIllegalTransition and writes nothing.
	JobSettleFailed(ctx context.Context, limit int, decide func(queue.FailedJob) queue.Decision) (RetrySweep, error)
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
	// JobRequestCancel sets cancel_requested on a job RUNNING at lease.Attempt (queue.Cancel of a
	// RUNNING job: the worker is told by its next heartbeat, and the failure that follows
	// dead-letters the job), without an event; asking again changes nothing. The job is returned
	// as it now stands. Errors: ErrJobNotFound, ErrInvalidArgument (malformed id), ErrStaleAttempt
	// (not RUNNING at that attempt any more).
	JobRequestCancel(ctx context.Context, lease JobLease) (*queue.Job, error)
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
	Deadlines   queue.Deadlines // Assignment > 0, Grace >= 0
	Now         time.Time       // the caller's clock
	WorkersLost bool            // also jobs of OFFLINE or unknown workers
	Limit       int             // 1..MaxDispatchBatch
}

// OverdueLease is a held job the reaper is to fail, with what the deadline rule reads.
type OverdueLease struct {
	JobLease
	Queue      string
	State      queue.State // ASSIGNED or RUNNING
	UpdatedAt  time.Time
	StartedAt  time.Time
	Timeout    time.Duration
	WorkerLost bool   // its worker is OFFLINE or unknown (only with WorkersLost)
	Reason     string // set by the caller from queue.Deadlines.Overdue
}

// JobFailParams fails one lease on the server's initiative.
type JobFailParams struct {
	JobLease // WorkerID: recorded on the event only
	Reason   string
	Error    string
}

// RetrySweep is what one JobSettleFailed call did.
type RetrySweep struct {
	Retried      int            // FAILED→PENDING
	DeadLettered int            // FAILED→DEAD_LETTERED
	Queues       map[string]int // jobs made PENDING per queue (to wake schedulers)
	// DeadQueues is DeadLettered per queue (metrics); nil or no entry when none.
	DeadQueues map[string]int
}
