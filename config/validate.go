package config

import (
	"errors"
	"fmt"
	"math"
	"net"
	"net/url"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
)

// ErrInvalid matches (errors.Is) every problem with a configuration value.
var ErrInvalid = errors.New("invalid configuration")

// FieldError is one configuration problem, tied to its key path. Source is
// set when a value could not be read ("env JQ_GRPC_PORT", "file x.yaml",
// "flag") and empty for rules checked on the merged result.
type FieldError struct {
	Key    string
	Source string
	Msg    string
}

func (e *FieldError) Error() string {
	if e.Source != "" {
		return e.Key + " (" + e.Source + "): " + e.Msg
	}
	return e.Key + ": " + e.Msg
}

// Is reports true for ErrInvalid.
func (e *FieldError) Is(target error) bool { return target == ErrInvalid }

const (
	maxBatch       = 10000
	maxConcurrency = 10000
	// Connection timeouts of the API listener: at most a day (a disabled timeout is what let idle
	// connections pile up).
	maxTimeoutS = 86400
	// A page must hold a job's metadata; past 1 GiB it bounds nothing.
	minPageBytes = 64 << 10
	maxPageBytes = 1 << 30
	// An event without its trace context is a few hundred bytes; Kafka's own ceiling on a message
	// is a broker setting, rarely raised past 100 MiB.
	minEventBytes = 4 << 10
	maxEventBytes = 100 << 20
)

var (
	queueNameRE  = regexp.MustCompile(`^[a-z0-9][a-z0-9_.-]{0,63}$`)
	topicRE      = regexp.MustCompile(`^[A-Za-z0-9._-]{1,249}$`)
	keyPrefixRE  = regexp.MustCompile(`^[A-Za-z0-9_.:-]{1,64}$`)
	redisUserRE  = regexp.MustCompile(`^[!-~]{1,128}$`)
	workerIDRE   = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9_.:@-]{0,127}$`)
	hostnameRE   = regexp.MustCompile(`^[A-Za-z0-9]([A-Za-z0-9.-]{0,251}[A-Za-z0-9])?$`)
	logLevels    = []string{"trace", "debug", "info", "warn", "error"}
	logFormats   = []string{"json", "text"}
	sslModes     = []string{"disable", "allow", "prefer", "require", "verify-ca", "verify-full"}
	kafkaAcks    = []string{"all", "one", "none"}
	compressions = []string{"none", "gzip", "snappy", "lz4", "zstd"}
	offsetResets = []string{"earliest", "latest"}
	saslMechs    = []string{"", "plain", "scram-sha-256", "scram-sha-512"}
	otlpProtos   = []string{"grpc", "http"}
)

// Validate checks the whole tree and returns every problem joined
// (errors.Join), one line each, prefixed by its key path; every problem
// matches ErrInvalid. It does no I/O: file paths and addresses are checked
// for shape, not reachability.
func (c *Config) Validate() error { return errors.Join(c.problems()...) }

func (c *Config) problems() []error {
	p := checker{portOffset: c.PortOffset}

	p.port("grpc.port", c.GRPC.Port)
	p.positive("grpc.max_message_bytes", c.GRPC.MaxMessageBytes)
	p.between("grpc.read_header_timeout_s", c.GRPC.ReadHeaderTimeoutS, 1, maxTimeoutS)
	p.between("grpc.idle_timeout_s", c.GRPC.IdleTimeoutS, 1, maxTimeoutS)
	p.between("grpc.read_body_timeout_s", c.GRPC.ReadBodyTimeoutS, 1, maxTimeoutS)
	if c.GRPC.MaxConnections < 0 {
		p.add("grpc.max_connections", "must be 0 (sized from the file-descriptor limit) or more, got %d", c.GRPC.MaxConnections)
	}
	if c.GRPC.MaxConnectionsPerSource < 0 {
		p.add("grpc.max_connections_per_source", "must be 0 (unlimited) or more, got %d", c.GRPC.MaxConnectionsPerSource)
	}
	if c.GRPC.TLS.Enabled {
		p.required("grpc.tls.cert_path", c.GRPC.TLS.CertPath, "when grpc.tls.enabled is true")
		p.required("grpc.tls.key_path", c.GRPC.TLS.KeyPath, "when grpc.tls.enabled is true")
	} else if c.GRPC.TLS.ClientCAPath != "" {
		p.add("grpc.tls.client_ca_path", "mTLS needs grpc.tls.enabled: true")
	}

	p.positive("server.shutdown_grace_s", c.Server.ShutdownGraceS)
	p.positive("server.max_payload_bytes", c.Server.MaxPayloadBytes)
	p.positive("server.max_result_bytes", c.Server.MaxResultBytes)
	p.positive("server.event_retention_h", c.Server.EventRetentionH)
	p.between("server.schedule_misfire_grace_s", c.Server.ScheduleMisfireGraceS, 1, maxTimeoutS)
	p.between("server.max_page_bytes", c.Server.MaxPageBytes, minPageBytes, maxPageBytes)
	if c.GRPC.MaxMessageBytes > 0 {
		p.atMost("server.max_payload_bytes", c.Server.MaxPayloadBytes, "grpc.max_message_bytes", c.GRPC.MaxMessageBytes)
		p.atMost("server.max_result_bytes", c.Server.MaxResultBytes, "grpc.max_message_bytes", c.GRPC.MaxMessageBytes)
	}

	c.validateStore(&p)
	if c.Store.Driver != StoreSQLite {
		c.validateDB(&p)
	}
	c.validateSchedules(&p)

	p.hostPort("redis.addr", c.Redis.Addr)
	if c.Redis.DB < 0 {
		p.add("redis.db", "must not be negative, got %d", c.Redis.DB)
	}
	p.positive("redis.connect_timeout_ms", c.Redis.ConnectTimeoutMS)
	p.match("redis.key_prefix", c.Redis.KeyPrefix, keyPrefixRE)
	if u := c.Redis.Username; u != "" && !redisUserRE.MatchString(u) {
		p.add("redis.username", "want 1..128 printable ASCII characters without spaces, got %d bytes", len(u))
	}
	p.between("redis.pool_size_multiplier", c.Redis.PoolSizeMultiplier, 1, 1000)
	p.between("redis.min_idle_conns", c.Redis.MinIdleConns, 0, 10000)
	p.between("redis.read_timeout_ms", c.Redis.ReadTimeoutMS, 1, 600000)
	p.between("redis.write_timeout_ms", c.Redis.WriteTimeoutMS, 1, 600000)
	p.between("redis.max_retries", c.Redis.MaxRetries, 0, 100)

	c.validateKafka(&p)

	p.positive("scheduler.interval_ms", c.Scheduler.IntervalMS)
	p.between("scheduler.batch_size", c.Scheduler.BatchSize, 1, maxBatch)
	p.positive("scheduler.assignment_timeout_s", c.Scheduler.AssignmentTimeoutS)
	p.positive("scheduler.worker_heartbeat_timeout_s", c.Scheduler.WorkerHeartbeatTimeoutS)
	p.positive("scheduler.reaper_interval_ms", c.Scheduler.ReaperIntervalMS)
	if c.Scheduler.TimeoutGraceS < 0 {
		p.add("scheduler.timeout_grace_s", "must be 0 or more, got %d", c.Scheduler.TimeoutGraceS)
	}

	p.port("metrics.port", c.Metrics.Port)
	p.port("health.port", c.Health.Port)
	p.host("metrics.host", c.Metrics.Host)
	p.host("health.host", c.Health.Host)
	p.distinctPorts(map[string]int{"grpc.port": c.GRPC.Port, "metrics.port": c.Metrics.Port, "health.port": c.Health.Port})

	p.oneOf("logging.level", c.Logging.Level, logLevels)
	p.oneOf("logging.format", c.Logging.Format, logFormats)

	p.oneOf("tracing.protocol", c.Tracing.Protocol, otlpProtos)
	if !(c.Tracing.SampleRatio >= 0 && c.Tracing.SampleRatio <= 1) {
		p.add("tracing.sample_ratio", "must be between 0 and 1, got %v", c.Tracing.SampleRatio)
	}
	c.validateTracingEndpoint(&p)

	c.validateWorker(&p)
	c.validateProducer(&p)
	c.validateAuth(&p)
	c.validateUI(&p)
	return p.errs
}

// validateAuth checks shapes; the token and certificate entries themselves are parsed (and
// reported with their index) when the server starts, by package api/auth.
func (c *Config) validateAuth(p *checker) {
	a := c.Auth
	p.oneOf("auth.enabled", a.Enabled, []string{AuthAuto, AuthOn, AuthOff})
	if !(a.RateLimitPerSec >= 0) || math.IsInf(a.RateLimitPerSec, 0) {
		p.add("auth.rate_limit_per_sec", "must be 0 (unlimited) or more, got %v", a.RateLimitPerSec)
	}
	if a.RateBurst < 0 {
		p.add("auth.rate_burst", "must be 0 (one second's worth) or more, got %d", a.RateBurst)
	}
	if !(a.RefusalRatePerSource >= 0) || math.IsInf(a.RefusalRatePerSource, 0) {
		p.add("auth.refusal_rate_per_source", "must be 0 (unlimited) or more, got %v", a.RefusalRatePerSource)
	}
	p.positive("auth.max_workers_per_principal", a.MaxWorkersPerPrincipal)
	p.positive("auth.max_streams_per_principal", a.MaxStreamsPerPrincipal)
	p.positive("server.max_workers", c.Server.MaxWorkers)
	if c.Server.OfflineWorkerRetentionS < 0 {
		p.add("server.offline_worker_retention_s", "must be 0 (kept for ever) or more, got %d", c.Server.OfflineWorkerRetentionS)
	}
	p.positive("server.max_streams", c.Server.MaxStreams)
	for i, h := range c.Server.AllowedHosts {
		if h == "" || strings.ContainsAny(h, ":/ []@") {
			p.add("server.allowed_hosts["+strconv.Itoa(i)+"]", "must be a host name without scheme, port or path, got %q", h)
		}
	}
	if c.Token != "" && c.TokenFile != "" {
		p.add("token_file", "set token or token_file, not both")
	}
}

func (c *Config) validateStore(p *checker) {
	p.oneOf("store.driver", c.Store.Driver, []string{StoreAuto, StoreSQLite, StorePostgres})
	p.oneOf("store.synchronous", c.Store.Synchronous, []string{"NORMAL", "FULL"})
	if c.Store.Driver != StorePostgres {
		p.required("store.data_dir", c.Store.DataDir, "for the embedded store")
	}
}

func (c *Config) validateDB(p *checker) {
	d := c.DB
	if d.URL != "" {
		u, err := url.Parse(d.URL)
		if err != nil || (u.Scheme != "postgres" && u.Scheme != "postgresql") {
			p.add("db.url", "must be a postgres:// or postgresql:// URL")
		}
	} else {
		p.required("db.host", d.Host, "when db.url is empty")
		p.port("db.port", d.Port)
		p.required("db.name", d.Name, "when db.url is empty")
		p.required("db.user", d.User, "when db.url is empty")
		p.oneOf("db.sslmode", d.SSLMode, sslModes)
	}
	if d.PoolSize < 1 {
		p.add("db.pool_size", "must be at least 1, got %d", d.PoolSize)
	}
	p.positive("db.connect_timeout_ms", d.ConnectTimeoutMS)
}

func (c *Config) validateKafka(p *checker) {
	k := c.Kafka
	p.oneOf("kafka.producer.acks", k.Producer.Acks, kafkaAcks)
	p.oneOf("kafka.producer.compression", k.Producer.Compression, compressions)
	p.between("kafka.producer.batch_size", k.Producer.BatchSize, 1, maxBatch)
	if k.Producer.LingerMS < 0 {
		p.add("kafka.producer.linger_ms", "must not be negative, got %d", k.Producer.LingerMS)
	}
	p.oneOf("kafka.consumer.auto_offset_reset", k.Consumer.AutoOffsetReset, offsetResets)
	p.oneOf("kafka.sasl.mechanism", k.SASL.Mechanism, saslMechs)
	p.match("kafka.topic_events", k.TopicEvents, topicRE)
	p.match("kafka.topic_dead_letter", k.TopicDeadLetter, topicRE)
	p.positive("kafka.retention_h", k.RetentionH)
	p.between("kafka.relay_lease_s", k.RelayLeaseS, 2, 3600)
	p.between("kafka.max_event_bytes", k.MaxEventBytes, minEventBytes, maxEventBytes)
	if !k.Enabled {
		return
	}
	if len(k.Brokers) == 0 {
		p.add("kafka.brokers", "must list at least one broker when kafka.enabled is true")
	}
	for i, b := range k.Brokers {
		p.hostPort("kafka.brokers["+strconv.Itoa(i)+"]", b)
	}
	p.required("kafka.consumer.group_id", k.Consumer.GroupID, "when kafka.enabled is true")
	if k.SASL.Mechanism != "" {
		p.required("kafka.sasl.username", k.SASL.Username, "when kafka.sasl.mechanism is set")
		p.required("kafka.sasl.password", k.SASL.Password, "when kafka.sasl.mechanism is set (use "+EnvVar("kafka.sasl.password")+")")
	}
}

func (c *Config) validateWorker(p *checker) {
	w := c.Worker
	// One server, or several replicas (comma-separated) that the worker fails over between.
	for _, a := range strings.Split(w.ServerAddr, ",") {
		p.hostPort("worker.server_addr", strings.TrimSpace(a))
	}
	if w.ID != "" {
		p.match("worker.id", w.ID, workerIDRE)
	}
	p.between("worker.concurrency", w.Concurrency, 1, maxConcurrency)
	if w.AckDelayMS < 0 {
		p.add("worker.ack_delay_ms", "must be 0 (acknowledge every start at once) or more, got %d", w.AckDelayMS)
	}
	if w.Prefetch < -1 || w.Prefetch > w.Concurrency {
		p.add("worker.prefetch", "must be -1 (as many as worker.concurrency), 0 or up to worker.concurrency (%d), got %d", w.Concurrency, w.Prefetch)
	}
	if len(w.Queues) == 0 {
		p.add("worker.queues", "must name at least one queue")
	}
	for i, q := range w.Queues {
		key := "worker.queues[" + strconv.Itoa(i) + "]"
		if !queueNameRE.MatchString(q) {
			p.add(key, "%q is not a valid queue name (want %s)", q, queueNameRE)
		} else if slices.Index(w.Queues, q) < i {
			p.add(key, "%q is listed twice", q)
		}
	}
	p.positive("worker.heartbeat_interval_s", w.HeartbeatIntervalS)
	if w.HeartbeatIntervalS > 0 && c.Scheduler.WorkerHeartbeatTimeoutS > 0 &&
		w.HeartbeatIntervalS >= c.Scheduler.WorkerHeartbeatTimeoutS {
		p.add("worker.heartbeat_interval_s", "must be less than scheduler.worker_heartbeat_timeout_s (%d), got %d",
			c.Scheduler.WorkerHeartbeatTimeoutS, w.HeartbeatIntervalS)
	}
	p.positive("worker.shutdown_grace_s", w.ShutdownGraceS)
	p.port("worker.metrics_port", w.MetricsPort)
	p.port("worker.health_port", w.HealthPort)
	p.distinctPorts(map[string]int{"worker.metrics_port": w.MetricsPort, "worker.health_port": w.HealthPort})
	if (w.TLS.CertPath == "") != (w.TLS.KeyPath == "") {
		p.add("worker.tls", "cert_path and key_path must be set together")
	}
	p.host("worker.bind_host", w.BindHost)
	if cb := w.CircuitBreaker; cb.Enabled {
		if !(cb.FailureThreshold > 0 && cb.FailureThreshold <= 1) {
			p.add("worker.circuit_breaker.failure_threshold", "must be above 0 and at most 1, got %v", cb.FailureThreshold)
		}
		p.positive("worker.circuit_breaker.window_s", cb.WindowS)
		p.positive("worker.circuit_breaker.cooldown_period_s", cb.CooldownPeriodS)
		p.positive("worker.circuit_breaker.min_samples", cb.MinSamples)
	}
	if w.Exec.Enabled && len(w.Exec.Allow) == 0 {
		p.add("worker.exec.allow", "must list at least one program (an absolute path) when worker.exec.enabled is true")
	}
	for i, prog := range w.Exec.Allow {
		if !filepath.IsAbs(prog) {
			p.add("worker.exec.allow["+strconv.Itoa(i)+"]", "must be an absolute path, got %q", prog)
		}
	}
	for i, root := range w.File.Roots {
		p.absPath("worker.file.roots["+strconv.Itoa(i)+"]", root)
	}
	if w.File.DoneDir != "" {
		p.absPath("worker.file.done_dir", w.File.DoneDir)
	}
	if w.File.FailedDir != "" {
		p.absPath("worker.file.failed_dir", w.File.FailedDir)
	}
	for i, a := range w.HTTP.Allow {
		p.urlPrefix("worker.http.allow["+strconv.Itoa(i)+"]", a)
	}
	p.between("worker.http.max_response_bytes", w.HTTP.MaxResponseBytes, 1, maxPageBytes)
}

func (p *checker) absPath(key, v string) {
	if !filepath.IsAbs(v) {
		p.add(key, "must be an absolute path, got %q", v)
	}
}

// urlPrefix accepts an absolute http(s) URL with a host and without user
// information, query or fragment (package handlers matches it; see
// handlers.URLPrefix).
func (p *checker) urlPrefix(key, v string) {
	u, err := url.Parse(v)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || u.Hostname() == "" {
		p.add(key, "must be an absolute http(s) URL, got %q", v)
		return
	}
	if u.User != nil || u.RawQuery != "" || u.ForceQuery || strings.Contains(v, "#") {
		p.add(key, "must not have user information, a query or a fragment, got %q", v)
	}
}

type checker struct {
	errs []error
	// portOffset is port_offset, already added to every listen port: a port out of range says so.
	portOffset int
}

func (p *checker) add(key, format string, args ...any) {
	p.errs = append(p.errs, &FieldError{Key: key, Msg: fmt.Sprintf(format, args...)})
}

func (p *checker) port(key string, v int) {
	if v < 1 || v > 65535 {
		if p.portOffset != 0 && key != "db.port" {
			p.add(key, "must be a port between 1 and 65535, got %d (port_offset %d included)", v, p.portOffset)
			return
		}
		p.add(key, "must be a port between 1 and 65535, got %d", v)
	}
}

// host checks a listen address: an IP address or a host name without a port ("" = all interfaces).
func (p *checker) host(key, h string) {
	if h != "" && net.ParseIP(h) == nil && !hostnameRE.MatchString(h) {
		p.add(key, "must be an IP address or a host name without a port (\"\" = all interfaces), got %q", h)
	}
}

func (p *checker) positive(key string, v int) {
	if v <= 0 {
		p.add(key, "must be positive, got %d", v)
	}
}

func (p *checker) between(key string, v, lo, hi int) {
	if v < lo || v > hi {
		p.add(key, "must be between %d and %d, got %d", lo, hi, v)
	}
}

func (p *checker) atMost(key string, v int, limitKey string, limit int) {
	if v > limit {
		p.add(key, "must not exceed %s (%d), got %d", limitKey, limit, v)
	}
}

func (p *checker) required(key, v, when string) {
	if strings.TrimSpace(v) == "" {
		p.add(key, "is required %s", when)
	}
}

func (p *checker) oneOf(key, v string, allowed []string) {
	if slices.Contains(allowed, v) {
		return
	}
	opts := make([]string, len(allowed))
	for i, a := range allowed {
		opts[i] = strconv.Quote(a)
	}
	p.add(key, "must be one of %s, got %q", strings.Join(opts, ", "), v)
}

func (p *checker) match(key, v string, re *regexp.Regexp) {
	if !re.MatchString(v) {
		p.add(key, "%q does not match %s", v, re)
	}
}

// validateTracingEndpoint accepts "" (the exporter's default), host:port, or
// an http(s) URL (http://collector:4318).
func (c *Config) validateTracingEndpoint(p *checker) {
	e := c.Tracing.Endpoint
	switch {
	case e == "":
	case strings.Contains(e, "://"):
		u, err := url.Parse(e)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			p.add("tracing.endpoint", "must be host:port or an http(s) URL, got %q", e)
		}
	default:
		p.hostPort("tracing.endpoint", e)
	}
}

func (p *checker) hostPort(key, v string) {
	host, port, err := net.SplitHostPort(v)
	if err != nil || host == "" {
		p.add(key, "must be host:port, got %q", v)
		return
	}
	if n, err := strconv.Atoi(port); err != nil || n < 1 || n > 65535 {
		p.add(key, "port must be between 1 and 65535, got %q", port)
	}
}

func (p *checker) distinctPorts(ports map[string]int) {
	names := make([]string, 0, len(ports))
	for k := range ports {
		names = append(names, k)
	}
	slices.Sort(names)
	for i, a := range names {
		for _, b := range names[i+1:] {
			if ports[a] == ports[b] {
				p.add(b, "port %d is already used by %s", ports[b], a)
			}
		}
	}
}

// validateUI checks the console's keys; its port must differ from the server's other ports when it
// must be served (with auto, a taken port only costs the console: roles/server).
func (c *Config) validateUI(p *checker) {
	p.oneOf("ui.enabled", c.UI.Enabled, []string{UIAuto, UIOn, UIOff})
	p.port("ui.port", c.UI.Port)
	if c.UI.Enabled == UIOn {
		for _, o := range []struct {
			key  string
			port int
		}{{"grpc.port", c.GRPC.Port}, {"health.port", c.Health.Port}, {"metrics.port", c.Metrics.Port}} {
			if o.port == c.UI.Port {
				p.add("ui.port", "port %d is already used by %s", c.UI.Port, o.key)
			}
		}
	}
	if t := c.UI.TracingURL; t != "" {
		u, err := url.Parse(strings.ReplaceAll(t, "{trace_id}", "x"))
		switch {
		case err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "":
			p.add("ui.tracing_url", "want an http(s) URL, got %q", t)
		case !strings.Contains(t, "{trace_id}"):
			p.add("ui.tracing_url", "must contain {trace_id}, where the job's trace id goes")
		}
	}
}
