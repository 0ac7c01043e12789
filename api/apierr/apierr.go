// Package apierr is the one table of the errors jq's API returns: for each sentinel, the status code
// and the machine-readable reason it crosses the wire with, as a google.rpc.ErrorInfo detail in the
// domain jq.dev. The server encodes with it (api/server) and the Go client decodes with it (client),
// so every reason names exactly one sentinel and no side infers a sentinel from a code or a message:
// several sentinels share a code (five are NOT_FOUND), none shares a reason.
//
// The codes are the API's compatibility promise and do not change; a new distinct error gets a new
// row with a new reason. docs/api.md lists the table.
package apierr

import (
	"context"
	"errors"

	"connectrpc.com/connect"
	"google.golang.org/genproto/googleapis/rpc/errdetails"

	"github.com/jq-dev/jq/queue"
)

// Domain is the ErrorInfo domain of jq's reasons; a detail of another domain is not jq's.
const Domain = "jq.dev"

// ErrUnavailable means the server could not complete the call (it is down, shutting down, or lost
// a dependency) and does not know whether a write took effect. Package client re-exports it, and
// also returns it when the server could not be reached at all.
var ErrUnavailable = errors.New("jq server unavailable")

// The errors only the API's edge returns: none is a store's or the engine's, so they live beside
// the table rather than in package queue.
var (
	// ErrRateLimited: the principal, or an address refused too often, is over its request rate.
	ErrRateLimited = errors.New("over the request rate")
	// ErrStreamLimit: as many long-lived streams (assignment, watch) are open as the server allows,
	// in all or for the principal.
	ErrStreamLimit = errors.New("stream limit reached")
	// ErrPagesBusy: the server is sending as many pages with payloads as it buffers at once.
	ErrPagesBusy = errors.New("too many pages with payloads in flight")
	// ErrResultNotRetained: the job is DONE but its output is not kept (taskqueue.v1 GetJobResult).
	ErrResultNotRetained = errors.New("result not retained")
	// ErrResultCorrupt: a stored result does not match its checksum.
	ErrResultCorrupt = errors.New("stored result does not match its checksum")
	// ErrConfirmRequired: a destructive call was sent without its confirmation flag.
	ErrConfirmRequired = errors.New("confirmation required")
	// ErrNotConfigured: this server does not run the component the call needs (Redis dispatcher,
	// schedules).
	ErrNotConfigured = errors.New("not configured on this server")
	// ErrDependencyUnavailable: a dependency of the server the call needs (Redis) does not answer.
	ErrDependencyUnavailable = errors.New("a dependency of the server is unavailable")
)

// Row is one error of the API: Err, matched with errors.Is, crosses the wire as Code with Reason.
type Row struct {
	Err    error
	Code   connect.Code
	Reason string
}

// Table is every error the API maps. The server takes the first row whose Err matches (errors.Is),
// so a more specific sentinel comes before one it may wrap; reasons are UPPER_SNAKE_CASE and unique.
var Table = []Row{
	{queue.ErrInvalidArgument, connect.CodeInvalidArgument, "INVALID_ARGUMENT"},

	{queue.ErrJobNotFound, connect.CodeNotFound, "JOB_NOT_FOUND"},
	{queue.ErrQueueNotFound, connect.CodeNotFound, "QUEUE_NOT_FOUND"},
	{queue.ErrWorkerNotFound, connect.CodeNotFound, "WORKER_NOT_FOUND"},
	{queue.ErrScheduleNotFound, connect.CodeNotFound, "SCHEDULE_NOT_FOUND"},
	{queue.ErrConstraintNotFound, connect.CodeNotFound, "CONSTRAINT_NOT_FOUND"},

	{queue.ErrQueueExists, connect.CodeAlreadyExists, "QUEUE_EXISTS"},
	{queue.ErrScheduleExists, connect.CodeAlreadyExists, "SCHEDULE_EXISTS"},
	{queue.ErrConstraintExists, connect.CodeAlreadyExists, "CONSTRAINT_EXISTS"},

	{queue.ErrQueueNotEmpty, connect.CodeFailedPrecondition, "QUEUE_NOT_EMPTY"},
	{queue.ErrIllegalTransition, connect.CodeFailedPrecondition, "ILLEGAL_TRANSITION"},
	{queue.ErrScheduleOwnedByConfig, connect.CodeFailedPrecondition, "SCHEDULE_OWNED_BY_CONFIG"},
	{queue.ErrIdempotencyConflict, connect.CodeFailedPrecondition, "IDEMPOTENCY_CONFLICT"},
	{queue.ErrStaleAttempt, connect.CodeFailedPrecondition, "STALE_ATTEMPT"},
	{queue.ErrWorkerLost, connect.CodeFailedPrecondition, "WORKER_LOST"},
	{queue.ErrWorkerDraining, connect.CodeFailedPrecondition, "WORKER_DRAINING"},
	{ErrResultNotRetained, connect.CodeFailedPrecondition, "RESULT_NOT_RETAINED"},
	{ErrConfirmRequired, connect.CodeFailedPrecondition, "CONFIRMATION_REQUIRED"},

	{queue.ErrLimitReached, connect.CodeResourceExhausted, "LIMIT_REACHED"},
	{ErrRateLimited, connect.CodeResourceExhausted, "RATE_LIMITED"},
	{ErrStreamLimit, connect.CodeResourceExhausted, "STREAM_LIMIT"},
	{ErrPagesBusy, connect.CodeResourceExhausted, "PAGES_BUSY"},
	{queue.ErrPermissionDenied, connect.CodePermissionDenied, "PERMISSION_DENIED"},
	{queue.ErrUnauthenticated, connect.CodeUnauthenticated, "UNAUTHENTICATED"},
	{queue.ErrShutdown, connect.CodeUnavailable, "SHUTTING_DOWN"},
	{ErrNotConfigured, connect.CodeUnavailable, "NOT_CONFIGURED"},
	{ErrDependencyUnavailable, connect.CodeUnavailable, "DEPENDENCY_UNAVAILABLE"},
	{queue.ErrSessionReplaced, connect.CodeAborted, "SESSION_REPLACED"},
	{context.DeadlineExceeded, connect.CodeDeadlineExceeded, "DEADLINE_EXCEEDED"},
	{context.Canceled, connect.CodeCanceled, "CANCELED"},
	{ErrResultCorrupt, connect.CodeDataLoss, "RESULT_CORRUPT"},

	// An error the server did not expect: logged there in full, sent without internals. A write may
	// have committed before the failure.
	{ErrUnavailable, connect.CodeUnavailable, "OUTCOME_UNKNOWN"},
}

// Lookup returns the row of err: the first whose Err err matches.
func Lookup(err error) (Row, bool) {
	if err == nil {
		return Row{}, false
	}
	for _, r := range Table {
		if errors.Is(err, r.Err) {
			return r, true
		}
	}
	return Row{}, false
}

// ByReason returns the row whose Reason is reason.
func ByReason(reason string) (Row, bool) {
	if reason == "" {
		return Row{}, false
	}
	for _, r := range Table {
		if r.Reason == reason {
			return r, true
		}
	}
	return Row{}, false
}

// Error is the connect error of the row with the message msg and the row's ErrorInfo attached.
func (r Row) Error(msg string) *connect.Error {
	ce := connect.NewError(r.Code, errors.New(msg))
	// NewErrorDetail fails only for a message that cannot be marshalled, which ErrorInfo always can.
	if d, err := connect.NewErrorDetail(&errdetails.ErrorInfo{Reason: r.Reason, Domain: Domain}); err == nil {
		ce.AddDetail(d)
	}
	return ce
}

// New is the connect error of err's row with the message msg: for the errors the API's edge builds
// itself (an interceptor's refusal, a limit), whose message is not err's text. An err no row
// names is a mistake of the caller and goes out as INTERNAL without a reason.
func New(err error, msg string) *connect.Error {
	r, ok := Lookup(err)
	if !ok {
		return connect.NewError(connect.CodeInternal, errors.New(msg))
	}
	return r.Error(msg)
}

// Reason returns the reason of the ErrorInfo (domain jq.dev) that the connect error in err's chain
// carries, or "" when there is none: an error of the transport, a proxy, or a server that predates
// the reasons.
func Reason(err error) string {
	var ce *connect.Error
	if !errors.As(err, &ce) {
		return ""
	}
	for _, d := range ce.Details() {
		v, derr := d.Value()
		if derr != nil {
			continue
		}
		if info, ok := v.(*errdetails.ErrorInfo); ok && info.GetDomain() == Domain {
			return info.GetReason()
		}
	}
	return ""
}

// Sentinel returns the error the reason in err's chain stands for, or nil when err carries no
// reason of this table.
func Sentinel(err error) error {
	r, ok := ByReason(Reason(err))
	if !ok {
		return nil
	}
	return r.Err
}
