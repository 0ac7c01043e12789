// Package serverrole holds the server role's own parts, which the role table in
// roles runs beside the engine, the outbox relay and the background loops: the
// schema migration and default queue (Prepare), the API on one h2c (or TLS)
// port — gRPC, gRPC-Web and Connect at once — and the /healthz, /readyz and
// /metrics listeners. On shutdown /readyz turns 503 first, then intake stops and
// in-flight RPCs finish within the grace period (NFR-014).
package serverrole

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"slices"
	"sync/atomic"
	"time"

	"connectrpc.com/connect"
	"go.uber.org/zap"

	"github.com/jq-dev/jq/api/auth"
	"github.com/jq-dev/jq/api/server"
	"github.com/jq-dev/jq/config"
	"github.com/jq-dev/jq/internal/buildinfo"
	"github.com/jq-dev/jq/internal/health"
	"github.com/jq-dev/jq/internal/hostcheck"
	"github.com/jq-dev/jq/internal/netlimit"
	"github.com/jq-dev/jq/queue"
	"github.com/jq-dev/jq/queue/engine"
	"github.com/jq-dev/jq/roles/telemetry"
	"github.com/jq-dev/jq/store"
)

// Deps is what the API listener needs; roles/wire.go builds it.
type Deps struct {
	Config *config.Config
	Log    *zap.Logger
	Store  apiserver.Reader
	// Counter reads Redis's dispatch counts for GetStats (nil: UNAVAILABLE).
	Counter apiserver.DispatchCounter
	// Checks are the dependency probes behind GetStatus (and /readyz: NewHealth).
	Checks []health.Check
	// Engine is the core loop (submit, scheduler, dispatch, ack, report).
	Engine *engine.Engine
	// Schedules runs the schedule commands of the ScheduleService (nil: they are UNAVAILABLE).
	Schedules *engine.Schedules
	// HealthAddr is the health listener's address, named in the "server started" line.
	HealthAddr string
	// Tracing gives the API its RPC and submit spans (zero value: none).
	Tracing apiserver.Tracing
	// RPCMetrics times every API call (jq_grpc_request_duration_seconds; nil: not measured).
	RPCMetrics apiserver.RPCObserver
	// Refused counts requests refused by a limit (jq_api_limited_total; nil: not counted).
	Refused func(reason string)
	// ErrorLogDropped counts log lines of non-OK responses left out by their rate limit
	// (jq_api_error_logs_dropped_total; nil: not counted).
	ErrorLogDropped func()
	// Accept is the health listener's view of the API listener (/readyz's api_accept check).
	Accept *APIAccept
	// Listeners counts the connections of the API listener (nil: not counted).
	Listeners *telemetry.Listeners
	// Auth authenticates and authorizes the API's callers (BuildAuth; nil: authentication off).
	Auth *auth.Authenticator
}

// QueueEnsurer creates the default queue at start: the one write the server makes before its
// engine exists, through this narrow interface.
type QueueEnsurer interface {
	QueueEnsure(ctx context.Context, p store.QueueCreateParams) (q *queue.Queue, created bool, err error)
}

// Prepare migrates the schema (safe when several servers start at once) and ensures the default
// queue: nothing reads or writes jobs before it returns.
func Prepare(ctx context.Context, migrate func(context.Context) error, st QueueEnsurer, log *zap.Logger) error {
	if err := migrate(ctx); err != nil {
		return fmt.Errorf("migrate: %w", err)
	}
	log.Info("schema migrated")
	q, created, err := st.QueueEnsure(ctx, store.QueueCreateParams{Name: queue.DefaultQueue})
	if err != nil {
		return fmt.Errorf("ensure default queue: %w", err)
	}
	if created {
		log.Info("queue created", zap.String("queue", q.Name))
	}
	return nil
}

// Listener is one of the server's HTTP listeners (API, health, metrics). It is bound when built,
// so a port in use fails the start, and served by Run.
type Listener struct {
	srv *http.Server
	ln  net.Listener
	// handler and tlsCfg are the API's, for the console it serves beside the API (NewConsole).
	handler http.Handler
	tlsCfg  *tls.Config
	tls     bool
	grace   time.Duration
	log     *zap.Logger
	// serving runs once the listener serves; beforeStop before the graceful shutdown begins;
	// afterStop once it is over (each nil: nothing).
	serving, beforeStop, afterStop func(ctx context.Context)
}

// Addr is the bound address.
func (l *Listener) Addr() string { return l.ln.Addr().String() }

// Run serves until ctx ends (or serving fails), then shuts down gracefully: intake stops and
// requests in flight get server.shutdown_grace_s, after which their connections are closed.
func (l *Listener) Run(ctx context.Context) error {
	errc := make(chan error, 1)
	go func() {
		if l.tls {
			errc <- l.srv.ServeTLS(l.ln, "", "")
		} else {
			errc <- l.srv.Serve(l.ln)
		}
	}()
	if l.serving != nil {
		l.serving(ctx)
	}
	var runErr error
	select {
	case <-ctx.Done():
	case err := <-errc:
		runErr = fmt.Errorf("serve: %w", err)
	}
	if l.beforeStop != nil {
		l.beforeStop(ctx)
	}
	sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), l.grace)
	defer cancel()
	if err := l.srv.Shutdown(sctx); err != nil {
		l.log.Warn("shutdown incomplete; closing connections", zap.Error(err))
		_ = l.srv.Close()
	}
	if runErr == nil {
		<-errc // http.ErrServerClosed
	}
	if l.afterStop != nil {
		l.afterStop(ctx)
	}
	return runErr
}

// NewAPI binds the API listener: gRPC, gRPC-Web and Connect on one h2c (or TLS) port. On stop the
// assignment streams end first (workers reconnect elsewhere), then in-flight unary RPCs finish —
// their acks and reports still reach the engine's writers, which stop after this listener.
func NewAPI(deps Deps) (*Listener, error) {
	if deps.Config == nil || deps.Log == nil || deps.Store == nil || deps.Engine == nil {
		return nil, errors.New("server: config, logger, store and engine are required")
	}
	if deps.Refused == nil {
		deps.Refused = func(string) {}
	}
	cfg, log := deps.Config, deps.Log
	fdLimit, err := netlimit.RaiseFDLimit()
	if err != nil {
		log.Warn("file descriptor limit not raised", zap.Error(err))
	}
	api := apiserver.New(apiserver.Options{
		Store:   deps.Store,
		Counter: deps.Counter,
		Engine:  deps.Engine,
		// The periodic jobs' commands (docs/schedules.md).
		Schedules: deps.Schedules,
		Log:       log,
		Version:   buildinfo.Get(),
		Status:    status(deps.Checks),
		Limits: apiserver.Limits{
			MaxPayloadBytes: cfg.Server.MaxPayloadBytes, MaxPageBytes: cfg.Server.MaxPageBytes,
			MaxWorkers: cfg.Server.MaxWorkers, MaxWorkersPerPrincipal: cfg.Auth.MaxWorkersPerPrincipal,
			MaxStreams: cfg.Server.MaxStreams, MaxStreamsPerPrincipal: cfg.Auth.MaxStreamsPerPrincipal,
			OfflineWorkerRetention: time.Duration(cfg.Server.OfflineWorkerRetentionS) * time.Second,
		},
		Auth:                 deps.Auth,
		RefusalRatePerSource: cfg.Auth.RefusalRatePerSource,
		Refused:              deps.Refused,
		ErrorLog:             apiserver.ErrorLog{Dropped: deps.ErrorLogDropped},
		Tracing:              deps.Tracing,
		HandlerOptions:       apiHandlerOptions(cfg, deps.RPCMetrics),
		Workers: apiserver.WorkerTiming{
			HeartbeatInterval: cfg.Worker.HeartbeatInterval(),
			HeartbeatTimeout:  cfg.Scheduler.HeartbeatTimeout(),
		},
	})
	tlsCfg, err := serverTLS(cfg.GRPC.TLS, deps.Auth != nil)
	if err != nil {
		return nil, err
	}
	// The console calls api in-process; the listener's requests pass the Host check first.
	apiSrv := newAPIServer(cfg.GRPC, hostcheck.ForListener(cfg.GRPC.Host, deps.Auth == nil, cfg.Server.AllowedHosts).Handler(api), tlsCfg, log)
	apiLn, err := config.Listen("api", "grpc.port", cfg.GRPC.Host, cfg.GRPC.Port)
	if err != nil {
		return nil, err
	}
	apiMax := cfg.GRPC.MaxConnections
	if apiMax == 0 {
		apiMax = netlimit.APIMax(fdLimit)
	}
	limited := deps.Listeners.Wrap(telemetry.ListenerAPI, apiLn, netlimit.Options{Max: apiMax, PerSource: cfg.GRPC.MaxConnectionsPerSource})
	if deps.Accept != nil {
		deps.Accept.ln.Store(limited)
	}
	log.Info("api connection limits", zap.Uint64("fd_limit", fdLimit), zap.Int("api_max_connections", apiMax),
		zap.Int("api_max_connections_per_source", cfg.GRPC.MaxConnectionsPerSource))
	// The console gets a copy taken before the API serves: serving configures (writes) the API's.
	l := &Listener{srv: apiSrv, ln: limited, handler: api, tlsCfg: tlsCfg.Clone(), tls: tlsCfg != nil, grace: cfg.Server.ShutdownGrace(), log: log}
	l.serving = func(ctx context.Context) {
		if deps.Auth == nil && !config.IsLoopback(cfg.GRPC.Host) {
			go warnInsecure(ctx, log, cfg.GRPC.Host)
		}
		log.Info("server started",
			zap.String("api_addr", l.Addr()), zap.String("health_addr", deps.HealthAddr),
			zap.Bool("tls", tlsCfg != nil), zap.Bool("auth", deps.Auth != nil), zap.String("version", buildinfo.Get().Version))
	}
	l.beforeStop = func(context.Context) {
		log.Info("server stopping", zap.Duration("grace", l.grace))
		deps.Engine.CloseSessions()
	}
	return l, nil
}

// APIAccept is the health listener's view of the API listener: a server out of file descriptors
// or at its connection cap must leave the load balancer's rotation though its dependencies are
// fine. NewAPI sets it.
type APIAccept struct {
	ln atomic.Pointer[netlimit.Listener]
}

// Check is /readyz's api_accept check (healthy while the API listener is not yet bound).
func (a *APIAccept) Check() health.Check {
	return health.Check{Name: "api_accept", Critical: true, Probe: func(context.Context) error {
		if ln := a.ln.Load(); ln != nil {
			return ln.AcceptHealthy()
		}
		return nil
	}}
}

// NewHealth binds the health listener: /healthz, and /readyz, which is 503 while stopping() and
// otherwise runs checks (and accept's, when given). It starts before the server's other parts and
// stops after them, so its stop ends the server's log. Its connections are bounded and timed
// (netlimit): nobody can hold the probes' port.
func NewHealth(cfg *config.Config, checks []health.Check, accept *APIAccept, stopping func() bool, lm *telemetry.Listeners, log *zap.Logger) (*Listener, error) {
	if accept != nil {
		checks = slices.Concat(checks, []health.Check{accept.Check()})
	}
	healthSrv := netlimit.SideServer(hostcheck.ForListener(cfg.Health.Host, false, cfg.Server.AllowedHosts).Handler(healthMux(checks, stopping)), 10*time.Second)
	healthLn, err := config.Listen("health", "health.port", cfg.Health.Host, cfg.Health.Port)
	if err != nil {
		return nil, err
	}
	healthLn = lm.Wrap(telemetry.ListenerHealth, healthLn, netlimit.SideOptions())
	return &Listener{srv: healthSrv, ln: healthLn, grace: cfg.Server.ShutdownGrace(), log: log,
		afterStop: func(context.Context) { log.Info("server stopped") }}, nil
}

// NewMetrics binds the metrics listener (metrics.port): /metrics, with the Go profiler when
// metrics.pprof.
func NewMetrics(cfg *config.Config, metrics http.Handler, lm *telemetry.Listeners, log *zap.Logger) (*Listener, error) {
	mux := http.NewServeMux()
	mux.Handle("GET /metrics", metrics)
	// Profiles for operators chasing a slow server, only when asked for;
	// same port as metrics, which is not the public API port.
	if cfg.Metrics.Pprof {
		telemetry.RegisterPprof(mux)
	}
	writeTimeout := 30 * time.Second
	if cfg.Metrics.Pprof {
		writeTimeout = 0 // a CPU profile streams for as long as asked
	}
	metricsSrv := netlimit.SideServer(hostcheck.ForListener(cfg.Metrics.Host, false, cfg.Server.AllowedHosts).Handler(mux), writeTimeout)
	metricsLn, err := config.Listen("metrics", "metrics.port", cfg.Metrics.Host, cfg.Metrics.Port)
	if err != nil {
		return nil, err
	}
	metricsLn = lm.Wrap(telemetry.ListenerMetrics, metricsLn, netlimit.SideOptions())
	return &Listener{srv: metricsSrv, ln: metricsLn, grace: cfg.Server.ShutdownGrace(), log: log}, nil
}

// status runs the dependency checks for GetStatus.
func status(checks []health.Check) func(ctx context.Context) []health.Result {
	return func(ctx context.Context) []health.Result { return health.Run(ctx, readyTimeout, checks) }
}

func healthMux(checks []health.Check, stopping func() bool) *http.ServeMux {
	mux := http.NewServeMux()
	mux.Handle("GET /healthz", health.LiveHandler())
	mux.Handle("GET /readyz", health.ReadyHandler(stopping, readyTimeout, func() []health.Check { return checks }))
	return mux
}

// apiHandlerOptions are the API's own interceptors (metrics).
func apiHandlerOptions(cfg *config.Config, rpc apiserver.RPCObserver) []connect.HandlerOption {
	// grpc.max_message_bytes bounds every request a client sends (RESOURCE_EXHAUSTED beyond it).
	opts := []connect.HandlerOption{connect.WithReadMaxBytes(cfg.GRPC.MaxMessageBytes)}
	if rpc != nil {
		opts = append(opts, connect.WithInterceptors(apiserver.MetricsInterceptor(rpc)))
	}
	return opts
}

// readyTimeout bounds each /readyz probe; a probe that hangs (a partitioned
// Postgres) fails instead of hanging the load balancer's request.
const readyTimeout = 2 * time.Second

// apiProtocols enables HTTP/1.1 (Connect, gRPC-Web) and HTTP/2 (gRPC); without
// TLS, HTTP/2 is h2c.
func apiProtocols(tls bool) *http.Protocols {
	p := new(http.Protocols)
	p.SetHTTP1(true)
	if tls {
		p.SetHTTP2(true)
	} else {
		p.SetUnencryptedHTTP2(true)
	}
	return p
}

// serverTLS builds the API's TLS config. With a client CA and authentication off, every connection
// must present a certificate of that CA (FR-047's mTLS gate). With authentication on, a certificate
// is verified when given and identifies the caller; token clients may connect without one, and
// a request with neither is UNAUTHENTICATED (api/auth).
func serverTLS(c config.ServerTLS, authOn bool) (*tls.Config, error) {
	if !c.Enabled {
		return nil, nil
	}
	cert, err := tls.LoadX509KeyPair(c.CertPath, c.KeyPath)
	if err != nil {
		return nil, fmt.Errorf("grpc.tls: load certificate: %w", err)
	}
	tc := &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12}
	if c.ClientCAPath != "" {
		pem, err := os.ReadFile(c.ClientCAPath)
		if err != nil {
			return nil, fmt.Errorf("grpc.tls.client_ca_path: %w", err)
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("grpc.tls.client_ca_path: no PEM certificates in %s", c.ClientCAPath)
		}
		tc.ClientCAs = pool
		tc.ClientAuth = tls.RequireAndVerifyClientCert
		if authOn {
			tc.ClientAuth = tls.VerifyClientCertIfGiven
		}
	}
	return tc, nil
}
