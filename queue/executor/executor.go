package executor

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"go.opentelemetry.io/otel/trace"
	"go.uber.org/zap"

	"github.com/jq-dev/jq/queue"
)

// Defaults of Options.
const (
	DefaultHeartbeatInterval = queue.DefaultHeartbeatInterval
	DefaultShutdownGrace     = 60 * time.Second // NFR-015
	DefaultFlushTimeout      = 5 * time.Second
	DefaultReportTimeout     = 5 * time.Minute
	DefaultCallTimeout       = 10 * time.Second
	DefaultMinBackoff        = 100 * time.Millisecond
	DefaultMaxBackoff        = 2 * time.Second // a worker is back within ~2 s of the network healing
	DefaultAckDelay          = time.Second
	DefaultMaxResultBytes    = 256 << 10
	MaxConcurrency           = 1024 // the API's limit
)

// registerStartGrace is how long after its start a worker that has never registered retries
// quietly (debug level): about what a server started at the same time needs to migrate a fresh
// database and listen, on a busy machine.
const registerStartGrace = 15 * time.Second

// Options configure an Executor. Zero durations take the defaults above.
type Options struct {
	// Conn reaches the server. Required.
	Conn Conn
	// Handler runs the jobs, usually a *queue.Mux. Required.
	Handler queue.Handler
	// WorkerID identifies this worker (default <hostname>-<pid>-<random>, DefaultWorkerID).
	WorkerID string
	// Hostname is reported at registration (default os.Hostname).
	Hostname string
	// Version of the worker software, reported at registration.
	Version string
	// Concurrency is the most handlers running at once (FR-021), 1..1024.
	Concurrency int
	// Queues to take jobs from (FR-022); at least one.
	Queues []string
	// Types are the job types this worker handles, registered with the server, which then hands it
	// no job of another type: such jobs stay PENDING for a worker that handles them. nil: the
	// Handler's Types() when it has that method (a *queue.Mux: its registered types, read at every
	// registration), else every type. A handler that registers no type takes every type.
	Types []string
	// Labels shown by ListWorkers.
	Labels map[string]string
	// Logger receives the runtime's logs (default: none).
	Logger *zap.Logger

	// HeartbeatInterval applies until the server's registration says
	// otherwise.
	HeartbeatInterval time.Duration
	// ShutdownGrace is how long running jobs may finish after a stop is
	// requested; the rest are cancelled with queue.ErrShutdown and left to
	// the server's reaper.
	ShutdownGrace time.Duration
	// FlushTimeout bounds each of the last two steps of a stop: delivering
	// the pending reports, and deregistering.
	FlushTimeout time.Duration
	// ReportTimeout is how long an undeliverable report is retried before it
	// is given up (and logged as such).
	ReportTimeout time.Duration
	// CallTimeout bounds one unary call to the server.
	CallTimeout time.Duration
	// MinBackoff and MaxBackoff bound the reconnect and retry backoff.
	MinBackoff, MaxBackoff time.Duration
	// MaxResultBytes bounds a result; a larger one is reported as a
	// permanent failure with reason output_too_large (default 256 KiB, the
	// server's limit).
	MaxResultBytes int
	// OnJobDone, when set, is called after each handler returns (from the
	// job's goroutine; keep it fast). Meant for metrics and tests.
	OnJobDone func(JobDone)
	// Tracer makes an execution span per attempt, continuing the trace stored
	// with the job (trace.go); nil: none.
	Tracer trace.Tracer
	// AckDelay is how long a handler runs before its start is acknowledged to the server (at
	// most half the way to the assignment's deadline). A job that ends sooner is acknowledged by
	// its report: one write instead of two. Handlers never wait for an ack. Default (0) 1 s;
	// negative: acknowledge every start at once (still beside the handler).
	AckDelay time.Duration
	// Prefetch is how many assignments the worker accepts beyond its concurrency, 0..Concurrency
	// (default 0). They wait here, in arrival order, for a free slot: a slot that frees starts its
	// next job at once instead of waiting for the server's next assignment. A prefetched job
	// waits at most as long as the running jobs take, and it must start before its assignment
	// deadline (scheduler.assignment_timeout_s): keep Prefetch 0 for jobs that run longer than
	// about half of it.
	Prefetch int
	// CircuitBreaker configures one circuit breaker per queue (seed 004; off by default in the
	// library, on in jq's worker.circuit_breaker): a queue whose jobs fail too often on this
	// worker gets none of its jobs for a cooldown, then one probe. See breakers.go.
	CircuitBreaker CircuitBreakerOptions
}

// Outcome classifies a finished handler.
type Outcome string

// Outcomes.
const (
	OutcomeSucceeded Outcome = "succeeded" // reported as success
	OutcomeFailed    Outcome = "failed"    // reported as failure (Reason says why)
	OutcomeAbandoned Outcome = "abandoned" // not reported: lease lost, or cancelled at shutdown
)

// JobDone describes a handler that returned.
type JobDone struct {
	Job     *queue.Job
	Attempt int
	Outcome Outcome
	Reason  string // for OutcomeFailed
	Err     error  // the handler's error, if any
	Runtime time.Duration
}

// Stats are the runtime's counters since New.
type Stats struct {
	Received        int64 // assignments received
	Started         int64 // handlers started
	Succeeded       int64 // success reports queued
	Failed          int64 // failure reports queued (error, timeout, cancelled, output too large, panic)
	Abandoned       int64 // handlers whose outcome was not reported (lease lost, shutdown)
	AcksRejected    int64 // assignments the server refused at ack (or that could not be acked in time)
	LateAssignments int64 // assignments received at or after their ack deadline (late, or clocks skewed)
	ReportsRejected int64 // reports the server refused (stale attempt)
	// ReportsSettled are reports sent again after a call that failed on the way, which the server
	// then found already settled: the lost call most likely applied them.
	ReportsSettled int64
	ReportsLost    int64 // reports given up undelivered
	ProtocolErrors int64 // assignments beyond the worker's concurrency
	Fenced         int64 // jobs cancelled because the lease was not renewed in time (fence.go)
	AckCalls       int64
	ReportCalls    int64
	ProgressSent   int64 // progress updates sent (coalesced: at most one per job per second)
	Running        int   // handlers running now
	Held           int   // leases held now (received, not yet reported)
	MaxRunning     int   // the most handlers ever running at once
}

// Executor is the worker runtime: it registers, receives assignments, runs
// their handlers with bounded concurrency, acks and reports in batches,
// heartbeats, and stops in two phases. See the package documentation.
type Executor struct {
	opts Options
	log  *zap.Logger
	conn Conn

	slots chan struct{} // the concurrency semaphore: one token per running job
	epoch time.Time     // the monotonic origin of task.startedAt
	// registerGrace: failed first registrations within this time of the start log at debug level.
	registerGrace time.Duration

	mu           sync.Mutex
	tasks        map[string]*task // held leases by job id
	queued       []*task          // prefetched assignments waiting for a slot, oldest first
	hbInterval   time.Duration
	hbTimeout    time.Duration // the server's heartbeat timeout, from the registration (0: unknown)
	renewedAt    time.Time     // when the last successful registration or heartbeat was sent (fence.go)
	streamCancel context.CancelFunc

	registered     atomic.Bool
	everRegistered atomic.Bool
	connected      atomic.Bool
	draining       atomic.Bool
	stopping       atomic.Bool
	ran            atomic.Bool

	capFreed     chan struct{} // a lease was released
	hbNow        chan struct{} // heartbeat at once
	undrained    chan struct{} // the operator resumed a drained worker
	renewed      chan struct{} // a renewal succeeded: the fence moves
	shutdownReq  chan struct{} // closed on the operator's SHUTDOWN command
	shutdownOnce sync.Once

	jobsBase   context.Context // parent of every job context
	cancelJobs context.CancelCauseFunc
	active     sync.WaitGroup // jobs queued or running

	breakerMu sync.Mutex
	breakers  map[string]*breaker // by queue; nil when the breakers are off

	acks     batcher[*task]
	reports  batcher[reportItem]
	progress *progressSender

	received, started, succeeded, failed, abandoned  atomic.Int64
	acksRejected, late, reportsRejected, reportsLost atomic.Int64
	reportsSettled                                   atomic.Int64
	protocolErrors, fenced                           atomic.Int64
	running, maxRunning                              atomic.Int64
}

// New validates the options and returns an Executor; nothing is contacted
// until Run (the server may start later, e.g. in --role=all).
func New(opts Options) (*Executor, error) {
	var errs []error
	if opts.Conn == nil {
		errs = append(errs, errors.New("Conn is required"))
	}
	if opts.Handler == nil {
		errs = append(errs, errors.New("Handler is required")) //nolint:staticcheck // names the option
	}
	if opts.Concurrency < 1 || opts.Concurrency > MaxConcurrency {
		errs = append(errs, fmt.Errorf("concurrency must be 1 to %d, got %d", MaxConcurrency, opts.Concurrency))
	}
	if len(opts.Queues) == 0 {
		errs = append(errs, errors.New("at least one queue is required"))
	}
	for _, q := range opts.Queues {
		if err := queue.ValidateQueueName(q); err != nil {
			errs = append(errs, err)
		}
	}
	if err := errors.Join(errs...); err != nil {
		return nil, fmt.Errorf("executor: %w", err)
	}
	if opts.Hostname == "" {
		opts.Hostname, _ = os.Hostname()
	}
	if opts.WorkerID == "" {
		opts.WorkerID = DefaultWorkerID(opts.Hostname)
	}
	setDefault(&opts.HeartbeatInterval, DefaultHeartbeatInterval)
	setDefault(&opts.ShutdownGrace, DefaultShutdownGrace)
	setDefault(&opts.FlushTimeout, DefaultFlushTimeout)
	setDefault(&opts.ReportTimeout, DefaultReportTimeout)
	setDefault(&opts.CallTimeout, DefaultCallTimeout)
	if opts.AckDelay == 0 {
		opts.AckDelay = DefaultAckDelay
	}
	setDefault(&opts.MinBackoff, DefaultMinBackoff)
	setDefault(&opts.MaxBackoff, DefaultMaxBackoff)
	if opts.MaxBackoff < opts.MinBackoff {
		opts.MaxBackoff = opts.MinBackoff
	}
	opts.Prefetch = min(max(opts.Prefetch, 0), opts.Concurrency)
	if opts.MaxResultBytes <= 0 {
		opts.MaxResultBytes = DefaultMaxResultBytes
	}
	if opts.Logger == nil {
		opts.Logger = zap.NewNop()
	}
	e := &Executor{
		epoch:       time.Now(),
		opts:        opts,
		log:         opts.Logger.With(zap.String("worker_id", opts.WorkerID)),
		conn:        opts.Conn,
		slots:       make(chan struct{}, opts.Concurrency),
		tasks:       map[string]*task{},
		hbInterval:  opts.HeartbeatInterval,
		capFreed:    make(chan struct{}, 1),
		hbNow:       make(chan struct{}, 1),
		undrained:   make(chan struct{}, 1),
		renewed:     make(chan struct{}, 1),
		shutdownReq: make(chan struct{}),
	}
	e.registerGrace = registerStartGrace
	if opts.CircuitBreaker.Enabled {
		e.opts.CircuitBreaker.setDefaults()
		e.breakers = make(map[string]*breaker, len(opts.Queues))
		now := time.Now()
		for _, q := range opts.Queues {
			e.breakers[q] = newBreaker(q, &e.opts.CircuitBreaker, now)
		}
	}
	e.acks = batcher[*task]{
		name: "ack", log: e.log, send: e.sendAcks, done: e.ackDone,
		jobID:       func(t *task) string { return t.lease.JobID },
		callTimeout: opts.CallTimeout, minBackoff: opts.MinBackoff, maxBackoff: opts.MaxBackoff,
	}
	e.acks.init()
	e.reports = batcher[reportItem]{
		name: "report", log: e.log, send: e.sendReports, done: e.reportDone,
		jobID:       func(r reportItem) string { return r.rep.JobID },
		callTimeout: opts.CallTimeout, minBackoff: opts.MinBackoff, maxBackoff: opts.MaxBackoff,
	}
	e.reports.init()
	e.progress = newProgressSender(e.log, opts.CallTimeout, opts.Conn, e.liveTasks)
	return e, nil
}

// DefaultWorkerID is <hostname>-<pid>-<8 random hex digits>. The random part makes it unguessable:
// a worker id belongs to the first principal that registers it, and another principal that
// could predict <hostname>-<pid> could take the id first and lock the real worker out.
func DefaultWorkerID(hostname string) string {
	if hostname == "" {
		hostname = "worker"
	}
	var b [4]byte
	_, _ = rand.Read(b[:]) // crypto/rand.Read never fails (Go 1.24+)
	return fmt.Sprintf("%s-%d-%s", hostname, os.Getpid(), hex.EncodeToString(b[:]))
}

func setDefault(d *time.Duration, def time.Duration) {
	if *d <= 0 {
		*d = def
	}
}

// WorkerID is the id the executor registers with.
func (e *Executor) WorkerID() string { return e.opts.WorkerID }

// Ready reports whether the worker is taking jobs: registered, with the
// assignment stream open, and neither draining nor stopping.
func (e *Executor) Ready() bool {
	return e.registered.Load() && e.connected.Load() && !e.draining.Load() && !e.stopping.Load()
}

// Status is the connection state behind Ready.
type Status struct {
	Registered bool // the server accepted the registration (and has not forgotten it since)
	Connected  bool // the assignment stream is open
	Draining   bool // the operator drained the worker: it takes no new jobs
	Stopping   bool // a stop has begun
}

// Status returns the connection state.
func (e *Executor) Status() Status {
	return Status{
		Registered: e.registered.Load(),
		Connected:  e.connected.Load(),
		Draining:   e.draining.Load(),
		Stopping:   e.stopping.Load(),
	}
}

// Stopping reports whether a stop has begun.
func (e *Executor) Stopping() bool { return e.stopping.Load() }

// Stats returns a snapshot of the counters.
func (e *Executor) Stats() Stats {
	e.mu.Lock()
	held := len(e.tasks)
	e.mu.Unlock()
	return Stats{
		Received:        e.received.Load(),
		Started:         e.started.Load(),
		Succeeded:       e.succeeded.Load(),
		Failed:          e.failed.Load(),
		Abandoned:       e.abandoned.Load(),
		Fenced:          e.fenced.Load(),
		AcksRejected:    e.acksRejected.Load(),
		LateAssignments: e.late.Load(),
		ReportsRejected: e.reportsRejected.Load(),
		ReportsSettled:  e.reportsSettled.Load(),
		ReportsLost:     e.reportsLost.Load(),
		ProtocolErrors:  e.protocolErrors.Load(),
		AckCalls:        e.acks.calls.Load(),
		ReportCalls:     e.reports.calls.Load(),
		ProgressSent:    e.progress.sent.Load(),
		Running:         int(e.running.Load()),
		Held:            held,
		MaxRunning:      int(e.maxRunning.Load()),
	}
}

// Run registers (retrying until the server answers), takes and runs jobs
// until ctx ends or the operator's SHUTDOWN command arrives, then stops in
// two phases and returns nil. It returns an error only when the server
// rejects the registration as invalid (a configuration problem). Run may be
// called once.
func (e *Executor) Run(ctx context.Context) error {
	if !e.ran.CompareAndSwap(false, true) {
		return errors.New("executor: Run called twice")
	}
	// Job contexts and the protocol loops outlive ctx: they are stopped
	// step by step below, not by the caller's cancellation.
	e.jobsBase, e.cancelJobs = context.WithCancelCause(context.WithoutCancel(ctx))
	defer e.cancelJobs(queue.ErrShutdown)
	loopCtx, stopLoops := context.WithCancel(context.WithoutCancel(ctx))
	var loops sync.WaitGroup
	loops.Go(func() { e.acks.run(loopCtx) })
	loops.Go(func() { e.reports.run(loopCtx) })
	loops.Go(func() { e.progress.run(loopCtx, e.opts.WorkerID) })
	hbCtx, stopHB := context.WithCancel(loopCtx)
	var hb sync.WaitGroup
	hb.Go(func() { e.heartbeatLoop(hbCtx) })
	hb.Go(func() { e.fenceLoop(hbCtx) })
	stopHeartbeats := func() {
		stopHB()
		hb.Wait()
	}

	sessCtx, stopSession := context.WithCancel(loopCtx)
	fatal := make(chan error, 1)
	var session sync.WaitGroup
	session.Go(func() {
		if err := e.sessionLoop(sessCtx); err != nil {
			fatal <- err
		}
	})
	e.log.Info("worker starting",
		zap.Int("concurrency", e.opts.Concurrency), zap.Strings("queues", e.opts.Queues))

	var runErr error
	select {
	case <-ctx.Done():
		e.log.Info("worker stopping", zap.String("why", "stop requested"))
	case <-e.shutdownReq:
		e.log.Info("worker stopping", zap.String("why", "operator shutdown command"))
	case runErr = <-fatal:
		e.log.Error("worker cannot run", zap.Error(runErr))
	}
	e.stop(ctx, stopSession, &session, stopHeartbeats)
	e.stopBreakers()
	stopLoops()
	loops.Wait()
	e.log.Info("worker stopped", zap.Any("stats", e.Stats()))
	return runErr
}

// stop is the two-phase stop: take no more work; let running jobs
// finish within the grace period; cancel the rest with queue.ErrShutdown
// (left to the server's reaper, not reported); deliver the pending reports;
// deregister.
func (e *Executor) stop(ctx context.Context, stopSession context.CancelFunc, session *sync.WaitGroup, stopHeartbeats func()) {
	e.stopping.Store(true)
	stopSession()
	session.Wait()

	idle := make(chan struct{})
	go func() {
		e.active.Wait()
		close(idle)
	}()
	grace := time.NewTimer(e.opts.ShutdownGrace)
	defer grace.Stop()
	select {
	case <-idle:
	case <-grace.C:
		e.log.Warn("shutdown grace period over; cancelling the jobs still running",
			zap.Duration("grace", e.opts.ShutdownGrace), zap.Int("running", int(e.running.Load())))
		e.cancelJobs(queue.ErrShutdown)
		e.dropQueued(queue.ErrShutdown)
		wait := time.NewTimer(e.opts.FlushTimeout)
		select {
		case <-idle:
		case <-wait.C:
			e.log.Error("handlers ignore cancellation; leaving them behind",
				zap.Int("running", int(e.running.Load())))
		}
		wait.Stop()
	}

	fctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), e.opts.FlushTimeout)
	if err := e.reports.flush(fctx); err != nil {
		e.log.Error("reports not delivered before shutdown; the server's reaper will settle those jobs", zap.Error(err))
	}
	cancel()

	// Heartbeats keep the leases alive through the grace period; they end
	// before the worker leaves, so none races the deregistration.
	stopHeartbeats()
	if !e.everRegistered.Load() {
		return
	}
	dctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), e.opts.FlushTimeout)
	defer cancel()
	if err := e.conn.Deregister(dctx, DeregisterParams{WorkerID: e.opts.WorkerID}); err != nil {
		e.log.Warn("deregister failed; the server will notice the missing heartbeats", zap.Error(err))
		return
	}
	e.registered.Store(false)
	e.log.Info("worker deregistered")
}

// requestShutdown handles the operator's SHUTDOWN command.
func (e *Executor) requestShutdown() {
	e.shutdownOnce.Do(func() { close(e.shutdownReq) })
}

func signal(ch chan struct{}) {
	select {
	case ch <- struct{}{}:
	default:
	}
}
