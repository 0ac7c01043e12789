// Package apiserver holds the connect handlers of the jq API: proto ↔ queue
// conversion, request validation, and the one place where errors become
// gRPC/Connect codes. It sees the store through its interfaces only; it never
// imports a backend (internal/archtest enforces that).
package apiserver

import (
	"bytes"
	"context"
	"net/http"
	"time"

	"connectrpc.com/connect"
	"connectrpc.com/grpchealth"
	"connectrpc.com/grpcreflect"
	"go.uber.org/zap"

	"github.com/jq-dev/jq/api"
	"github.com/jq-dev/jq/api/auth"
	"github.com/jq-dev/jq/api/gen/jq/v1/jqv1connect"
	"github.com/jq-dev/jq/api/gen/taskqueue/v1/taskqueuev1connect"
	"github.com/jq-dev/jq/internal/buildinfo"
	"github.com/jq-dev/jq/internal/health"
	"github.com/jq-dev/jq/queue"
	"github.com/jq-dev/jq/queue/engine"
	"github.com/jq-dev/jq/store"
)

// Limits bound what a request may carry, what a page of jobs may hold and what callers may hold
// (0: unlimited, but for MaxPageBytes).
type Limits struct {
	MaxPayloadBytes int
	// MaxPageBytes bounds one page of ListJobs or PeekQueue (server.max_page_bytes); 0:
	// DefaultMaxPageBytes.
	MaxPageBytes int
	// MaxWorkers bounds the live workers in the cluster, MaxWorkersPerPrincipal those of one
	// principal; MaxStreams the assignment streams open on this server, MaxStreamsPerPrincipal
	// those of one principal — and, counted apart, the watch streams (WatchJob, WatchEvents).
	MaxWorkers             int
	MaxWorkersPerPrincipal int
	MaxStreams             int
	MaxStreamsPerPrincipal int
	// MaxPayloadPages bounds the payload bytes of the ListJobs and PeekQueue pages with
	// include_payloads being built, encoded and written at once, as a number of full pages
	// (MaxPageBytes each; 0: DefaultMaxPayloadPages).
	MaxPayloadPages int
	// OfflineWorkerRetention is how long an OFFLINE worker's row (and its id) is kept (0: for
	// ever), unless its principal's new ids need its place (MaxWorkersPerPrincipal bounds a
	// principal's rows too; only live workers are refused).
	OfflineWorkerRetention time.Duration
}

// DefaultMaxPageBytes is the page byte budget when Limits.MaxPageBytes is 0: what a gRPC client
// accepts by default.
const DefaultMaxPageBytes = 4 << 20

func (l Limits) maxPageBytes() int {
	if l.MaxPageBytes > 0 {
		return l.MaxPageBytes
	}
	return DefaultMaxPageBytes
}

// WorkerTiming is what workers are told at registration.
type WorkerTiming struct {
	HeartbeatInterval time.Duration
	HeartbeatTimeout  time.Duration
}

// Reader is what the handlers read of the system of record. It has no method that writes: every
// change of a job, queue or worker is a command of the engine (Options.Engine), which decides it
// with queue's rules, so a handler cannot write state around it. GetStats also needs Redis's
// counts: Options.Counter.
type Reader interface {
	Ping(ctx context.Context) error
	QueueGet(ctx context.Context, name string) (*queue.Queue, error)
	QueueList(ctx context.Context) ([]*queue.Queue, error)
	QueueStats(ctx context.Context, name string) (*queue.QueueStats, error)
	DepthSnapshot(ctx context.Context) (store.DepthSnapshot, error)
	JobGet(ctx context.Context, id string) (*queue.Job, error)
	JobList(ctx context.Context, p store.JobListParams) (store.JobListResult, error)
	JobPrefixList(ctx context.Context, prefix string, limit int) ([]string, error)
	JobEvents(ctx context.Context, id string) ([]queue.Event, error)
	EventsRead(ctx context.Context, p store.EventsReadParams) (store.EventsReadResult, error)
	JobProgressGet(ctx context.Context, id string) (*queue.JobProgress, error)
	JobPeek(ctx context.Context, p store.JobPeekParams) (store.JobPeekResult, error)
	JobCountDeadLettered(ctx context.Context) (map[string]int64, error)
	JobCountReady(ctx context.Context, queues []string) (map[string]int64, error)
	JobDueTypeList(ctx context.Context, queueName string, except []string) ([]string, error)
	WorkerGet(ctx context.Context, id string) (*queue.Worker, error)
	WorkerList(ctx context.Context) ([]*queue.Worker, error)
	WorkerListPage(ctx context.Context, after string, limit int) ([]*queue.Worker, error)
	WorkerCounts(ctx context.Context, principal, except string) (store.WorkerCounts, error)
	WorkerCountLive(ctx context.Context, heartbeatTimeout time.Duration) (int64, error)
	ScheduleGet(ctx context.Context, name string) (*queue.Schedule, error)
	ScheduleList(ctx context.Context) ([]*queue.Schedule, error)
	ConstraintGet(ctx context.Context, name string) (*queue.Constraint, error)
	ConstraintSet(ctx context.Context) (*queue.ConstraintSet, error)
	ConstraintUsage(ctx context.Context, p store.ConstraintUsageParams) (*queue.ConstraintUsage, error)
}

// Options configure the API handlers.
type Options struct {
	// Store is read; Engine writes (required: every command goes through it).
	Store Reader
	// Counter reads the Redis dispatch counts GetStats reports (the dispatcher);
	// nil: GetStats answers UNAVAILABLE.
	Counter DispatchCounter
	Engine  *engine.Engine
	// Schedules runs the schedule commands; nil: the ScheduleService's changes are UNAVAILABLE.
	Schedules *engine.Schedules
	Workers   WorkerTiming
	Log       *zap.Logger
	Version   buildinfo.Info
	// Status runs the dependency checks (the same ones as /readyz).
	Status func(ctx context.Context) []health.Result
	Limits Limits
	// HandlerOptions are added to every service (interceptors, codecs).
	HandlerOptions []connect.HandlerOption
	// Tracing adds RPC and submit spans (zero value: no tracing).
	Tracing Tracing
	// Auth authenticates and authorizes every RPC but the health service (nil: authentication
	// off, every caller may do everything).
	Auth *auth.Authenticator
	// Refused counts a request refused by a limit (auth.Reason*); nil: not counted. With Auth
	// set, refusals are counted through it instead.
	Refused func(reason string)
	// RefusalRatePerSource bounds the requests refused for their credentials that one source
	// address may cause per second before its connections are closed (0: unlimited).
	RefusalRatePerSource float64
	// TaskQueueQueue receives the jobs submitted through the taskqueue.v1 facade, whose JobSpec
	// names no queue; "": queue.DefaultQueue.
	TaskQueueQueue string
	// ErrorLog rate-limits the log line of every non-OK response (zero value: the defaults).
	ErrorLog ErrorLog
}

// compressMinBytes is the smallest response that is gzip-compressed when the
// client accepts it.
const compressMinBytes = 16 << 10

// services lists the fully qualified names served, for reflection and the
// gRPC health service.
var services = []string{
	jqv1connect.JobServiceName,
	jqv1connect.QueueServiceName,
	jqv1connect.WorkerServiceName,
	jqv1connect.AdminServiceName,
	jqv1connect.ScheduleServiceName,
	jqv1connect.ConstraintServiceName,
	taskqueuev1connect.TaskQueuePublicServiceName,
}

// New returns one handler serving every jq service, and seed 003's taskqueue.v1 facade, over
// gRPC, gRPC-Web and Connect, plus gRPC reflection (v1 and v1alpha), grpc.health.v1 and the
// OpenAPI document (GET /openapi.yaml).
func New(opts Options) http.Handler {
	if opts.Log == nil {
		opts.Log = zap.NewNop()
	}
	mux := http.NewServeMux()
	hopts := tracingHandlerOptions(opts.Tracing, opts.Log) // outermost: spans see the final codes
	var authOpts []connect.HandlerOption
	if opts.Auth != nil {
		authOpts = []connect.HandlerOption{connect.WithInterceptors(opts.Auth.Interceptor())}
		hopts = append(hopts, authOpts...) // before anything that reads the request
	}
	nPages := opts.Limits.MaxPayloadPages
	if nPages <= 0 {
		nPages = DefaultMaxPayloadPages
	}
	page := int64(opts.Limits.maxPageBytes())
	pages := newPageBound(int64(nPages)*page, page)
	hopts = append(hopts,
		// The error log sees the principal (inside auth) and the final code (outside the mapper).
		connect.WithInterceptors(errorLogInterceptor(opts.Log, opts.ErrorLog), ErrorInterceptor(opts.Log),
			pages.interceptor()),
		// Compressing every small response costs more CPU than it saves on a
		// LAN; only large ones (job pages, big payloads) are worth it.
		connect.WithCompressMinBytes(compressMinBytes))
	hopts = append(hopts, codecs()...)
	hopts = append(hopts, opts.HandlerOptions...)

	jobs := &jobService{store: opts.Store, engine: opts.Engine, limits: opts.Limits, log: opts.Log, now: time.Now, trace: newSubmitTracer(opts.Tracing), watch: newWatchHub(opts.Engine, opts.Store.EventsRead, opts.Log.Named("watch")),
		watchers: newStreamCounter("watch"), refused: refusedFunc(opts)}
	mux.Handle(jqv1connect.NewJobServiceHandler(jobs, hopts...))
	// Seed 003's public API: a facade over the same job paths, behind the same interceptors.
	tqQueue := opts.TaskQueueQueue
	if tqQueue == "" {
		tqQueue = queue.DefaultQueue
	}
	mux.Handle(taskqueuev1connect.NewTaskQueuePublicServiceHandler(&taskQueueService{jobs: jobs, queue: tqQueue, log: opts.Log}, hopts...))
	mux.Handle(jqv1connect.NewQueueServiceHandler(&queueService{store: opts.Store, engine: opts.Engine}, hopts...))
	mux.Handle(jqv1connect.NewScheduleServiceHandler(&scheduleService{store: opts.Store, schedules: opts.Schedules,
		limits: opts.Limits, now: time.Now}, hopts...))
	mux.Handle(jqv1connect.NewConstraintServiceHandler(&constraintService{store: opts.Store, engine: opts.Engine}, hopts...))
	mux.Handle(jqv1connect.NewWorkerServiceHandler(&workerService{
		store: opts.Store, engine: opts.Engine, log: opts.Log,
		heartbeatInterval: opts.Workers.HeartbeatInterval, heartbeatTimeout: opts.Workers.HeartbeatTimeout,
		limits: opts.Limits, refused: refusedFunc(opts), streams: newStreamCounter("assignment"),
	}, hopts...))
	mux.Handle(jqv1connect.NewAdminServiceHandler(&adminService{store: opts.Store, version: opts.Version, status: opts.Status,
		adminOps: adminOps{store: opts.Store, engine: opts.Engine, counter: opts.Counter, heartbeatTimeout: opts.Workers.HeartbeatTimeout,
			maxPageBytes: opts.Limits.maxPageBytes()}}, hopts...))

	reflector := grpcreflect.NewStaticReflector(append([]string{grpchealth.HealthV1ServiceName}, services...)...)
	mux.Handle(grpcreflect.NewHandlerV1(reflector, authOpts...))
	mux.Handle(grpcreflect.NewHandlerV1Alpha(reflector, authOpts...))
	// The health service stays open: load balancers and orchestrators probe it without
	// credentials, and it tells nothing but SERVING.
	checker := grpchealth.NewStaticChecker(services...)
	mux.Handle(grpchealth.NewHandler(checker))
	// The OpenAPI document is public too: a schema, no data (docs/security.md).
	mux.Handle("GET /openapi.yaml", openAPIHandler())
	h := checkEnvelopes(withRequestEnd(mux))
	if opts.Auth != nil {
		return explainRefusals(opts.Auth.Middleware(h, auth.HTTPOptions{Public: isPublic, RefusalRate: opts.RefusalRatePerSource}))
	}
	return explainRefusals(h)
}

// isPublic reports the paths served without credentials: the gRPC health service and the
// OpenAPI document.
func isPublic(path string) bool {
	return path == "/openapi.yaml" ||
		path == "/"+grpchealth.HealthV1ServiceName+"/Check" || path == "/"+grpchealth.HealthV1ServiceName+"/Watch"
}

// openAPIHandler serves api.OpenAPI.
func openAPIHandler() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/yaml")
		http.ServeContent(w, r, "jq.openapi.yaml", time.Time{}, bytes.NewReader(api.OpenAPI))
	})
}

func refusedFunc(opts Options) func(string) {
	if opts.Refused != nil {
		return opts.Refused
	}
	return func(string) {}
}
