package client

import (
	"context"
	"errors"

	"connectrpc.com/connect"

	"github.com/jq-dev/jq/queue"
)

// ErrUnavailable means the server could not be reached or could not complete the call (it is down,
// shutting down, or lost its database). Reads are safe to retry, and so are submits that carry an
// idempotency key.
var ErrUnavailable = errors.New("jq server unavailable")

// Error is a call the server refused or could not complete. Its message is the server's, prefixed
// with the call; errors.Is matches the sentinel its status code stands for in that call, and
// errors.As finds the *connect.Error (code, details, metadata).
type Error struct {
	// Op is the call: "submit", "get job", "cancel job", …
	Op string
	// Sentinel is the queue (or client) error the status code stands for; nil when none does.
	Sentinel error
	// Err is the *connect.Error of the call.
	Err *connect.Error
}

func (e *Error) Error() string {
	msg := e.Err.Message()
	if msg == "" {
		msg = e.Err.Code().String()
	}
	return e.Op + ": " + msg
}

// Unwrap returns the sentinel and the connect error.
func (e *Error) Unwrap() []error {
	if e.Sentinel == nil {
		return []error{e.Err}
	}
	return []error{e.Sentinel, e.Err}
}

// meaning says which sentinel the codes that depend on the call stand for.
type meaning struct {
	op           string
	notFound     error // NOT_FOUND
	precondition error // FAILED_PRECONDITION
}

// The calls, with what NOT_FOUND and FAILED_PRECONDITION mean for each (api/proto/jq/v1/job_service.proto).
var (
	opSubmit = meaning{"submit", queue.ErrQueueNotFound, queue.ErrIdempotencyConflict}
	opGet    = meaning{"get job", queue.ErrJobNotFound, nil}
	opResult = meaning{"get job result", queue.ErrJobNotFound, nil}
	opCancel = meaning{"cancel job", queue.ErrJobNotFound, queue.ErrIllegalTransition}
	// RetryJob's NOT_FOUND is also "its queue was deleted"; the job is what the caller named.
	opRetry  = meaning{"retry job", queue.ErrJobNotFound, queue.ErrIllegalTransition}
	opDelete = meaning{"delete job", queue.ErrJobNotFound, queue.ErrIllegalTransition}
)

// callError is the reverse of the server's error mapping (api/server/errors.go): the connect
// error of a call becomes an *Error carrying the matching sentinel. Errors that are not connect
// errors (the client's own) pass through.
func callError(m meaning, err error) error {
	if err == nil {
		return nil
	}
	var ce *connect.Error
	if !errors.As(err, &ce) {
		return err
	}
	var sentinel error
	switch ce.Code() {
	case connect.CodeInvalidArgument:
		sentinel = queue.ErrInvalidArgument
	case connect.CodeNotFound:
		sentinel = m.notFound
	case connect.CodeFailedPrecondition:
		sentinel = m.precondition
	case connect.CodeAlreadyExists:
		sentinel = queue.ErrQueueExists
	case connect.CodePermissionDenied:
		sentinel = queue.ErrPermissionDenied
	case connect.CodeUnauthenticated:
		sentinel = queue.ErrUnauthenticated
	case connect.CodeUnavailable:
		sentinel = ErrUnavailable
	case connect.CodeCanceled:
		if !errors.Is(err, context.Canceled) {
			sentinel = context.Canceled
		}
	case connect.CodeDeadlineExceeded:
		if !errors.Is(err, context.DeadlineExceeded) {
			sentinel = context.DeadlineExceeded
		}
	}
	return &Error{Op: m.op, Sentinel: sentinel, Err: ce}
}
