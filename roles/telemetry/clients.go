package telemetry

import (
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

var (
	// rpcBuckets cover unary calls (milliseconds) and whole streams (a worker's assignment stream
	// lasts as long as its connection: minutes to hours, mostly in the last buckets).
	rpcBuckets = []float64{.001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30, 60, 300, 3600}
	// clientBuckets cover one database statement or Redis round trip.
	clientBuckets = []float64{.0001, .00025, .0005, .001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10}
)

// NewRPCMetrics registers jq_grpc_request_duration_seconds{method,status_code} on reg and returns
// the function the API's metrics interceptor calls (api/server.RPCObserver). method is the full
// procedure name; the label set is bounded by the API's methods and the status codes.
func NewRPCMetrics(reg prometheus.Registerer) func(procedure, code string, d time.Duration) {
	h := prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name:    "jq_grpc_request_duration_seconds",
		Help:    "Duration of API calls handled by this server (gRPC, gRPC-Web and Connect alike; a stream counts once, when it ends), by method and status code (ok on success).",
		Buckets: rpcBuckets,
	}, []string{"method", "status_code"})
	reg.MustRegister(h)
	return func(procedure, code string, d time.Duration) {
		h.WithLabelValues(procedure, code).Observe(d.Seconds())
	}
}

// NewDBMetrics registers jq_db_query_duration_seconds{query_name} on reg and returns the
// store's query observer (store/postgres.QueryObserver). query_name is the statement's name
// comment ("other" without one): bounded by the statements in the code.
func NewDBMetrics(reg prometheus.Registerer) func(name string, d time.Duration, err error) {
	h := prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name:    "jq_db_query_duration_seconds",
		Help:    "Duration of this process's PostgreSQL statements by name (the statement's leading -- name: comment; other when unnamed), failed ones included.",
		Buckets: clientBuckets,
	}, []string{"query_name"})
	reg.MustRegister(h)
	return func(name string, d time.Duration, _ error) {
		h.WithLabelValues(name).Observe(d.Seconds())
	}
}

// NewStoreMetrics registers jq_store_call_duration_seconds{method,outcome} on reg and returns the
// store wrapper's observer (store/storewrap.Options.Observe). method is a store method's name and
// outcome one of storewrap's Outcome values: both bounded by the code.
func NewStoreMetrics(reg prometheus.Registerer) func(method string, d time.Duration, outcome string) {
	h := prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name:    "jq_store_call_duration_seconds",
		Help:    "Duration of this process's calls to the store by method (JobClaim, JobReportMany, …) and outcome (ok, invalid, refused, canceled, error), statements and transaction retries included.",
		Buckets: clientBuckets,
	}, []string{"method", "outcome"})
	reg.MustRegister(h)
	return func(method string, d time.Duration, outcome string) {
		h.WithLabelValues(method, outcome).Observe(d.Seconds())
	}
}

// NewRedisMetrics registers jq_redis_operation_duration_seconds{operation} on reg and returns the
// Redis hook's observer (store/redis.OperationObserver). operation is a command name or the name
// of one of jq's Lua scripts: bounded.
func NewRedisMetrics(reg prometheus.Registerer) func(operation string, d time.Duration, err error) {
	h := prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name:    "jq_redis_operation_duration_seconds",
		Help:    "Duration of this process's Redis round trips by operation (command name, jq script name for EVALSHA/EVAL, or pipeline), failed ones included.",
		Buckets: clientBuckets,
	}, []string{"operation"})
	reg.MustRegister(h)
	return func(op string, d time.Duration, _ error) {
		h.WithLabelValues(op).Observe(d.Seconds())
	}
}
