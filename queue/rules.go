package queue

import (
	"fmt"
	"time"
)

// The rules of a job's life that are not a single edge of the transition table: what follows a
// failure, what a cancel or a manual retry does, when a PENDING job expires and when a held one is
// overdue. They are pure functions of the job, its queue's policy and the time, so every backend
// and every caller gets the same answer, and the stores only write the values decided here.

// Failure reasons decided by these rules (failure_reason and the event reason).
const (
	ReasonCancelled   = "cancelled"            // CancelJob (FR-012)
	ReasonRetry       = "retry"                // FAILED→PENDING after a backoff (FR-033)
	ReasonMaxRetries  = "max_retries_exceeded" // FAILED→DEAD_LETTERED with no retry left (FR-034)
	ReasonPermanent   = "permanent_failure"    // the handler said do not retry
	ReasonManualRetry = "manual_retry"         // RetryJob (FR-013)
	ReasonError       = "error"                // a handler's failure that names no cause
	ReasonTTLExpired  = "ttl_expired"          // PENDING past its TTL (FR-004)

	ReasonAssignmentTimeout = "assignment_timeout" // ASSIGNED and not acked in time (FR-016)
	ReasonTimeout           = "timeout"            // RUNNING past its timeout plus the grace
	ReasonWorkerLost        = "worker_lost"        // the holder went OFFLINE (FR-020)
)

// Reasons of the dispatch edges, recorded on their events; every store writes the same ones.
const (
	ReasonSubmitted = "submitted" // none→PENDING: the job's first event
	ReasonAssigned  = "assigned"  // PENDING→ASSIGNED by a claim
	ReasonAcked     = "acked"     // ASSIGNED→RUNNING by the worker's ack
	// ReasonImplicitAck marks the ASSIGNED→RUNNING event a report writes for a job whose ack the
	// store had not seen.
	ReasonImplicitAck = "implicit_ack"
	ReasonSucceeded   = "succeeded" // RUNNING→DONE by a success report
	// DefaultFailureReason is the failure_reason (and event reason) of a failure report without one.
	DefaultFailureReason = ReasonError
)

// Decision is a state change decided by a rule: the next state and the values that go with it.
// The store writes them with a compare-and-set on the state (and attempt) the rule was given.
type Decision struct {
	From, To State
	Reason   string
	// NotBefore and ExpiresAt are set for →PENDING: when the job is due again, and when it
	// expires if still PENDING then (zero: no TTL).
	NotBefore time.Time
	ExpiresAt time.Time
	// ResetRetries: a manual retry gives the job its whole retry budget back and clears the
	// permanent and cancel flags.
	ResetRetries bool
	// FailureReason replaces the job's failure_reason when set: why a job was dead-lettered, where
	// its last failure said no more than "error".
	FailureReason string
}

// Retries reports whether the decision is an automatic retry.
func (d Decision) Retries() bool {
	return d.From == StateFailed && d.To == StatePending && !d.ResetRetries
}

// PendingExpiry is when a job that becomes due at notBefore expires if it is still PENDING: the TTL
// counts from when the job is due, again each time it returns to PENDING. Zero without a TTL.
func PendingExpiry(notBefore time.Time, ttl time.Duration) time.Time {
	if ttl <= 0 {
		return time.Time{}
	}
	return notBefore.Add(ttl)
}

// FailedJob is what the retry rule reads of a FAILED job.
type FailedJob struct {
	RetryCount, MaxRetries int
	NoRetry                bool          // the failure was permanent
	CancelRequested        bool          // the job was cancelled while it ran
	RetryAfter             time.Duration // the handler's Retry-After (0: none)
	TTL                    time.Duration
	Policy                 RetryPolicy // the queue's backoff
	Reason                 string      // the last failure's reason (failure_reason)
}

// FailedJobOf returns the retry rule's view of a job and its queue's policy.
func FailedJobOf(j *Job, p RetryPolicy) FailedJob {
	return FailedJob{RetryCount: j.RetryCount, MaxRetries: j.MaxRetries, NoRetry: j.NoRetry,
		CancelRequested: j.CancelRequested, TTL: j.TTL, Policy: p, Reason: j.FailureReason}
}

// SettleFailed decides what becomes of a FAILED job (FR-033, FR-034): a cancelled job and a
// permanent failure are dead-lettered at once, a job with no retry left too; otherwise the job is
// due again after the queue's backoff for its retry number (with jitter from rnd, see
// RetryPolicy.Backoff) or after the handler's Retry-After if that is later, and its TTL restarts.
// A dead-lettered job's failure_reason becomes why it was dead-lettered (cancelled, or
// permanent_failure or max_retries_exceeded where the failure said no more than "error"), so peek
// --dead and GetJob show it; a specific cause (timeout, output_too_large, worker_lost) is kept.
func SettleFailed(j FailedJob, now time.Time, rnd func() float64) Decision {
	d := Decision{From: StateFailed, To: StateDeadLettered}
	switch {
	case j.CancelRequested:
		d.Reason, d.FailureReason = ReasonCancelled, ReasonCancelled
	case j.NoRetry:
		d.Reason = ReasonPermanent
		if j.Reason == ReasonError {
			d.FailureReason = ReasonPermanent
		}
	case j.RetryCount >= j.MaxRetries:
		d.Reason = ReasonMaxRetries
		if j.Reason == ReasonError {
			d.FailureReason = ReasonMaxRetries
		}
	default:
		delay := max(j.Policy.Backoff(j.RetryCount, rnd), j.RetryAfter)
		d.To, d.Reason = StatePending, ReasonRetry
		d.NotBefore = now.Add(delay)
		d.ExpiresAt = PendingExpiry(d.NotBefore, j.TTL)
	}
	return d
}

// WillRetry reports whether SettleFailed sends the job back to PENDING.
func (j FailedJob) WillRetry() bool {
	return !j.CancelRequested && !j.NoRetry && j.RetryCount < j.MaxRetries
}

// Cancel decides what CancelJob does to a job in state s (FR-012): PENDING, ASSIGNED and FAILED jobs
// are dead-lettered with reason cancelled; a RUNNING job is only marked (request = true: its worker
// is told to stop, and the failure that follows dead-letters it); DONE and DEAD_LETTERED jobs have
// nothing to cancel (ErrIllegalTransition).
func Cancel(s State) (d Decision, request bool, err error) {
	if s == StateRunning {
		return Decision{From: s, To: s, Reason: ReasonCancelled}, true, nil
	}
	if err := CheckTransition(s, StateDeadLettered); err != nil || s == StateDeadLettered {
		return Decision{}, false, fmt.Errorf("%w: a %s job has nothing to cancel", ErrIllegalTransition, stateName(s))
	}
	return Decision{From: s, To: StateDeadLettered, Reason: ReasonCancelled}, false, nil
}

// ManualRetry decides an operator's retry (FR-013): a FAILED or DEAD_LETTERED job is due again now,
// with its retry budget back and its TTL restarted; any other state is ErrIllegalTransition.
func ManualRetry(s State, ttl time.Duration, now time.Time) (Decision, error) {
	if s != StateFailed && s != StateDeadLettered {
		return Decision{}, fmt.Errorf("%w: only a FAILED or DEAD_LETTERED job can be retried, this one is %s",
			ErrIllegalTransition, stateName(s))
	}
	if err := CheckTransition(s, StatePending); err != nil {
		return Decision{}, err
	}
	return Decision{From: s, To: StatePending, Reason: ReasonManualRetry, NotBefore: now,
		ExpiresAt: PendingExpiry(now, ttl), ResetRetries: true}, nil
}

// Delete decides whether an operator may delete a job in state s (DeleteJob): only a job no
// automatic process will touch again, DONE or DEAD_LETTERED (a cancelled job is DEAD_LETTERED).
// A PENDING, ASSIGNED, RUNNING or FAILED job could still be dispatched, reported or retried while
// its row vanished: it must be cancelled first (ErrIllegalTransition, saying so).
func Delete(s State) error {
	if s.Terminal() {
		return nil
	}
	return fmt.Errorf("%w: only a DONE or DEAD_LETTERED job can be deleted, this one is %s: cancel it first",
		ErrIllegalTransition, stateName(s))
}

// Deadlines are the limits the reaper enforces on jobs that a worker holds.
type Deadlines struct {
	// Assignment is how long an ASSIGNED job may wait for its worker's ack (FR-016).
	Assignment time.Duration
	// Grace is how long past its own timeout a RUNNING job waits for its worker's report.
	Grace time.Duration
}

// Default deadlines and heartbeat timings: the one place they are written.
const (
	DefaultAssignmentTimeout = 60 * time.Second
	DefaultTimeoutGrace      = 10 * time.Second
	DefaultHeartbeatInterval = 5 * time.Second
	DefaultHeartbeatTimeout  = 30 * time.Second
)

// AssignedBefore is the cutoff of the assignment deadline: a job ASSIGNED (last changed) before it
// is overdue at now.
func (d Deadlines) AssignedBefore(now time.Time) time.Time { return now.Add(-d.Assignment) }

// RunDeadline is when a job RUNNING since started with the given timeout is overdue.
func (d Deadlines) RunDeadline(started time.Time, timeout time.Duration) time.Time {
	return started.Add(timeout).Add(d.Grace)
}

// Overdue decides whether a held job must be failed at now and why: its worker is gone
// (workerLost), it was not acked within the assignment deadline, or it ran past its timeout plus
// the grace. ok is false for a job within its limits or not held.
func (d Deadlines) Overdue(j *Job, workerLost bool, now time.Time) (reason string, ok bool) {
	if j.State != StateAssigned && j.State != StateRunning {
		return "", false
	}
	switch {
	case workerLost:
		return ReasonWorkerLost, true
	case j.State == StateAssigned && j.UpdatedAt.Before(d.AssignedBefore(now)):
		return ReasonAssignmentTimeout, true
	case j.State == StateRunning && d.RunDeadline(j.StartedAt, j.Timeout).Before(now):
		return ReasonTimeout, true
	}
	return "", false
}
