// Package worker is the worker component: it runs the executor (register,
// stream assignments, run handlers, report) against a jq server and serves
// /healthz and /readyz on worker.health_port (and /metrics, with
// /debug/pprof/ when metrics.pprof, on worker.metrics_port), both bound to
// worker.bind_host. /readyz is 200 only while the
// worker is registered with its assignment stream open, and 503 from the
// moment a stop begins; the stop itself is the executor's two-phase stop
// (NFR-015: running jobs get worker.shutdown_grace_s, default 60 s).
package worker

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"sync/atomic"
	"time"

	"go.opentelemetry.io/otel/trace"
	"go.uber.org/zap"

	"github.com/jq-dev/jq/config"
	"github.com/jq-dev/jq/internal/buildinfo"
	"github.com/jq-dev/jq/internal/health"
	"github.com/jq-dev/jq/internal/hostcheck"
	"github.com/jq-dev/jq/internal/netlimit"
	"github.com/jq-dev/jq/queue"
	"github.com/jq-dev/jq/queue/executor"
	"github.com/jq-dev/jq/roles/telemetry"
)

// Deps is what the worker component needs; roles/wire.go builds it.
type Deps struct {
	Config *config.Config
	Log    *zap.Logger
	// Handlers run the jobs, by type.
	Handlers *queue.Mux
	// Conn reaches the server: workerconn.New over an api client, or a
	// fake in tests.
	Conn executor.Conn
	// Metrics is served at /metrics on worker.metrics_port when
	// metrics.enabled (nil: not served), with the Go profiler when
	// metrics.pprof.
	Metrics http.Handler
	// Listeners counts the connections of the health and metrics listeners (nil: not counted).
	Listeners *telemetry.Listeners
	// Shutdown is closed when the process begins to stop (SIGTERM): /readyz
	// turns 503 from then on. nil: only Run's own stop counts.
	Shutdown <-chan struct{}
	// Tracer makes the job execution spans (nil: none).
	Tracer trace.Tracer
	// OnJobDone is called after each handler returns (metrics; nil: nothing).
	OnJobDone func(executor.JobDone)
	// OnBreakerChange is called after each circuit breaker state change (metrics; nil:
	// nothing).
	OnBreakerChange func(executor.BreakerChange)
}

// Worker is the running worker component.
type Worker struct {
	deps         Deps
	log          *zap.Logger
	exec         *executor.Executor
	stoppingFlag atomic.Bool
	runCtx       context.Context // set before the health server starts

	healthAddr  atomic.Pointer[string]
	metricsAddr atomic.Pointer[string]
	listening   chan struct{}
}

// New validates deps and builds the executor. It contacts nothing: the
// server may not be up yet (in --role=all it starts in the same process), so
// the worker keeps retrying its registration once running.
func New(deps Deps) (*Worker, error) {
	if deps.Config == nil || deps.Log == nil || deps.Handlers == nil || deps.Conn == nil {
		return nil, errors.New("worker: config, logger, handlers and conn are required")
	}
	cfg := deps.Config.Worker
	host, _ := os.Hostname()
	id := cfg.ID
	if id == "" {
		id = executor.DefaultWorkerID(host)
	}
	exec, err := executor.New(executor.Options{
		Conn:              deps.Conn,
		Handler:           deps.Handlers,
		WorkerID:          id,
		Hostname:          host,
		Version:           buildinfo.Get().Version,
		Concurrency:       cfg.Concurrency,
		Prefetch:          cfg.PrefetchCount(),
		AckDelay:          cfg.AckDelay(),
		Queues:            cfg.Queues,
		Logger:            deps.Log,
		HeartbeatInterval: cfg.HeartbeatInterval(),
		ShutdownGrace:     cfg.ShutdownGrace(),
		MaxResultBytes:    deps.Config.Server.MaxResultBytes,
		Tracer:            deps.Tracer,
		OnJobDone:         deps.OnJobDone,
		CircuitBreaker: executor.CircuitBreakerOptions{
			Enabled:          cfg.CircuitBreaker.Enabled,
			FailureThreshold: cfg.CircuitBreaker.FailureThreshold,
			Window:           cfg.CircuitBreaker.Window(),
			Cooldown:         cfg.CircuitBreaker.CooldownPeriod(),
			MinSamples:       cfg.CircuitBreaker.MinSamples,
			OnChange:         deps.OnBreakerChange,
		},
	})
	if err != nil {
		return nil, fmt.Errorf("worker: %w", err)
	}
	return &Worker{deps: deps, log: deps.Log, exec: exec, listening: make(chan struct{})}, nil
}

// Executor is the runtime behind the component (for stats).
func (w *Worker) Executor() *executor.Executor { return w.exec }

// Listening is closed once the health listener (and the metrics one, when
// served) is bound.
func (w *Worker) Listening() <-chan struct{} { return w.listening }

// HealthAddr is the bound health address (valid after Listening).
func (w *Worker) HealthAddr() string { return deref(w.healthAddr.Load()) }

// MetricsAddr is the bound metrics address (valid after Listening; "" when
// metrics are not served).
func (w *Worker) MetricsAddr() string { return deref(w.metricsAddr.Load()) }

func deref(p *string) string {
	if p == nil {
		return ""
	}
	return *p
}

// Run serves the health endpoints and runs the executor until ctx ends (or
// the operator's SHUTDOWN command), then stops gracefully and returns nil.
func (w *Worker) Run(ctx context.Context) error {
	cfg := w.deps.Config
	host := cfg.Worker.BindHost
	ln, err := config.Listen("worker health", "worker.health_port", host, cfg.Worker.HealthPort)
	if err != nil {
		return err
	}
	ln = w.deps.Listeners.Wrap(telemetry.ListenerHealth, ln, netlimit.SideOptions())
	addr := ln.Addr().String()
	w.healthAddr.Store(&addr)
	var mln net.Listener
	if w.deps.Metrics != nil && cfg.Metrics.Enabled {
		if mln, err = config.Listen("worker metrics", "worker.metrics_port", host, cfg.Worker.MetricsPort); err != nil {
			_ = ln.Close()
			return err
		}
		mln = w.deps.Listeners.Wrap(telemetry.ListenerMetrics, mln, netlimit.SideOptions())
		maddr := mln.Addr().String()
		w.metricsAddr.Store(&maddr)
	}
	// Readiness turns 503 the moment ctx ends, before the executor starts
	// its stop.
	w.runCtx = ctx
	hosts := hostcheck.ForListener(host, false, cfg.Server.AllowedHosts)
	healthSrv := netlimit.SideServer(hosts.Handler(w.healthMux()), 10*time.Second)
	serveErr := make(chan error, 1)
	go func() { serveErr <- healthSrv.Serve(ln) }()
	if mln != nil {
		mux := http.NewServeMux()
		mux.Handle("GET /metrics", w.deps.Metrics)
		if cfg.Metrics.Pprof {
			telemetry.RegisterPprof(mux)
		}
		writeTimeout := 30 * time.Second
		if cfg.Metrics.Pprof {
			writeTimeout = 0 // a CPU profile streams for as long as asked
		}
		metricsSrv := netlimit.SideServer(hosts.Handler(mux), writeTimeout)
		go func() { _ = metricsSrv.Serve(mln) }()
		defer func() { _ = metricsSrv.Close() }()
	}
	close(w.listening)
	w.log.Info("worker health endpoints listening", zap.String("worker_id", w.exec.WorkerID()),
		zap.String("health_addr", addr), zap.String("metrics_addr", w.MetricsAddr()))

	runCtx, cancel := context.WithCancel(ctx)
	defer cancel()
	execErr := make(chan error, 1)
	go func() { execErr <- w.exec.Run(runCtx) }()

	var runErr error
	select {
	case runErr = <-execErr:
	case err := <-serveErr:
		runErr = fmt.Errorf("serve health: %w", err)
		w.stoppingFlag.Store(true)
		cancel()
		<-execErr
	}
	w.stoppingFlag.Store(true)
	sctx, scancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
	defer scancel()
	_ = healthSrv.Shutdown(sctx)
	return runErr
}

func (w *Worker) healthMux() *http.ServeMux {
	mux := http.NewServeMux()
	mux.Handle("GET /healthz", health.LiveHandler())
	mux.Handle("GET /readyz", health.ReadyHandler(w.stopping, time.Second, w.readyChecks))
	return mux
}

// stopping reports whether the worker's stop has begun (the process's, or
// this component's, or the operator's SHUTDOWN command).
func (w *Worker) stopping() bool {
	if w.runCtx.Err() != nil || w.stoppingFlag.Load() || w.exec.Status().Stopping {
		return true
	}
	select {
	case <-w.deps.Shutdown:
		return true
	default:
		return false
	}
}

// Readiness of a worker is its link to the server, read from the executor's
// state (no I/O): registered, the assignment stream open, and taking jobs.
var (
	errNotRegistered = errors.New("not registered with the server")
	errNoStream      = errors.New("assignment stream not connected")
	errDraining      = errors.New("draining: taking no new jobs")
)

func (w *Worker) readyChecks() []health.Check {
	st := w.exec.Status()
	return []health.Check{
		health.StateCheck("registered", func() bool { return !st.Registered }, errNotRegistered),
		health.StateCheck("stream", func() bool { return !st.Connected }, errNoStream),
		health.StateCheck("intake", func() bool { return st.Draining }, errDraining),
	}
}
