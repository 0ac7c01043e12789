package queue

import (
	"crypto/sha256"
	"encoding/hex"
	"time"
)

// Priority bounds (FR-002): 9 is dispatched first; the default is 0.
const (
	MinPriority = 0
	MaxPriority = 9
)

// DefaultJobTimeout is a job's execution limit when the submitter sets none.
const DefaultJobTimeout = 30 * time.Second

// Job is one unit of work and everything the system records about it. Time fields are zero when unset.
type Job struct {
	ID       string // UUID v4
	Queue    string
	Type     string // the handler name
	Payload  []byte // opaque (FR-007)
	Priority int    // MinPriority..MaxPriority, higher first
	State    State

	MaxRetries int // automatic retries allowed after the first attempt
	RetryCount int // automatic retries used so far (see FAILED→PENDING)
	Attempt    int // dispatch count; the fencing token of the current assignment

	TTL       time.Duration // 0: never expires while PENDING
	Timeout   time.Duration // execution limit
	NotBefore time.Time     // not dispatched earlier: run_at, or the retry backoff
	ExpiresAt time.Time     // NotBefore+TTL while PENDING; zero without a TTL

	IdempotencyKey string
	Labels         map[string]string
	KeepResult     bool
	TraceContext   map[string]string // W3C trace context carried from the submitter

	WorkerID      string // the worker holding (or last holding) the job
	LastError     string
	FailureReason string // error | timeout | cancelled | worker_lost | ...
	// NoRetry: the last failure was permanent; the job is dead-lettered instead of retried.
	NoRetry bool
	// CancelRequested: CancelJob reached the job while it was RUNNING; its worker is told to stop.
	CancelRequested bool
	// Principal submitted the job ("" while authentication was off).
	Principal string

	// Result holds the bytes of a DONE job's result while they are retained: nil when the job was
	// submitted without KeepResult (only the checksum and size are stored), after a consuming
	// fetch, and once the queue's ResultRetention passed.
	Result         []byte
	ResultChecksum string // lowercase hex SHA-256 of the reported result, kept when its bytes are not
	ResultSize     int64  // length of the reported result, kept when its bytes are not

	CreatedAt   time.Time
	UpdatedAt   time.Time
	StartedAt   time.Time // start of the latest RUNNING
	CompletedAt time.Time // reaching DONE or DEAD_LETTERED

	// Progress is the running attempt's last reported progress (see Progress); nil when there
	// is none, and in every read but a single job's (GetJob): it is not a column of the job.
	Progress *JobProgress
	// Waiting says why a due PENDING job is not being taken (see Waiting); "" when a worker
	// takes it, and in every read but a single job's (GetJob): it is not a column of the job.
	Waiting string
}

// RetriesLeft reports whether an automatic retry is still allowed (FR-033/FR-034).
func (j *Job) RetriesLeft() bool { return j.RetryCount < j.MaxRetries }

// Cancelled reports whether the job's cancellation was requested or recorded (cancel_requested,
// or failure reason "cancelled"): the test of a job listing's cancelled filter.
func (j *Job) Cancelled() bool { return j.CancelRequested || j.FailureReason == ReasonCancelled }

// ResultKept reports whether the job holds a result to hand out: it is DONE and its result bytes
// are still stored (seed 001: kept until fetched with consume or until the retention passes).
func (j *Job) ResultKept() bool { return j.State == StateDone && j.Result != nil }

// WillRetry reports whether the server is going to retry the job on its own: it is FAILED, the
// failure was not permanent, it was not cancelled and retries remain. This is the decision of the
// retry sweep (FAILED → PENDING rather than DEAD_LETTERED), and seed 001's should_retry of a
// failure result; a DEAD_LETTERED job is never retried unless an operator asks.
func (j *Job) WillRetry() bool {
	return j.State == StateFailed && FailedJobOf(j, RetryPolicy{}).WillRetry()
}

// Event is one immutable state change of a job (FR-011); it is also the outbox record published to
// Kafka.
type Event struct {
	JobID    string
	Seq      int64 // 1..n per job, in order
	Queue    string
	Type     string
	From     State // empty for the first event (submission)
	To       State
	Reason   string
	Error    string // the failure message, for events into FAILED or DEAD_LETTERED
	WorkerID string
	Attempt  int
	At       time.Time
}

// Checksum returns the lowercase hex SHA-256 of a result, as stored in Job.ResultChecksum.
func Checksum(b []byte) string {
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:])
}
