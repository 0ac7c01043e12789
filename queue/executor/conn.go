package executor

import (
	"context"
	"errors"
	"time"

	"github.com/jq-dev/jq/queue"
)

// Conn is the worker's side of the WorkerService protocol, without the
// transport. api/workerconn implements it over the jq API; tests use an
// in-memory server (package executortest).
//
// Errors: implementations wrap [ErrInvalid], [ErrUnknownWorker],
// [ErrWorkerInactive] or [ErrUnreachable] where they apply; anything else is
// treated as transient and retried.
type Conn interface {
	// Register announces the worker (again); leases it holds stay valid.
	Register(ctx context.Context, p RegisterParams) (Registration, error)
	// Stream opens the assignment stream. The stream lives until ctx ends,
	// the server ends it, or Close.
	Stream(ctx context.Context, p StreamParams) (Stream, error)
	// Ack moves assigned jobs to RUNNING; one result per lease, in order.
	Ack(ctx context.Context, p AckParams) ([]LeaseResult, error)
	// Report records outcomes; one result per report, in order.
	Report(ctx context.Context, p ReportParams) ([]LeaseResult, error)
	// Heartbeat reports liveness and held leases and returns instructions.
	Heartbeat(ctx context.Context, p HeartbeatParams) (HeartbeatReply, error)
	// Deregister ends the worker's registration.
	Deregister(ctx context.Context, p DeregisterParams) error
}

// Stream is an open assignment stream.
type Stream interface {
	// Recv blocks for the next message: an assignment, or nil for a
	// keepalive. io.EOF means the server ended the stream normally (it does
	// so when the worker is draining).
	Recv() (*Assignment, error)
	// Close releases the stream.
	Close() error
}

// Protocol errors a Conn reports, matched with errors.Is.
var (
	// ErrInvalid: the server rejected the request as malformed
	// (INVALID_ARGUMENT); repeating it cannot help.
	ErrInvalid = errors.New("request rejected as invalid")
	// ErrUnknownWorker: the server does not know this worker id (NOT_FOUND);
	// the worker registers again.
	ErrUnknownWorker = errors.New("worker not registered")
	// ErrWorkerInactive: the server considers the worker OFFLINE or DRAINING
	// (FAILED_PRECONDITION).
	ErrWorkerInactive = errors.New("worker offline or draining")
	// ErrNotAllowed: the server refused the worker's credentials (UNAUTHENTICATED) or what they
	// allow (PERMISSION_DENIED: another principal's worker id, a queue outside its list);
	// repeating it cannot help.
	ErrNotAllowed = errors.New("refused by the server's authentication")
	// ErrUnreachable: the server could not be reached or did not answer in
	// time (UNAVAILABLE, DEADLINE_EXCEEDED).
	ErrUnreachable = errors.New("server unreachable")
)

// MaxBatch is the most leases or reports one Ack or Report call carries (the
// API's limit).
const MaxBatch = 1000

// Failure reasons a worker reports (see Job.failure_reason).
const (
	ReasonError          = "error"
	ReasonTimeout        = "timeout"
	ReasonCancelled      = "cancelled"
	ReasonOutputTooLarge = "output_too_large"
	// ReasonLeaseExpired: the worker could not renew its lease in time (its server unreachable, or
	// the server unable to record the heartbeat) and stopped the job before it could be handed to
	// another worker (fence.go). Not the handler's failure: circuit breakers do not count it.
	ReasonLeaseExpired = "lease_expired"
)

// RegisterParams describe the registering worker.
type RegisterParams struct {
	WorkerID    string
	Hostname    string
	Version     string
	Concurrency int
	Queues      []string
	Labels      map[string]string
	// Types are the job types the worker handles; none: every type (Options.Types).
	Types []string
}

// Registration is the server's answer to Register.
type Registration struct {
	// HeartbeatInterval is how often to call Heartbeat; zero keeps the
	// worker's configured interval.
	HeartbeatInterval time.Duration
	// HeartbeatTimeout is how long the server waits before declaring the
	// worker lost.
	HeartbeatTimeout time.Duration
}

// StreamParams open an assignment stream.
type StreamParams struct {
	WorkerID string
	// Capacity is the number of free slots now, 1..concurrency: concurrency
	// minus the leases the worker still holds. (0 would mean "the full
	// concurrency" to the server, so the executor never sends it.)
	Capacity int
	// Prefetch is how many assignments the worker buffers beyond its concurrency.
	Prefetch int
}

// Assignment hands one job to the worker.
type Assignment struct {
	Job      *queue.Job
	Attempt  int       // the fencing token; equals Job.Attempt
	Deadline time.Time // ack by then or do not run the job; zero when unknown
}

// Lease names one attempt of one job.
type Lease struct {
	JobID   string
	Attempt int
	// StartedAgo (acks and reports, set by the executor when it sends them) is how long before the
	// call the handler started; 0 when it has not started (an ack of a prefetched job). The server
	// records the handler's start and end from it, whatever the batching.
	StartedAgo time.Duration
}

// AckParams acknowledge assignments.
type AckParams struct {
	WorkerID string
	Leases   []Lease
}

// Report is the outcome of one attempt.
type Report struct {
	Lease
	Success bool
	Result  []byte // Success
	// Failure fields.
	Error     string
	Reason    string // one of the Reason constants
	Permanent bool   // do not retry: dead-letter at once
	// RetryAfter is the least delay before the next attempt (queue.RetryAfter); 0: the queue's
	// backoff alone. Always 0 when Permanent.
	RetryAfter time.Duration
	Runtime    time.Duration
}

// ReportParams report finished attempts.
type ReportParams struct {
	WorkerID string
	Reports  []Report
}

// LeaseResult is the server's verdict on one lease or report. OK false is
// final: the job is no longer this worker's (for example "stale attempt").
type LeaseResult struct {
	JobID string
	OK    bool
	Error string
	// Redelivered is the executor's, not the server's: the item went out again after a call that
	// failed on the way, which may have reached the server and been applied.
	Redelivered bool
}

// HeartbeatParams report liveness and every held lease.
type HeartbeatParams struct {
	WorkerID string
	Running  []Lease
	// Breakers are the circuit breakers that are not closed: the server assigns no job of an
	// open queue and at most one at a time of a half-open queue.
	Breakers []queue.QueueBreaker
}

// Command is an operator instruction delivered by a heartbeat.
type Command int

// Commands.
const (
	CommandNone     Command = iota // keep working
	CommandDrain                   // take no new jobs, keep running
	CommandShutdown                // take no new jobs, finish, deregister and exit
)

func (c Command) String() string {
	switch c {
	case CommandDrain:
		return "drain"
	case CommandShutdown:
		return "shutdown"
	}
	return "none"
}

// HeartbeatReply carries the server's instructions.
type HeartbeatReply struct {
	Command      Command
	CancelJobIDs []string
}

// DeregisterParams name the leaving worker.
type DeregisterParams struct {
	WorkerID string
}
