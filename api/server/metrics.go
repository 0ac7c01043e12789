package apiserver

import (
	"context"
	"time"

	"connectrpc.com/connect"
	"go.uber.org/zap"
)

// RPCObserver receives the duration of every RPC: procedure is the full method name
// ("/jq.v1.JobService/SubmitJob"), code the status the client got ("ok", or a Connect/gRPC code
// such as "not_found"). It must be fast and safe for concurrent use.
type RPCObserver func(procedure, code string, d time.Duration)

// MetricsInterceptor times unary RPCs and whole streams (a worker's assignment stream lasts as long
// as its connection) on the handler side. It may sit anywhere in the interceptor chain: the code is
// the one the client gets, as the error interceptor maps it.
func MetricsInterceptor(observe RPCObserver) connect.Interceptor {
	return &metricsInterceptor{observe: observe}
}

type metricsInterceptor struct{ observe RPCObserver }

func (m *metricsInterceptor) WrapUnary(next connect.UnaryFunc) connect.UnaryFunc {
	return func(ctx context.Context, req connect.AnyRequest) (connect.AnyResponse, error) {
		start := time.Now()
		res, err := next(ctx, req)
		m.observe(req.Spec().Procedure, wireCode(req.Spec().Procedure, err), time.Since(start))
		return res, err
	}
}

func (m *metricsInterceptor) WrapStreamingClient(next connect.StreamingClientFunc) connect.StreamingClientFunc {
	return next
}

func (m *metricsInterceptor) WrapStreamingHandler(next connect.StreamingHandlerFunc) connect.StreamingHandlerFunc {
	return func(ctx context.Context, conn connect.StreamingHandlerConn) error {
		start := time.Now()
		err := next(ctx, conn)
		m.observe(conn.Spec().Procedure, wireCode(conn.Spec().Procedure, err), time.Since(start))
		return err
	}
}

// wireCode is the status code the client receives for err: toConnect's mapping (a no-op for an
// error that is already a Connect error), or "ok".
func wireCode(procedure string, err error) string {
	if err == nil {
		return "ok"
	}
	return connect.CodeOf(toConnect(zap.NewNop(), procedure, err)).String()
}
