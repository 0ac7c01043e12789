package apiserver

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"unicode/utf8"

	"connectrpc.com/connect"
	"go.uber.org/zap"

	"github.com/jq-dev/jq/api/apierr"
	"github.com/jq-dev/jq/queue"
)

// toConnect converts a handler error into a connect error with a one-line,
// human-readable message and the reason of its row of the error table. Unexpected
// errors are logged in full and reach the client as UNAVAILABLE (retryable: the
// request changed nothing or is safe to repeat) without internals.
func toConnect(log *zap.Logger, procedure string, err error) error {
	if err == nil {
		return nil
	}
	var ce *connect.Error
	if errors.As(err, &ce) {
		return err
	}
	r, ok := apierr.Lookup(err)
	if !ok {
		log.Error("request failed", zap.String("procedure", procedure), zap.Error(err))
		// Honest about the outcome: a write may have committed before the failure.
		// Retrying is safe for requests with an idempotency key.
		r, _ = apierr.Lookup(apierr.ErrUnavailable)
		return r.Error("the server could not complete the request; its outcome is unknown (retry with an idempotency key to avoid a duplicate)")
	}
	return r.Error(clientMessage(err.Error()))
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

// ErrorInterceptor applies toConnect to every unary and streaming handler, so
// handlers return plain errors and no code mapping is repeated. The server installs
// it on every service; it is exported for handlers served the same way elsewhere,
// such as the client's test that sends every row of the error table over the wire.
func ErrorInterceptor(log *zap.Logger) connect.Interceptor {
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
