package queue

import (
	"errors"
	"time"
)

// Sentinel errors. Stores and the engine return them, usually wrapped with details; callers test with
// errors.Is and the API maps each to one status code.
var (
	// ErrJobNotFound: no job has the given id.
	ErrJobNotFound = errors.New("job not found")
	// ErrQueueNotFound: no queue has the given name.
	ErrQueueNotFound = errors.New("queue not found")
	// ErrQueueExists: a queue with that name already exists.
	ErrQueueExists = errors.New("queue already exists")
	// ErrQueueNotEmpty: the queue still holds jobs and deletion was not forced.
	ErrQueueNotEmpty = errors.New("queue not empty")
	// ErrWorkerNotFound: no worker has the given id.
	ErrWorkerNotFound = errors.New("worker not found")
	// ErrIllegalTransition: the state change is not in the transition table.
	ErrIllegalTransition = errors.New("illegal state transition")
	// ErrStaleAttempt: a compare-and-set lost: the job is no longer in the expected state or attempt,
	// typically because another actor (reaper, another replica, a newer attempt) moved it first.
	ErrStaleAttempt = errors.New("stale job state or attempt")
	// ErrIdempotencyConflict: the idempotency key is already used by a job with a different spec.
	ErrIdempotencyConflict = errors.New("idempotency key reused with a different job spec")
	// ErrInvalidArgument: the request is malformed; always wrapped with what is wrong.
	ErrInvalidArgument = errors.New("invalid argument")
	// ErrPermissionDenied: the caller is known but may not do this (a worker id registered by
	// another principal, a queue outside the principal's list, a job submitted by someone else).
	ErrPermissionDenied = errors.New("permission denied")
	// ErrUnauthenticated: the caller could not be identified (no token or client certificate, or
	// one the server does not accept).
	ErrUnauthenticated = errors.New("unauthenticated")
	// ErrShutdown: the component is stopping; used as the cause when job contexts are cancelled.
	ErrShutdown = errors.New("shutting down")
	// ErrLimitReached: the caller holds as much of a bounded resource as it may (worker ids).
	ErrLimitReached = errors.New("limit reached")
	// ErrConstraintNotFound: no constraint has the given name.
	ErrConstraintNotFound = errors.New("constraint not found")
	// ErrConstraintExists: a constraint with that name already exists.
	ErrConstraintExists = errors.New("constraint already exists")
	// ErrWorkerLost: the worker was declared OFFLINE (no heartbeat within the timeout); its jobs went
	// back to the retry path and it must register again.
	ErrWorkerLost = errors.New("the worker was declared OFFLINE (no heartbeat within the timeout): register again")
	// ErrWorkerDraining: the worker is DRAINING and gets no new jobs; its assignment stream ends.
	ErrWorkerDraining = errors.New("the worker is DRAINING: no new jobs")
	// ErrSessionReplaced: the same worker opened a newer assignment stream, which ends the older one.
	ErrSessionReplaced = errors.New("the worker opened a newer assignment stream")
)

// RetryAfter marks err as retryable no earlier than d from now (an HTTP endpoint's Retry-After):
// the retry waits for the longer of d and the queue's backoff. A [Permanent] mark anywhere in the
// chain wins: the job is dead-lettered, not retried. RetryAfter(nil, d) is nil; d ≤ 0 leaves the
// backoff alone. errors.Is and errors.As see through the mark; [RetryAfterOf] reads it.
func RetryAfter(err error, d time.Duration) error {
	if err == nil {
		return nil
	}
	return &RetryAfterError{Err: err, After: max(d, 0)}
}

// RetryAfterError is the mark set by [RetryAfter].
type RetryAfterError struct {
	Err   error
	After time.Duration // the least delay before the next attempt; 0: the backoff alone
}

func (e *RetryAfterError) Error() string { return e.Err.Error() }
func (e *RetryAfterError) Unwrap() error { return e.Err }

// RetryAfterOf returns the delay err asks for with [RetryAfter]: 0 when it asks for none or is
// permanent (a permanent failure is not retried at all). The outermost mark counts.
func RetryAfterOf(err error) time.Duration {
	var ra *RetryAfterError
	if IsPermanent(err) || !errors.As(err, &ra) {
		return 0
	}
	return ra.After
}
