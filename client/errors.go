package client

import (
	"context"
	"errors"

	"connectrpc.com/connect"

	"github.com/jq-dev/jq/api/apierr"
)

// ErrUnavailable means the server could not be reached or could not complete the call (it is down,
// shutting down, or lost its database). Reads are safe to retry, and so are submits that carry an
// idempotency key. Every UNAVAILABLE answer matches it, whatever its reason.
var ErrUnavailable = apierr.ErrUnavailable

// Error is a call the server refused or could not complete. Its message is the server's, prefixed
// with the call; errors.Is matches the sentinel the server named with the error's reason (the
// ErrorInfo detail, looked up in the API's one error table, api/apierr), and errors.As finds the
// *connect.Error (code, details, metadata).
type Error struct {
	// Op is the call: "submit", "get job", "cancel job", …; empty for [CallError] without one.
	Op string
	// Sentinel is the error the server's reason stands for: a queue sentinel, [ErrUnavailable] or a
	// context error; nil when the answer carries no reason of jq's (an error of the transport or a
	// proxy).
	Sentinel error
	// Err is the *connect.Error of the call.
	Err *connect.Error
	// class is what the code says whatever the reason: [ErrUnavailable] for UNAVAILABLE, the
	// context's error for CANCELED and DEADLINE_EXCEEDED (those also arise in the transport, with no
	// reason); nil when Sentinel already says it.
	class error
}

func (e *Error) Error() string {
	if e.Op == "" {
		return e.Err.Error()
	}
	msg := e.Err.Message()
	if msg == "" {
		msg = e.Err.Code().String()
	}
	return e.Op + ": " + msg
}

// Unwrap returns the sentinel, the code's class and the connect error.
func (e *Error) Unwrap() []error {
	errs := make([]error, 0, 3)
	for _, err := range []error{e.Sentinel, e.class} {
		if err != nil {
			errs = append(errs, err)
		}
	}
	return append(errs, e.Err)
}

// The calls' names, the prefix of their errors' messages.
const (
	opSubmit = "submit"
	opGet    = "get job"
	opResult = "get job result"
	opCancel = "cancel job"
	opRetry  = "retry job"
	opDelete = "delete job"
)

// CallError is the error of a call made through [Client.API] as the client's own methods return
// theirs: an *Error whose errors.Is matches the sentinel of the server's reason. op names the call in
// the message; with op empty the message is the connect error's own. Errors that are not connect
// errors pass through, and so does nil.
func CallError(op string, err error) error {
	if err == nil {
		return nil
	}
	var ce *connect.Error
	if !errors.As(err, &ce) {
		return err
	}
	if e, ok := errors.AsType[*Error](err); ok && e.Err == ce {
		return err
	}
	sentinel := apierr.Sentinel(ce)
	var class error
	switch ce.Code() {
	case connect.CodeUnavailable:
		class = ErrUnavailable
	case connect.CodeCanceled:
		class = context.Canceled
	case connect.CodeDeadlineExceeded:
		class = context.DeadlineExceeded
	}
	if class != nil && (errors.Is(err, class) || errors.Is(sentinel, class)) {
		class = nil
	}
	return &Error{Op: op, Sentinel: sentinel, Err: ce, class: class}
}
