package apiserver

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"unicode/utf8"

	"connectrpc.com/connect"
	"go.uber.org/zap"

	"github.com/jq-dev/jq/queue"
	"github.com/jq-dev/jq/queue/engine"
)

// codeOf is the one mapping from jq's sentinel errors to gRPC codes.
func codeOf(err error) connect.Code {
	switch {
	case errors.Is(err, queue.ErrInvalidArgument):
		return connect.CodeInvalidArgument
	case errors.Is(err, queue.ErrJobNotFound), errors.Is(err, queue.ErrQueueNotFound), errors.Is(err, queue.ErrWorkerNotFound),
		errors.Is(err, queue.ErrScheduleNotFound), errors.Is(err, queue.ErrConstraintNotFound):
		return connect.CodeNotFound
	case errors.Is(err, queue.ErrQueueExists), errors.Is(err, queue.ErrScheduleExists), errors.Is(err, queue.ErrConstraintExists):
		return connect.CodeAlreadyExists
	case errors.Is(err, queue.ErrQueueNotEmpty), errors.Is(err, queue.ErrIllegalTransition), errors.Is(err, queue.ErrScheduleOwnedByConfig),
		errors.Is(err, queue.ErrIdempotencyConflict), errors.Is(err, queue.ErrStaleAttempt),
		errors.Is(err, engine.ErrWorkerLost):
		return connect.CodeFailedPrecondition
	case errors.Is(err, queue.ErrLimitReached):
		return connect.CodeResourceExhausted
	case errors.Is(err, queue.ErrPermissionDenied):
		return connect.CodePermissionDenied
	case errors.Is(err, queue.ErrUnauthenticated):
		return connect.CodeUnauthenticated
	case errors.Is(err, queue.ErrShutdown):
		return connect.CodeUnavailable
	case errors.Is(err, engine.ErrSessionReplaced):
		return connect.CodeAborted
	case errors.Is(err, context.DeadlineExceeded):
		return connect.CodeDeadlineExceeded
	case errors.Is(err, context.Canceled):
		return connect.CodeCanceled
	}
	return connect.CodeUnknown
}

// toConnect converts a handler error into a connect error with a one-line,
// human-readable message. Unexpected errors are logged in full and reach the
// client as UNAVAILABLE (retryable: the request changed nothing or is safe to
// repeat) without internals.
func toConnect(log *zap.Logger, procedure string, err error) error {
	if err == nil {
		return nil
	}
	var ce *connect.Error
	if errors.As(err, &ce) {
		return err
	}
	code := codeOf(err)
	if code == connect.CodeUnknown {
		log.Error("request failed", zap.String("procedure", procedure), zap.Error(err))
		// Honest about the outcome: a write may have committed before the
		// failure. Retrying is safe for requests with an idempotency key.
		return connect.NewError(connect.CodeUnavailable, errors.New("the server could not complete the request; its outcome is unknown (retry with an idempotency key to avoid a duplicate)"))
	}
	return connect.NewError(code, errors.New(clientMessage(err.Error())))
}

// maxMessage bounds what a client is told. Validation quotes little of the input
// (queue.Excerpt); this is the backstop for every other message.
const maxMessage = 300

// clientMessage is the first line of an error text, at most maxMessage bytes.
func clientMessage(s string) string {
	s = firstLine(s)
	if len(s) <= maxMessage {
		return s
	}
	cut := maxMessage - len("…")
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut] + "…"
}

func firstLine(s string) string {
	if i := strings.IndexByte(s, '\n'); i >= 0 {
		return s[:i]
	}
	return s
}

// errorInterceptor applies toConnect to every unary and streaming handler, so
// handlers return plain errors and no code mapping is repeated.
func errorInterceptor(log *zap.Logger) connect.Interceptor {
	return &errInterceptor{log: log}
}

type errInterceptor struct{ log *zap.Logger }

func (i *errInterceptor) WrapUnary(next connect.UnaryFunc) connect.UnaryFunc {
	return func(ctx context.Context, req connect.AnyRequest) (connect.AnyResponse, error) {
		resp, err := next(ctx, req)
		return resp, toConnect(i.log, req.Spec().Procedure, err)
	}
}

func (i *errInterceptor) WrapStreamingClient(next connect.StreamingClientFunc) connect.StreamingClientFunc {
	return next
}

func (i *errInterceptor) WrapStreamingHandler(next connect.StreamingHandlerFunc) connect.StreamingHandlerFunc {
	return func(ctx context.Context, conn connect.StreamingHandlerConn) error {
		return toConnect(i.log, conn.Spec().Procedure, next(ctx, conn))
	}
}

// invalid builds an INVALID_ARGUMENT error; it wraps the domain sentinel so
// callers may add context ("jobs[3]: …") and the code survives.
func invalid(msg string) error {
	return fmt.Errorf("%w: %s", queue.ErrInvalidArgument, msg)
}
