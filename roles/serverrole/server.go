// Package serverrole is the server component: it migrates the schema, ensures the
// default queue, serves the API on one h2c (or TLS) port — gRPC, gRPC-Web and
// Connect at once — and serves /healthz and /readyz. On shutdown /readyz turns
// 503 first, then intake stops and in-flight RPCs finish within the grace
// period (NFR-014).
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
	"strconv"
	"sync/atomic"
	"time"

	"connectrpc.com/connect"
	"go.uber.org/zap"

	"github.com/jq-dev/jq/api/auth"
	apiserver "github.com/jq-dev/jq/api/server"
	"github.com/jq-dev/jq/config"
	"github.com/jq-dev/jq/internal/buildinfo"
	"github.com/jq-dev/jq/internal/health"
	"github.com/jq-dev/jq/queue"
	"github.com/jq-dev/jq/queue/engine"
	"github.com/jq-dev/jq/roles/telemetry"
	"github.com/jq-dev/jq/store"
)

// Deps is what the server component needs; roles/wire.go builds it.
type Deps struct {
	Config *config.Config
	Log    *zap.Logger
	Store  apiserver.Store
	// Counter reads Redis's dispatch counts for GetStats (nil: UNAVAILABLE).
	Counter apiserver.DispatchCounter
	// Migrate applies the embedded schema migrations (safe when several
	// servers start at once).
	Migrate func(ctx context.Context) error
	// Checks are the dependency probes behind /readyz and GetStatus.
	Checks []health.Check
	// Metrics is served on metrics.port when metrics.enabled (nil: not served).
	Metrics http.Handler
	// Engine is the core loop (submit, scheduler, dispatch, ack, report).
	Engine *engine.Engine
	// Shutdown is closed when the process begins to stop (SIGTERM), before
	// this component's own stop: /readyz turns 503 from then on. nil: only
	// Run's own stop counts.
	Shutdown <-chan struct{}
	// Background loops (maintenance, depth gauges) start once the schema is migrated and stop when
	// Run returns; each returns its stop function.
	Background []func(context.Context) (stop func())
	// Relay publishes the job events outbox to Kafka (nil: Kafka disabled, events stay in Postgres).
	// It runs alongside the engine and stops after it.
	Relay Relay
	// Tracing gives the API its RPC and submit spans (zero value: none).
	Tracing apiserver.Tracing
	// RPCMetrics times every API call (jq_grpc_request_duration_seconds; nil: not measured).
	RPCMetrics apiserver.RPCObserver
	// Refused counts requests refused by a limit (jq_api_limited_total; nil: not counted).
	Refused func(reason string)
	// Auth authenticates and authorizes the API's callers (BuildAuth; nil: authentication off).
	Auth *auth.Authenticator
}

// Relay is the outbox relay (queue/outbox).
type Relay interface {
	Run(ctx context.Context) error
}

// Server is the running server component.
type Server struct {
	deps     Deps
	log      *zap.Logger
	auth     *auth.Authenticator // nil: authentication off
	draining atomic.Bool
	ready    atomic.Bool

	// Bound addresses, known once Run has started listening (for tests that
	// ask for port 0).
	apiAddr    atomic.Pointer[string]
	healthAddr atomic.Pointer[string]
	listening  chan struct{}
}

// New validates deps.
func New(deps Deps) (*Server, error) {
	if deps.Config == nil || deps.Log == nil || deps.Store == nil || deps.Migrate == nil || deps.Engine == nil {
		return nil, errors.New("server: config, logger, store, migrate and engine are required")
	}
	if deps.Refused == nil {
		deps.Refused = func(string) {}
	}
	return &Server{deps: deps, log: deps.Log, auth: deps.Auth, listening: make(chan struct{})}, nil
}

// Listening is closed once both listeners are bound.
func (s *Server) Listening() <-chan struct{} { return s.listening }

// APIAddr is the bound API address (valid after Listening).
func (s *Server) APIAddr() string { return deref(s.apiAddr.Load()) }

// HealthAddr is the bound health address (valid after Listening).
func (s *Server) HealthAddr() string { return deref(s.healthAddr.Load()) }

// Run serves until ctx ends, then shuts down gracefully.
func (s *Server) Run(ctx context.Context) error {
	cfg := s.deps.Config
	if err := s.deps.Migrate(ctx); err != nil {
		return fmt.Errorf("migrate: %w", err)
	}
	s.log.Info("schema migrated")
	q, created, err := s.deps.Store.QueueEnsure(ctx, store.QueueCreateParams{Name: queue.DefaultQueue})
	if err != nil {
		return fmt.Errorf("ensure default queue: %w", err)
	}
	if created {
		s.log.Info("queue created", zap.String("queue", q.Name))
	}
	for _, start := range s.deps.Background {
		defer start(ctx)()
	}

	api := apiserver.New(apiserver.Options{
		Store:   s.deps.Store,
		Counter: s.deps.Counter,
		Engine:  s.deps.Engine,
		Log:     s.log,
		Version: buildinfo.Get(),
		Status:  s.status,
		Limits: apiserver.Limits{
			MaxPayloadBytes: cfg.Server.MaxPayloadBytes, MaxPageBytes: cfg.Server.MaxPageBytes,
			MaxWorkers: cfg.Server.MaxWorkers, MaxWorkersPerPrincipal: cfg.Auth.MaxWorkersPerPrincipal,
			MaxStreams: cfg.Server.MaxStreams, MaxStreamsPerPrincipal: cfg.Auth.MaxStreamsPerPrincipal,
		},
		Auth:           s.auth,
		Refused:        s.deps.Refused,
		Tracing:        s.deps.Tracing,
		HandlerOptions: s.apiHandlerOptions(),
		Workers: apiserver.WorkerTiming{
			HeartbeatInterval: cfg.Worker.HeartbeatInterval(),
			HeartbeatTimeout:  cfg.Scheduler.HeartbeatTimeout(),
		},
	})
	tlsCfg, err := serverTLS(cfg.GRPC.TLS, s.auth != nil)
	if err != nil {
		return err
	}
	apiSrv := newAPIServer(cfg.GRPC, api, tlsCfg, s.log)
	healthSrv := &http.Server{Handler: s.healthMux(), ReadHeaderTimeout: 5 * time.Second}
	var metricsSrv *http.Server
	var metricsLn net.Listener
	if cfg.Metrics.Enabled && s.deps.Metrics != nil {
		mux := http.NewServeMux()
		mux.Handle("GET /metrics", s.deps.Metrics)
		// Profiles for operators chasing a slow server, only when asked for;
		// same port as metrics, which is not the public API port.
		if cfg.Metrics.Pprof {
			telemetry.RegisterPprof(mux)
		}
		metricsSrv = &http.Server{Handler: mux, ReadHeaderTimeout: 5 * time.Second}
		if metricsLn, err = net.Listen("tcp", net.JoinHostPort(cfg.GRPC.Host, strconv.Itoa(cfg.Metrics.Port))); err != nil {
			return fmt.Errorf("listen metrics: %w", err)
		}
	}

	apiLn, err := net.Listen("tcp", net.JoinHostPort(cfg.GRPC.Host, strconv.Itoa(cfg.GRPC.Port)))
	if err != nil {
		return fmt.Errorf("listen api: %w", err)
	}
	healthLn, err := net.Listen("tcp", net.JoinHostPort(cfg.GRPC.Host, strconv.Itoa(cfg.Health.Port)))
	if err != nil {
		_ = apiLn.Close()
		if metricsLn != nil {
			_ = metricsLn.Close()
		}
		return fmt.Errorf("listen health: %w", err)
	}
	apiAddr, healthAddr := apiLn.Addr().String(), healthLn.Addr().String()
	s.apiAddr.Store(&apiAddr)
	s.healthAddr.Store(&healthAddr)

	engineCtx, stopEngine := context.WithCancel(context.WithoutCancel(ctx))
	defer stopEngine()
	engineDone := make(chan error, 1)
	go func() { engineDone <- s.deps.Engine.Run(engineCtx) }()
	relayCtx, stopRelay := context.WithCancel(context.WithoutCancel(ctx))
	defer stopRelay()
	relayDone := make(chan error, 1)
	if s.deps.Relay != nil {
		go func() { relayDone <- s.deps.Relay.Run(relayCtx) }()
	} else {
		relayDone <- nil
	}

	errc := make(chan error, 3)
	if metricsSrv != nil {
		go func() { errc <- metricsSrv.Serve(metricsLn) }()
	}
	go func() {
		var err error
		if tlsCfg != nil {
			err = apiSrv.ServeTLS(apiLn, "", "")
		} else {
			err = apiSrv.Serve(apiLn)
		}
		errc <- err
	}()
	go func() { errc <- healthSrv.Serve(healthLn) }()
	if s.auth == nil && !config.IsLoopback(cfg.GRPC.Host) {
		go warnInsecure(engineCtx, s.log, cfg.GRPC.Host)
	}
	s.ready.Store(true)
	close(s.listening)
	s.log.Info("server started",
		zap.String("api_addr", apiAddr), zap.String("health_addr", healthAddr),
		zap.Bool("tls", tlsCfg != nil), zap.Bool("auth", s.auth != nil), zap.String("version", buildinfo.Get().Version))

	var runErr error
	select {
	case <-ctx.Done():
	case err := <-errc:
		runErr = fmt.Errorf("serve: %w", err)
	}

	// Readiness goes first so load balancers stop sending work, then intake
	// stops and in-flight RPCs get the grace period.
	// Assignment streams end first (workers reconnect elsewhere), then
	// in-flight unary RPCs finish — their acks and reports still reach the
	// engine's writers, which stop last.
	s.draining.Store(true)
	grace := cfg.Server.ShutdownGrace()
	s.log.Info("server stopping", zap.Duration("grace", grace))
	sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), grace)
	defer cancel()
	s.deps.Engine.CloseSessions()
	if err := apiSrv.Shutdown(sctx); err != nil {
		s.log.Warn("api shutdown incomplete; closing connections", zap.Error(err))
		_ = apiSrv.Close()
	}
	stopEngine()
	<-engineDone
	// After the engine, which writes events until it stops; the relay finishes its batch in flight.
	stopRelay()
	<-relayDone
	_ = healthSrv.Shutdown(sctx)
	if metricsSrv != nil {
		_ = metricsSrv.Shutdown(sctx)
	}
	s.log.Info("server stopped")
	return runErr
}

// status runs the dependency checks for GetStatus.
func (s *Server) status(ctx context.Context) []health.Result {
	return health.Run(ctx, readyTimeout, s.deps.Checks)
}

func (s *Server) healthMux() *http.ServeMux {
	mux := http.NewServeMux()
	mux.Handle("GET /healthz", health.LiveHandler())
	mux.Handle("GET /readyz", health.ReadyHandler(s.stopping, readyTimeout, func() []health.Check { return s.deps.Checks }))
	return mux
}

// apiHandlerOptions are the API's own interceptors (metrics).
func (s *Server) apiHandlerOptions() []connect.HandlerOption {
	// grpc.max_message_bytes bounds every request a client sends (RESOURCE_EXHAUSTED beyond it).
	opts := []connect.HandlerOption{connect.WithReadMaxBytes(s.deps.Config.GRPC.MaxMessageBytes)}
	if s.deps.RPCMetrics != nil {
		opts = append(opts, connect.WithInterceptors(apiserver.MetricsInterceptor(s.deps.RPCMetrics)))
	}
	return opts
}

// readyTimeout bounds each /readyz probe; a probe that hangs (a partitioned
// Postgres) fails instead of hanging the load balancer's request.
const readyTimeout = 2 * time.Second

// stopping reports whether shutdown has begun: the process was asked to stop
// (Deps.Shutdown; in --role=all the worker drains first, and this server must
// already be out of rotation then) or Run is stopping.
func (s *Server) stopping() bool {
	if s.draining.Load() || !s.ready.Load() {
		return true
	}
	select {
	case <-s.deps.Shutdown:
		return true
	default:
		return false
	}
}

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

func deref(p *string) string {
	if p == nil {
		return ""
	}
	return *p
}
