package queue

import "errors"

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
)
