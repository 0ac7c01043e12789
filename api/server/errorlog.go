package apiserver

import (
	"context"
	"sync/atomic"
	"time"

	"connectrpc.com/connect"
	"go.uber.org/zap"
	"golang.org/x/time/rate"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"

	"github.com/jq-dev/jq/api/auth"
	"github.com/jq-dev/jq/queue"
)

// ErrorLog configures the log line of every non-OK response (seed 003 §8: timestamp, method, code,
// message, job id and caller identity). A flood of bad requests must not flood the log, so lines
// are rate limited; the ones left out are counted.
type ErrorLog struct {
	// PerSec and Burst bound the lines written (0: DefaultErrorLogPerSec, DefaultErrorLogBurst).
	PerSec float64
	Burst  int
	// Dropped is called for each line left out (jq_api_error_logs_dropped_total; nil: nothing).
	Dropped func()
	// Now is the clock of the limiter (nil: time.Now).
	Now func() time.Time
}

// Defaults of ErrorLog: enough for every refusal of a normal day, and a bounded share of the log
// during a flood.
const (
	DefaultErrorLogPerSec = 20
	DefaultErrorLogBurst  = 100
)

// errorLogInterceptor writes one "non-ok response" line at info level per non-OK response. It runs
// inside the authenticator (the principal is known) and outside the error mapper (the code is the
// one the client gets). The authenticator's own refusals never reach it: it logs them itself.
func errorLogInterceptor(log *zap.Logger, o ErrorLog) connect.Interceptor {
	if o.PerSec <= 0 {
		o.PerSec = DefaultErrorLogPerSec
	}
	if o.Burst <= 0 {
		o.Burst = DefaultErrorLogBurst
	}
	if o.Dropped == nil {
		o.Dropped = func() {}
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	return &errorLogger{log: log, o: o, limit: rate.NewLimiter(rate.Limit(o.PerSec), o.Burst)}
}

type errorLogger struct {
	log   *zap.Logger
	o     ErrorLog
	limit *rate.Limiter
	// dropped since the last line written, reported with the next one.
	dropped atomic.Int64
}

func (l *errorLogger) WrapUnary(next connect.UnaryFunc) connect.UnaryFunc {
	return func(ctx context.Context, req connect.AnyRequest) (connect.AnyResponse, error) {
		resp, err := next(ctx, req)
		if err != nil {
			msg, _ := req.Any().(proto.Message)
			l.write(ctx, req.Spec().Procedure, req.Peer(), msg, err)
		}
		return resp, err
	}
}

func (l *errorLogger) WrapStreamingClient(next connect.StreamingClientFunc) connect.StreamingClientFunc {
	return next
}

func (l *errorLogger) WrapStreamingHandler(next connect.StreamingHandlerFunc) connect.StreamingHandlerFunc {
	return func(ctx context.Context, conn connect.StreamingHandlerConn) error {
		err := next(ctx, conn)
		// A stream ended by its client or by the server's stop is how streams end, not a failure.
		if err != nil && !streamEnd(ctx, err) {
			l.write(ctx, conn.Spec().Procedure, conn.Peer(), nil, err)
		}
		return err
	}
}

func streamEnd(ctx context.Context, err error) bool {
	c := connect.CodeOf(err)
	return ctx.Err() != nil && (c == connect.CodeCanceled || c == connect.CodeDeadlineExceeded || c == connect.CodeUnavailable)
}

func (l *errorLogger) write(ctx context.Context, procedure string, peer connect.Peer, req proto.Message, err error) {
	if !l.limit.AllowN(l.o.Now(), 1) {
		l.dropped.Add(1)
		l.o.Dropped()
		return
	}
	code := connect.CodeOf(err)
	text := err.Error()
	if ce, ok := err.(*connect.Error); ok { //nolint:errorlint // the mapper's own error, never wrapped
		text = ce.Message()
	}
	fields := make([]zap.Field, 0, 8)
	fields = append(fields, zap.String("method", procedure), zap.String("grpc_code", code.String()),
		zap.String("error_message", text), zap.String("caller", caller(ctx, peer)))
	if id := stringField(req, "job_id"); id != "" {
		fields = append(fields, zap.String("job_id", id))
	}
	if id := stringField(req, "worker_id"); id != "" {
		fields = append(fields, zap.String("worker_id", id))
	}
	if n := l.dropped.Swap(0); n > 0 {
		fields = append(fields, zap.Int64("dropped_before", n))
	}
	l.log.Info("non-ok response", fields...)
}

// caller is the caller's identity: the principal's name, or its address when authentication is off.
func caller(ctx context.Context, peer connect.Peer) string {
	if p, ok := auth.FromContext(ctx); ok {
		return p.Name
	}
	return "addr:" + peer.Addr
}

// stringField is the request's top-level string field of that name ("" when it has none). Job ids
// are job_id in every request of jq.v1 and taskqueue.v1 that names a job.
func stringField(m proto.Message, name protoreflect.Name) string {
	if m == nil {
		return ""
	}
	r := m.ProtoReflect()
	f := r.Descriptor().Fields().ByName(name)
	if f == nil || f.Kind() != protoreflect.StringKind || f.IsList() || f.IsMap() {
		return ""
	}
	return logSafe(r.Get(f).String())
}

// logSafe is a client's string as a log field: as is when it is a short printable token (a job
// id), else quoted and cut (queue.Excerpt), so a bad request cannot write 4 MB or control
// characters into the log.
func logSafe(s string) string {
	if len(s) > queue.MaxExcerpt {
		return queue.Excerpt(s)
	}
	for i := 0; i < len(s); i++ {
		if s[i] <= ' ' || s[i] > '~' {
			return queue.Excerpt(s)
		}
	}
	return s
}
