package roles

// wire.go is the only file in jq that imports concrete backends (Postgres,
// SQLite, Redis, the in-process dispatcher, Kafka). Everything else sees the interfaces in store/.

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/jq-dev/jq/api/workerconn"
	"github.com/jq-dev/jq/internal/term"

	"connectrpc.com/connect"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/redis/go-redis/v9"
	"github.com/segmentio/kafka-go"
	"go.uber.org/zap"

	"github.com/jq-dev/jq/api"
	"github.com/jq-dev/jq/api/auth"
	"github.com/jq-dev/jq/api/rpcclient"
	"github.com/jq-dev/jq/config"
	"github.com/jq-dev/jq/internal/health"
	"github.com/jq-dev/jq/internal/hostcheck"
	"github.com/jq-dev/jq/internal/netlimit"
	"github.com/jq-dev/jq/migrations"
	"github.com/jq-dev/jq/queue"
	"github.com/jq-dev/jq/queue/engine"
	"github.com/jq-dev/jq/queue/executor"
	"github.com/jq-dev/jq/queue/handlers"
	"github.com/jq-dev/jq/queue/inproc"
	"github.com/jq-dev/jq/queue/maintenance"
	"github.com/jq-dev/jq/queue/outbox"
	"github.com/jq-dev/jq/roles/admin"
	"github.com/jq-dev/jq/roles/producer"
	"github.com/jq-dev/jq/roles/serverrole"
	"github.com/jq-dev/jq/roles/telemetry"
	"github.com/jq-dev/jq/roles/worker"
	"github.com/jq-dev/jq/store"
	"github.com/jq-dev/jq/store/kafka"
	"github.com/jq-dev/jq/store/memory"
	"github.com/jq-dev/jq/store/postgres"
	"github.com/jq-dev/jq/store/redis"
	"github.com/jq-dev/jq/store/sqlite"
	"github.com/jq-dev/jq/store/storewrap"
)

// process is what one process's components share: the configuration, the logger, the signal
// context's end, the graph's lifecycle, and the server's parts, each set by the component named
// beside it and read only by the components that need that one (the role table says which).
type process struct {
	cfg      *config.Config
	log      *zap.Logger
	shutdown <-chan struct{}
	lc       *lifecycle
	// ctx outlives the signal: the closes' flushes run after it.
	ctx context.Context

	// Built with the process (in memory, no I/O): the server's logger, registry and the metric
	// families that several of its components share.
	srvLog     *zap.Logger
	reg        *prometheus.Registry
	refused    func(reason string)   // jq_auth_denied_total, jq_api_limited_total
	jobMetrics *telemetry.JobMetrics // jq_job_total…: the engine's observer, the depth gauges' queues
	listeners  *telemetry.Listeners  // jq_listener_connections_…: every listener of the server

	tr         *telemetry.Tracing    // tracing
	authn      *auth.Authenticator   // auth (nil: authentication off)
	st         serverStore           // store
	pg         *postgres.Store       // store: st when the driver is postgres, else nil
	rdb        *redis.Client         // dispatch: nil on the embedded store
	disp       dispatcher            // dispatch
	checks     []health.Check        // health
	healthAddr string                // health
	accept     *serverrole.APIAccept // health: /readyz's view of the API listener, set by api
	eng        *engine.Engine        // engine
	sched      *engine.Schedules     // schedules
	api        *serverrole.Listener  // api: the console serves beside it
	metrics    string                // metrics: its address ("" when off)
	consoleURL string                // console: its address ("" when off)
	banner     io.Writer             // where the start banner goes (stderr; nil: none)
}

func newProcess(ctx context.Context, cfg *config.Config, log *zap.Logger, lc *lifecycle) *process {
	p := &process{cfg: cfg, log: log, shutdown: ctx.Done(), lc: lc, ctx: context.WithoutCancel(ctx), srvLog: log.Named("server")}
	p.reg = telemetry.NewRegistry()
	p.refused = telemetry.NewAuthMetrics(p.reg)
	p.jobMetrics = telemetry.NewJobMetrics(p.reg)
	p.listeners = telemetry.NewListeners(p.reg)
	return p
}

// stopping is /readyz's 503: until every component has started, and from the moment the process
// is asked to stop (SIGTERM; in --role=all the worker drains first, and the server must already
// be out of rotation then).
func (p *process) stopping() bool {
	if !p.lc.started.Load() || p.lc.stopping.Load() {
		return true
	}
	select {
	case <-p.shutdown:
		return true
	default:
		return false
	}
}

func serverTracing(ctx context.Context, p *process) (part, error) {
	tr, err := startTracing(ctx, p.cfg, "jq-server", p.srvLog)
	if err != nil {
		return part{}, err
	}
	p.tr = tr
	return part{close: func() { stopTracing(p.ctx, tr, p.srvLog) }}, nil
}

func serverAuth(_ context.Context, p *process) (part, error) {
	authn, err := serverrole.BuildAuth(p.cfg, p.srvLog, p.refused)
	p.authn = authn
	return part{}, err
}

// serverStore is what the server's components need of the system of record: the Postgres store
// and the embedded one (store/sqlite) both pass the same contract suites (store/storetest).
type serverStore interface {
	engine.Store
	store.OutboxStore
	store.RetentionStore
	store.EventFeed
	store.ScheduleStore
	store.DepthStore
}

// dispatcher is the dispatch side: Redis (store/redis) beside Postgres, in-process (store/memory)
// beside the embedded store.
type dispatcher interface {
	store.Dispatcher
	Counts(ctx context.Context, queues []string) ([]store.DispatchCounts, error)
}

var (
	_ serverStore       = (*storewrap.Store)(nil)
	_ storewrap.Backend = (*postgres.Store)(nil)
	_ storewrap.Backend = (*sqlite.Store)(nil)
)

// wrapStore puts a backend behind store/storewrap, the one way the server's components reach it:
// arguments validated once, each call timed (jq_store_call_duration_seconds) and traced under the
// caller's span.
func wrapStore(p *process, b storewrap.Backend) *storewrap.Store {
	return storewrap.Wrap(b, storewrap.Options{Observe: telemetry.NewStoreMetrics(p.reg), Tracer: p.tr.Tracer()})
}

// serverStoreOpen opens the store.driver's store: Postgres, or the embedded SQLite database in
// store.data_dir (one process holds it: a second one is refused with a clear error).
func serverStoreOpen(ctx context.Context, p *process) (part, error) {
	if p.cfg.Store.Driver == config.StoreSQLite {
		path := p.cfg.Store.SQLitePath()
		st, err := openSQLite(ctx, p.cfg)
		if err != nil {
			return part{}, fmt.Errorf("embedded store %s: %w", path, err)
		}
		p.srvLog.Info("embedded store: jobs are kept in this file; for several server replicas use Postgres (store.driver: postgres, db.url)",
			zap.String("path", st.Path()))
		p.st = wrapStore(p, st)
		return part{close: st.Close}, nil
	}
	st, err := postgres.New(ctx, postgres.Config{
		DSN:            p.cfg.DB.DSN(),
		MaxConns:       int32(p.cfg.DB.PoolSize), //nolint:gosec // validated 1..10000
		ConnectTimeout: p.cfg.DB.ConnectTimeout(),
		ObserveQuery:   telemetry.NewDBMetrics(p.reg),
	})
	if err != nil {
		return part{}, postgresHint(err) // says "postgres: …"
	}
	p.st, p.pg = wrapStore(p, st), st
	return part{close: st.Close}, nil
}

// postgresHint follows a failed connection to Postgres (refused, an unknown role or database, a
// wrong password) with the settings that choose another one.
func postgresHint(err error) error {
	// pgx puts the server's answer (FATAL: role "jq" does not exist) on a line of its own, once per
	// address tried: one line, each answer once.
	var lines []string
	for l := range strings.Lines(err.Error()) {
		if l = strings.Join(strings.Fields(l), " "); l != "" && !slices.Contains(lines, l) {
			lines = append(lines, l)
		}
	}
	return &hintedError{err: err, msg: strings.Join(lines, " ") +
		"; set JQ_DB_URL (db.url) to a database and role that exist, e.g. " +
		"JQ_DB_URL=postgres://postgres@127.0.0.1:5432/postgres, or run --role=all without a database " +
		"configured for the embedded store (docs/embedded.md)"}
}

// hintedError is err on one line with what to do next.
type hintedError struct {
	err error
	msg string
}

func (e *hintedError) Error() string { return e.msg }
func (e *hintedError) Unwrap() error { return e.err }

// notifier wakes the other replicas' schedulers: Postgres's LISTEN/NOTIFY; none on the embedded
// store, which one process serves (the engine wakes its own scheduler).
func (p *process) notifier() store.Notifier {
	if p.pg == nil {
		return nil
	}
	return p.pg
}

// openSQLite opens the embedded store as store.* configures it.
func openSQLite(ctx context.Context, cfg *config.Config) (*sqlite.Store, error) {
	return sqlite.New(ctx, sqlite.Config{Path: cfg.Store.SQLitePath(), Synchronous: cfg.Store.Synchronous})
}

// serverDispatch builds the dispatcher: in-process beside the embedded store, Redis otherwise.
func serverDispatch(ctx context.Context, p *process) (part, error) {
	if p.pg == nil {
		d := memory.NewDispatcher(memory.DispatcherConfig{})
		p.disp = d
		return part{close: func() { _ = d.Close() }}, nil
	}
	redis.SetLogger(redisLogger{p.srvLog.Named("redis")})
	rdb := newRedis(p.cfg)
	rdb.AddHook(redisstore.NewHook(telemetry.NewRedisMetrics(p.reg)))
	disp, err := redisstore.Open(redisstore.Config{Client: rdb, KeyPrefix: p.cfg.Redis.KeyPrefix})
	if err != nil {
		_ = rdb.Close()
		return part{}, err
	}
	switch err := disp.Prepare(ctx); {
	case err == nil:
	case ctx.Err() == nil && redisstore.Unreachable(err):
		// Redis is not the system of record: the server dispatches from Postgres without it and
		// /readyz says degraded until it answers, as for an outage that begins later.
		p.srvLog.Warn("redis unreachable at start; dispatch continues from postgres",
			zap.String("redis_addr", p.cfg.Redis.Addr), zap.Error(err))
	default:
		_ = rdb.Close()
		return part{}, err // says "redis: …"
	}
	p.rdb, p.disp = rdb, disp
	return part{close: func() { _ = rdb.Close() }}, nil
}

func serverHealth(_ context.Context, p *process) (part, error) {
	p.checks = dependencyChecks(p.cfg, p.st, p.pg, p.rdb)
	p.accept = &serverrole.APIAccept{}
	l, err := serverrole.NewHealth(p.cfg, p.checks, p.accept, p.stopping, p.listeners, p.srvLog)
	if err != nil {
		return part{}, err
	}
	p.healthAddr = l.Addr()
	return part{run: l.Run}, nil
}

func serverMetrics(_ context.Context, p *process) (part, error) {
	l, err := serverrole.NewMetrics(p.cfg, telemetry.MetricsHandler(p.reg), p.listeners, p.srvLog)
	if err != nil {
		return part{}, err
	}
	p.metrics = l.Addr()
	return part{run: l.Run}, nil
}

func serverMigrate(ctx context.Context, p *process) (part, error) {
	migrate := func(context.Context) error { return nil } // the embedded store applies its schema when it opens
	if p.pg != nil {
		dsn := p.cfg.DB.DSN()
		migrate = func(ctx context.Context) error { return migrations.Up(ctx, dsn) }
	}
	return part{}, serverrole.Prepare(ctx, migrate, p.st, p.srvLog)
}

func serverRelay(_ context.Context, p *process) (part, error) {
	relay, sink, err := buildRelay(p.cfg, p.st, p.srvLog)
	if err != nil {
		return part{}, err
	}
	topics := []string{p.cfg.Kafka.TopicEvents, p.cfg.Kafka.TopicDeadLetter}
	if relay == nil {
		p.reg.MustRegister(telemetry.NewOutboxCollector(nil, topics...)) // the error counters, at 0
		return part{}, nil
	}
	p.reg.MustRegister(telemetry.NewOutboxCollector(relay.Stats, topics...))
	return part{run: relay.Run, close: func() { _ = sink.Close() }}, nil
}

// serverBackground runs the maintenance passes (retention) and the queue depth gauges.
func serverBackground(_ context.Context, p *process) (part, error) {
	maint, err := maintenance.New(maintenance.Options{
		Store:     p.st,
		Progress:  p.st,
		Buckets:   p.st,
		Log:       p.srvLog.Named("maintenance"),
		Retention: p.cfg.Server.EventRetention(),
		KafkaOff:  !p.cfg.Kafka.Enabled,
	})
	if err != nil {
		return part{}, err
	}
	p.reg.MustRegister(telemetry.NewMaintenanceCollector(maint.Stats))
	depth := telemetry.NewDepthGauges(p.reg, telemetry.DepthOptions{
		Measure: p.st.DepthSnapshot, Log: p.srvLog.Named("metrics"), Queues: p.jobMetrics.KnownQueues,
		Constraints: telemetry.ConstraintUsages(p.st),
	})
	return part{run: func(ctx context.Context) error {
		stopMaint := maint.Start(ctx)
		stopDepth := depth.Start(ctx)
		<-ctx.Done()
		stopDepth()
		stopMaint()
		return nil
	}}, nil
}

func serverEngine(_ context.Context, p *process) (part, error) {
	cfg := p.cfg
	eng, err := engine.New(engine.Options{
		Observer:          p.jobMetrics,
		Store:             p.st,
		Dispatcher:        p.disp,
		Notifier:          p.notifier(),
		Log:               p.srvLog.Named("engine"),
		SchedulerInterval: cfg.Scheduler.Interval(),
		BatchSize:         cfg.Scheduler.BatchSize,
		LockTTL:           cfg.Scheduler.LockTTL(),
		AssignmentTimeout: cfg.Scheduler.AssignmentTimeout(),
		MaxResultBytes:    cfg.Server.MaxResultBytes,
		ReaperInterval:    cfg.Scheduler.ReaperInterval(),
		HeartbeatTimeout:  cfg.Scheduler.HeartbeatTimeout(),
		TimeoutGrace:      cfg.Scheduler.TimeoutGrace(),
		Tracer:            p.tr.Tracer(),
		KafkaOff:          !cfg.Kafka.Enabled,
	})
	if err != nil {
		return part{}, err
	}
	p.reg.MustRegister(telemetry.NewRecoveryCollector(eng.RecoveryStats))
	p.eng = eng
	return part{run: eng.Run}, nil
}

func serverAPI(_ context.Context, p *process) (part, error) {
	l, err := serverrole.NewAPI(serverrole.Deps{
		Config:     p.cfg,
		Log:        p.srvLog,
		Store:      p.st,
		Counter:    p.disp,
		Engine:     p.eng,
		Schedules:  p.sched,
		Checks:     p.checks,
		HealthAddr: p.healthAddr,
		Tracing:    apiTracing(p.tr),
		RPCMetrics: telemetry.NewRPCMetrics(p.reg), // jq_grpc_request_duration_seconds
		Refused:    p.refused,
		// jq_api_error_logs_dropped_total
		ErrorLogDropped: telemetry.NewErrorLogMetrics(p.reg),
		Accept:          p.accept,
		Auth:            p.authn,
		Listeners:       p.listeners,
	})
	if err != nil {
		return part{}, err
	}
	p.api = l
	return part{run: l.Run}, nil
}

// serverConsole serves the web console beside the API (nil part: off, or auto with its port taken).
func serverConsole(_ context.Context, p *process) (part, error) {
	l, err := serverrole.NewConsole(p.cfg, p.api, p.authn, p.listeners, p.srvLog)
	if err != nil || l == nil {
		return part{}, err
	}
	p.consoleURL = l.Addr()
	return part{run: l.Run}, nil
}

// serverBanner prints, once everything is listening, where the server is and a command to paste:
// the person who just started jq learns what to do next without reading the JSON log (stdout).
func serverBanner(_ context.Context, p *process) (part, error) {
	if p.banner == nil || p.api == nil {
		return part{}, nil
	}
	where := "postgres + redis"
	if p.pg == nil {
		where = "embedded store " + p.cfg.Store.SQLitePath() + " (for several server replicas: store.driver postgres, db.url; docs/embedded.md)"
	}
	scheme := "http"
	if p.cfg.GRPC.TLS.Enabled {
		scheme = "https"
	}
	var b strings.Builder
	fmt.Fprintf(&b, "jq is ready: %s\n", where)
	fmt.Fprintf(&b, "  API      %s://%s  (gRPC, gRPC-Web, Connect)\n", scheme, p.api.Addr())
	if p.consoleURL != "" {
		fmt.Fprintf(&b, "  console  %s://%s/\n", scheme, p.consoleURL)
	}
	if p.metrics != "" {
		fmt.Fprintf(&b, "  metrics  http://%s/metrics\n", p.metrics)
	}
	fmt.Fprintf(&b, "  health   http://%s/readyz\n", p.healthAddr)
	self, err := os.Executable()
	if err != nil {
		self = "jq"
	}
	fmt.Fprintf(&b, "Submit a job and wait for it:\n  %s\n", bannerSubmit(self, p.api.Addr(), p.cfg, term.IsTerminal(p.banner)))
	_, _ = io.WriteString(p.banner, b.String())
	return part{}, nil
}

// bannerSubmit is the banner's command to paste. With authentication on it must carry a token:
// this process's token file when it has one; its inline token only when the banner goes to a
// terminal (read by the person who started jq; stderr elsewhere may be a collected log, and the
// JSON log on stdout never holds it); otherwise it says where the token is.
func bannerSubmit(self, addr string, cfg *config.Config, terminal bool) string {
	cmd := self
	if addr != "127.0.0.1:50051" && addr != "localhost:50051" {
		cmd += " --server-addr " + addr
	}
	cmd += " job submit --wait"
	if !cfg.AuthRequired() {
		return cmd
	}
	switch {
	case cfg.TokenFile != "":
		return strings.Replace(cmd, self, self+" --token-file "+cfg.TokenFile, 1)
	case cfg.Token != "" && terminal:
		return "JQ_TOKEN=" + cfg.Token + " " + cmd
	case cfg.Token != "":
		return "JQ_TOKEN=<this process's token: config key token or JQ_TOKEN> " + cmd
	}
	return "JQ_TOKEN=<a producer or admin token: jq --role=admin token new, its entry in auth.tokens> " + cmd
}

func workerPart(ctx context.Context, p *process) (part, error) {
	var local executor.Conn
	if p.eng != nil && p.cfg.Worker.ServerAddr == config.Default().Worker.ServerAddr {
		// --role=all with the worker left pointing at its own server: the executor calls the
		// engine of this process directly (queue/inproc), with the checks of WorkerService and
		// no transport; the process trusts itself, so no credential is involved.
		local = inproc.New(inproc.Options{
			Engine: p.eng, Workers: p.st,
			Registration: executor.Registration{
				HeartbeatInterval: p.cfg.Worker.HeartbeatInterval(),
				HeartbeatTimeout:  p.cfg.Scheduler.HeartbeatTimeout(),
			},
		})
	}
	if local != nil {
		p.log.Named("worker").Info("the worker calls this process's engine directly (worker.server_addr left at its default)")
	}
	run, err := buildWorker(ctx, p.cfg, p.log.Named("worker"), local)
	return part{run: run}, err
}

func producerPart(ctx context.Context, p *process) (part, error) {
	run, err := buildProducer(ctx, p.cfg, p.log.Named("producer"))
	return part{run: run}, err
}

// openEventTail opens the Kafka reader of `jq --role=admin events tail`.
func openEventTail(ctx context.Context, k config.Kafka) (admin.EventStream, error) {
	return kafkastore.NewTail(ctx, kafkastore.TailConfig{
		Brokers:       k.Brokers,
		Topic:         k.TopicEvents,
		SASLMechanism: k.SASL.Mechanism,
		SASLUsername:  k.SASL.Username,
		SASLPassword:  k.SASL.Password,
		TLS:           k.TLS.Enabled,
		TLSCAPath:     k.TLS.CAPath,
	})
}

// buildRelay wires the outbox relay to Kafka; with kafka.enabled false there is none (nil, nil).
func buildRelay(cfg *config.Config, st store.OutboxStore, log *zap.Logger) (*outbox.Relay, *kafkastore.Sink, error) {
	k := cfg.Kafka
	if !k.Enabled {
		where := "postgres"
		if cfg.Store.Driver == config.StoreSQLite {
			where = "embedded store"
		}
		log.Info("kafka disabled: job events stay in the store and are not relayed", zap.String("setting", "kafka.enabled"),
			zap.String("store", where))
		return nil, nil, nil
	}
	sink, err := kafkastore.New(kafkastore.Config{
		Brokers:       k.Brokers,
		Acks:          k.Producer.Acks,
		Compression:   k.Producer.Compression,
		BatchSize:     k.Producer.BatchSize,
		CallSize:      outbox.DefaultBatchSize, // one claim per publish call
		Linger:        k.Producer.Linger(),
		SASLMechanism: k.SASL.Mechanism,
		SASLUsername:  k.SASL.Username,
		SASLPassword:  k.SASL.Password,
		TLS:           k.TLS.Enabled,
		TLSCAPath:     k.TLS.CAPath,
		// Convenient for development brokers; a production broker's own setting decides.
		AllowAutoTopicCreation: true,
		// The relay trims or parks the events over it first; the writer's batches stay under it too.
		MaxMessageBytes: k.MaxEventBytes,
	})
	if err != nil {
		return nil, nil, err
	}
	relay, err := outbox.New(outbox.Options{
		Store:           st,
		Sink:            sink,
		Log:             log.Named("outbox"),
		Encode:          api.MarshalEvent,
		TopicEvents:     k.TopicEvents,
		TopicDeadLetter: k.TopicDeadLetter,
		Lease:           k.RelayLease(),
		MaxEventBytes:   k.MaxEventBytes,
		EnsureTopics: func(ctx context.Context) error {
			created, err := sink.EnsureTopics(ctx, []string{k.TopicEvents, k.TopicDeadLetter}, k.Retention())
			if len(created) > 0 {
				log.Info("kafka topics created", zap.Strings("topics", created), zap.Duration("retention", k.Retention()))
			}
			return err
		},
		TraceHeaders: cfg.Tracing.Enabled,
	})
	if err != nil {
		_ = sink.Close()
		return nil, nil, err
	}
	return relay, sink, nil
}

// buildWorker wires the worker: an API client to the server (TLS when the
// worker.tls files are set) unless local is the connection (the engine of this process), the
// built-in handlers, and the component. It contacts nothing; the worker retries its registration
// until the server answers, so in --role=all the start order does not matter.
func buildWorker(ctx context.Context, cfg *config.Config, log *zap.Logger, local executor.Conn) (_ func(context.Context) error, err error) {
	tr, err := startTracing(ctx, cfg, "jq-worker", log)
	if err != nil {
		return nil, err
	}
	defer func() {
		if err != nil {
			stopTracing(ctx, tr, log)
		}
	}()
	token, err := clientToken(cfg)
	if err != nil {
		return nil, fmt.Errorf("worker: %w", err)
	}
	cl, err := rpcclient.New(rpcclient.Options{
		Token:          token,
		Addr:           workerServerAddr(cfg),
		CAFile:         cfg.Worker.TLS.CAPath,
		CertFile:       cfg.Worker.TLS.CertPath,
		KeyFile:        cfg.Worker.TLS.KeyPath,
		TracerProvider: tr.EnabledProvider(),
		Propagator:     tr.Propagator,
	})
	if err != nil {
		return nil, fmt.Errorf("worker: %w", err)
	}
	for i, k := range cfg.Worker.Exec.EnvAllow {
		if err := handlers.ExecEnvRefused(strings.TrimSuffix(k, "*")); err != nil {
			return nil, fmt.Errorf("worker.exec.env_allow[%d]: %w", i, err)
		}
	}
	mux := queue.NewMux()
	hopts := handlerOptions(cfg.Worker)
	// A synthetic job asking for more output than a result may hold fails before it works.
	hopts.Synthetic.MaxOutputBytes = cfg.Server.MaxResultBytes
	handlers.Register(mux, hopts)
	if cfg.Worker.Exec.Enabled {
		log.Info("exec handler enabled", zap.Strings("allow", cfg.Worker.Exec.Allow))
	}
	if len(cfg.Worker.File.Roots) > 0 {
		log.Info("file handler enabled", zap.Strings("roots", cfg.Worker.File.Roots))
	}
	if len(cfg.Worker.HTTP.Allow) > 0 {
		log.Info("http handler enabled", zap.Strings("allow", cfg.Worker.HTTP.Allow),
			zap.Bool("signed", cfg.Worker.HTTP.SigningSecret != ""))
	}
	if cfg.Worker.TestHandlers {
		mux.Register(handlers.TypeFault, handlers.Fault())
	}
	conn := local
	if conn == nil {
		conn = workerconn.New(cl)
	}
	reg := telemetry.NewRegistry()
	var wm *telemetry.WorkerMetrics
	w, err := worker.New(worker.Deps{
		Config: cfg, Log: log, Handlers: mux, Conn: conn,
		Metrics:   telemetry.MetricsHandler(reg),
		Listeners: telemetry.NewListeners(reg),
		Shutdown:  ctx.Done(),
		Tracer:    tr.Tracer(),

		OnJobDone:       func(d executor.JobDone) { wm.JobDone(d) }, // set below, before any job runs
		OnBreakerChange: func(c executor.BreakerChange) { wm.BreakerChanged(c) },
	})
	if err != nil {
		cl.Close()
		return nil, err
	}
	wm = telemetry.NewWorkerMetrics(reg, w.Executor().WorkerID(), cfg.Worker.Queues)
	wm.WatchExecutor(w.Executor())
	return func(ctx context.Context) error {
		defer stopTracing(ctx, tr, log) // after the executor's last spans
		defer cl.Close()
		err := w.Run(ctx)
		if errors.Is(err, executor.ErrNotAllowed) && token == "" && cfg.Worker.TLS.CertPath == "" {
			return fmt.Errorf("the server requires a token (set JQ_TOKEN or --token-file) or a client certificate (worker.tls.cert_path): %w", err)
		}
		return err
	}, nil
}

// buildProducer builds the directory scanner. Its rate limit is shared through Redis with every
// producer using the same key; a producer that cannot reach Redis limits itself alone (logged).
func buildProducer(ctx context.Context, cfg *config.Config, log *zap.Logger) (_ func(context.Context) error, err error) {
	pc := cfg.Producer
	tr, err := startTracing(ctx, cfg, "jq-producer", log)
	if err != nil {
		return nil, err
	}
	defer func() {
		if err != nil {
			stopTracing(ctx, tr, log)
		}
	}()
	token, err := clientToken(cfg)
	if err != nil {
		return nil, fmt.Errorf("producer: %w", err)
	}
	cl, err := rpcclient.New(rpcclient.Options{
		Token: token, Addr: producerServerAddr(cfg),
		CAFile: pc.TLS.CAPath, CertFile: pc.TLS.CertPath, KeyFile: pc.TLS.KeyPath,
		// The batch span's context travels with SubmitJobs, so the jobs join its trace.
		TracerProvider: tr.EnabledProvider(), Propagator: tr.Propagator,
	})
	if err != nil {
		return nil, fmt.Errorf("producer: %w", err)
	}
	deps := producer.Deps{Config: &pc, Log: log, Jobs: cl.Jobs, Progress: terminal(os.Stderr), Tracer: tr.Tracer()}
	var rdb *redis.Client
	// On the embedded store (--role=all, one process) there is no Redis: the producer limits its
	// own rate, as one that cannot reach Redis does.
	if pc.RateLimitPerSec > 0 && cfg.Store.Driver != config.StoreSQLite {
		rdb = newRedis(cfg)
		prefix := cfg.Redis.KeyPrefix
		if prefix == "" {
			prefix = redisstore.DefaultKeyPrefix
		}
		lim, err := redisstore.NewRateLimiter(rdb, prefix+":"+pc.RateLimitKey, pc.RateLimitPerSec, producer.Burst(pc.RateLimitPerSec))
		if err != nil {
			_ = rdb.Close()
			cl.Close()
			return nil, fmt.Errorf("producer: %w", err)
		}
		deps.Limiter = lim
	}
	reg := telemetry.NewRegistry()
	deps.Metrics = telemetry.NewProducerMetrics(reg, pc.Queue)
	p, err := producer.New(deps)
	if err != nil {
		if rdb != nil {
			_ = rdb.Close()
		}
		cl.Close()
		return nil, err
	}
	return func(ctx context.Context) error {
		defer stopTracing(ctx, tr, log) // after the last batch span
		defer cl.Close()
		if rdb != nil {
			defer func() { _ = rdb.Close() }()
		}
		if !pc.Once && pc.MetricsPort != 0 && cfg.Metrics.Enabled {
			stop, err := serveProducerMetrics(pc, cfg.Server.AllowedHosts, telemetry.MetricsHandler(reg), telemetry.NewListeners(reg), log)
			if err != nil {
				return err
			}
			defer stop()
		}
		err := p.Run(ctx)
		s := p.Stats()
		log.Info("producer stopped", zap.Int("scans", s.Passes), zap.Int("files_scanned", s.Scanned),
			zap.Int("jobs_submitted", s.Submitted), zap.Int("already_submitted", s.Existing), zap.Int("skipped", s.Skipped))
		if connect.CodeOf(err) == connect.CodeUnauthenticated && token == "" && pc.TLS.CertPath == "" {
			return fmt.Errorf("the server requires a token (set JQ_TOKEN or JQ_TOKEN_FILE) or a client certificate (producer.tls.cert_path): %w", err)
		}
		return err
	}, nil
}

// serveProducerMetrics serves /metrics and /healthz on producer.metrics_port until stop.
func serveProducerMetrics(pc config.Producer, allowedHosts []string, metrics http.Handler, lm *telemetry.Listeners, log *zap.Logger) (stop func(), err error) {
	ln, err := config.Listen("producer metrics", "producer.metrics_port", pc.BindHost, pc.MetricsPort)
	if err != nil {
		return nil, err
	}
	mux := http.NewServeMux()
	mux.Handle("GET /metrics", metrics)
	mux.Handle("GET /healthz", health.LiveHandler())
	srv := netlimit.SideServer(hostcheck.ForListener(pc.BindHost, false, allowedHosts).Handler(mux), 30*time.Second)
	ln = lm.Wrap(telemetry.ListenerMetrics, ln, netlimit.SideOptions())
	go func() { _ = srv.Serve(ln) }()
	log.Info("producer metrics listening", zap.String("addr", ln.Addr().String()))
	return func() { _ = srv.Close() }, nil
}

// producerServerAddr is producer.server_addr, following a non-default grpc.port when left at the
// default (--role=all: the server in the same process), as workerServerAddr.
func producerServerAddr(cfg *config.Config) string {
	def := config.Default()
	if cfg.Producer.ServerAddr == def.Producer.ServerAddr && cfg.GRPC.Port != def.GRPC.Port {
		return net.JoinHostPort("127.0.0.1", strconv.Itoa(cfg.GRPC.Port))
	}
	return cfg.Producer.ServerAddr
}

// terminal is f when it is a terminal (a character device), else nil.
func terminal(f *os.File) io.Writer {
	if term.IsTerminal(f) {
		return f
	}
	return nil
}

// clientToken is the token this process presents to a server: token, or token_file's content.
func clientToken(cfg *config.Config) (string, error) {
	if cfg.TokenFile != "" {
		return rpcclient.ReadTokenFile(cfg.TokenFile)
	}
	return cfg.Token, nil
}

// handlerOptions configures the built-in handlers from the worker section.
func handlerOptions(w config.Worker) handlers.Options {
	return handlers.Options{
		Exec: execOptions(w.Exec),
		File: handlers.FileOptions{Roots: w.File.Roots, DoneDir: w.File.DoneDir, FailedDir: w.File.FailedDir},
		HTTP: handlers.HTTPOptions{
			Allow: w.HTTP.Allow, SigningSecret: w.HTTP.SigningSecret, MaxResponseBytes: w.HTTP.MaxResponseBytes,
		},
	}
}

// execOptions turns worker.exec into the exec handler's options; nil (exec
// disabled) unless worker.exec.enabled, which validation pairs with a
// non-empty allow-list.
func execOptions(c config.WorkerExec) *handlers.ExecOptions {
	if !c.Enabled {
		return nil
	}
	return &handlers.ExecOptions{Allow: c.Allow, EnvAllow: c.EnvAllow}
}

// workerServerAddr is worker.server_addr, except that a worker left at the
// default address follows a server on a non-default grpc.port: in
// --role=all the worker talks to the server in the same process.
func workerServerAddr(cfg *config.Config) string {
	def := config.Default()
	if cfg.Worker.ServerAddr == def.Worker.ServerAddr && cfg.GRPC.Port != def.GRPC.Port {
		return net.JoinHostPort("127.0.0.1", strconv.Itoa(cfg.GRPC.Port))
	}
	return cfg.Worker.ServerAddr
}

// redisLogger sends go-redis's own messages (connection pool dial failures during an outage) to the
// JSON log at debug level: the components that use Redis log the outage once, with context.
type redisLogger struct{ log *zap.Logger }

func (l redisLogger) Printf(_ context.Context, format string, v ...any) {
	if ce := l.log.Check(zap.DebugLevel, "redis client message"); ce != nil {
		ce.Write(zap.String("detail", fmt.Sprintf(format, v...)))
	}
}

func newRedis(cfg *config.Config) *redis.Client {
	maxRetries := cfg.Redis.MaxRetries
	if maxRetries == 0 {
		maxRetries = -1 // go-redis reads 0 as its default (3); -1 is none
	}
	return redis.NewClient(&redis.Options{
		Addr:                  cfg.Redis.Addr,
		Username:              cfg.Redis.Username,
		Password:              cfg.Redis.Password,
		DB:                    cfg.Redis.DB,
		DialTimeout:           cfg.Redis.ConnectTimeout(),
		PoolSize:              cfg.Redis.PoolSize(),
		MinIdleConns:          cfg.Redis.MinIdleConns,
		ReadTimeout:           cfg.Redis.ReadTimeout(),
		WriteTimeout:          cfg.Redis.WriteTimeout(),
		MaxRetries:            maxRetries,
		ContextTimeoutEnabled: true,
	})
}

// dependencyChecks are the probes behind /readyz and GetStatus (and so
// `jq --role=admin status`). Postgres and its schema are critical. Redis is
// not: while it is down the server dispatches straight from Postgres
// (docs/architecture.md), so the server stays ready and reports redis
// "degraded". Without Kafka events wait in the outbox.
//
// On the embedded store the one check is the database file's (sqlite, critical): its schema is
// applied when it opens, and dispatch is in-process.
func dependencyChecks(cfg *config.Config, st serverStore, pg *postgres.Store, rdb *redis.Client) []health.Check {
	checks := []health.Check{{Name: "sqlite", Critical: true, Probe: st.Ping}}
	if pg != nil {
		checks = []health.Check{
			{Name: "postgres", Critical: true, Probe: pg.Ping},
			{Name: "migrations", Critical: true, Probe: func(ctx context.Context) error { return schemaCurrent(ctx, pg) }},
			{Name: "redis", Probe: func(ctx context.Context) error { return rdb.Ping(ctx).Err() }},
		}
	}
	if cfg.Kafka.Enabled {
		checks = append(checks, health.Check{Name: "kafka", Probe: func(ctx context.Context) error {
			return kafkaPing(ctx, cfg.Kafka.Brokers)
		}})
	}
	return checks
}

// schemaCurrent fails when the database's schema is older than the version
// this binary embeds (the code needs what is missing) or a migration failed
// half-way. A newer schema is fine: migrations only add (columns, indexes,
// tables), so during a rolling upgrade the old replicas keep serving after the
// first new one migrated, and a binary rollback keeps working.
func schemaCurrent(ctx context.Context, st *postgres.Store) error {
	want, err := migrations.Latest()
	if err != nil {
		return err
	}
	got, dirty, err := st.SchemaVersion(ctx)
	switch {
	case err != nil:
		return err
	case dirty:
		return fmt.Errorf("schema version %d is dirty: a migration failed half-way; fix it and force the version (golang-migrate)", got)
	case got < want:
		return fmt.Errorf("schema version %d, this binary needs %d", got, want)
	}
	return nil
}

// kafkaPing succeeds when any broker answers a metadata request.
func kafkaPing(ctx context.Context, brokers []string) error {
	var errs []error
	for _, b := range brokers {
		conn, err := (&kafka.Dialer{Timeout: 3 * time.Second}).DialContext(ctx, "tcp", b)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		if dl, ok := ctx.Deadline(); ok {
			_ = conn.SetDeadline(dl)
		}
		_, err = conn.Brokers()
		_ = conn.Close()
		if err == nil {
			return nil
		}
		errs = append(errs, fmt.Errorf("%s: %w", b, err))
	}
	return errors.Join(errs...)
}

// dryRun validates connectivity (the configuration is already valid: Load
// checked it) and prints a summary table (FR-046).
func dryRun(ctx context.Context, cfg *config.Config, out io.Writer) int {
	timeout := cfg.DB.ConnectTimeout()
	checks := []health.Check{{Name: "config", Critical: true, Probe: func(context.Context) error { return nil }}}
	if cfg.Store.Driver == config.StoreSQLite {
		// Opens (creating) the database and releases it: a data directory that cannot be written,
		// or a database another jq holds, fails here.
		checks = append(checks, health.Check{Name: "sqlite", Critical: true, Probe: func(ctx context.Context) error {
			st, err := openSQLite(ctx, cfg)
			if err != nil {
				return err
			}
			st.Close()
			return nil
		}})
	} else {
		checks = append(checks, health.Check{Name: "postgres", Critical: true, Probe: func(ctx context.Context) error {
			st, err := postgres.New(ctx, postgres.Config{DSN: cfg.DB.DSN(), MaxConns: 1, ConnectTimeout: timeout})
			if err != nil {
				return postgresHint(err)
			}
			st.Close()
			return nil
		}})
		rdb := newRedis(cfg)
		defer func() { _ = rdb.Close() }()
		checks = append(checks, health.Check{Name: "redis", Critical: true, Probe: func(ctx context.Context) error {
			return rdb.Ping(ctx).Err()
		}})
	}
	if cfg.Kafka.Enabled {
		checks = append(checks, health.Check{Name: "kafka", Critical: true, Probe: func(ctx context.Context) error {
			return kafkaPing(ctx, cfg.Kafka.Brokers)
		}})
	}
	res := health.Run(ctx, max(timeout, 3*time.Second), checks)
	target := map[string]string{
		"config":   "valid",
		"sqlite":   cfg.Store.SQLitePath(),
		"postgres": redactDSN(cfg),
		"redis":    cfg.Redis.Addr,
		"kafka":    strings.Join(cfg.Kafka.Brokers, ","),
	}
	tw := tabwriter.NewWriter(out, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "CHECK\tTARGET\tRESULT\tLATENCY\tDETAIL")
	for _, r := range res {
		result := "ok"
		if !r.Healthy {
			result = "FAIL"
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\n", r.Name, target[r.Name], result, r.Latency.Round(time.Millisecond), oneLine(r.Detail))
	}
	if !cfg.Kafka.Enabled {
		fmt.Fprintln(tw, "kafka\t-\tskipped\t-\tkafka.enabled is false: events stay in the store")
	}
	_ = tw.Flush()
	if !health.AllHealthy(res) {
		return ExitError
	}
	return ExitOK
}

// redactDSN shows where Postgres is without any credential.
func redactDSN(cfg *config.Config) string {
	u, err := url.Parse(cfg.DB.DSN())
	if err != nil || u.Host == "" {
		return cfg.DB.Host + ":" + strconv.Itoa(cfg.DB.Port)
	}
	return u.User.Username() + "@" + u.Host + u.Path
}
