// Package config is jq's configuration: one tree of plain structs, every
// default in Default, layered loading (flags > JQ_ environment variables >
// YAML file > defaults) in Load, and a single Validate pass that reports every
// problem at once. A loaded Config is read-only; Redacted and YAML print it
// with secrets hidden for --print-config.
//
// Key paths are the snake_case `koanf` tags joined with "." (db.pool_size).
// The environment variable for a key is JQ_ plus the key path upper-cased with
// "." replaced by "_" (JQ_DB_POOL_SIZE). Durations are integer keys whose name
// carries the unit (_ms, _s, _h); use the Duration helper methods instead of
// multiplying by hand.
package config

import (
	"math"
	"net"
	"net/url"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"time"

	"github.com/jq-dev/jq/queue"
)

// Config is the whole configuration tree. Every role reads the sections it
// needs; unused sections are still validated so a typo never hides.
type Config struct {
	GRPC      GRPC      `koanf:"grpc"`
	Server    Server    `koanf:"server"`
	Store     Store     `koanf:"store"`
	DB        DB        `koanf:"db"`
	Redis     Redis     `koanf:"redis"`
	Kafka     Kafka     `koanf:"kafka"`
	Scheduler Scheduler `koanf:"scheduler"`
	Metrics   Metrics   `koanf:"metrics"`
	Health    Health    `koanf:"health"`
	Logging   Logging   `koanf:"logging"`
	Tracing   Tracing   `koanf:"tracing"`
	Worker    Worker    `koanf:"worker"`
	Producer  Producer  `koanf:"producer"`
	Auth      Auth      `koanf:"auth"`
	UI        UI        `koanf:"ui"`
	// Schedules are the periodic jobs declared as code (docs/schedules.md), reconciled at each
	// server's start.
	Schedules []Schedule `koanf:"schedules"`

	// Token is the API token this process presents to a jq server (the worker and producer roles, the
	// in-process worker of --role=all); TokenFile reads it from a file instead (a mounted
	// secret). Empty: none (a server with authentication off, or mTLS identity).
	Token     string `koanf:"token" secret:"true"`
	TokenFile string `koanf:"token_file"`

	// PortOffset is added to every listen port of this process (grpc.port, health.port,
	// metrics.port, ui.port, worker.health_port, worker.metrics_port, producer.metrics_port), once,
	// when the configuration is loaded: the one setting that moves a second instance on the same
	// host off the first one's ports. The addresses this process connects to are left alone.
	PortOffset int `koanf:"port_offset"`
}

// Auth is the server's authentication and authorization (docs/security.md).
type Auth struct {
	// Enabled is auto, true or false. auto (the default) turns authentication on whenever the
	// API listens on anything but a loopback address.
	Enabled string `koanf:"enabled"`
	// Tokens are the accepted API tokens, hashed:
	// "name=ingest;roles=producer;sha256=<hex>[;queues=a+b]" (jq --role=admin token new).
	Tokens []string `koanf:"tokens"`
	// TokensFile holds more entries, one a line (# comments), read at start.
	TokensFile string `koanf:"tokens_file"`
	// MTLSPrincipals map client certificates to principals:
	// "cn=worker-*;roles=worker[;queues=a+b]" (or dns=, uri=).
	MTLSPrincipals []string `koanf:"mtls_principals"`
	// AllowInsecure lets a server listen on a non-loopback address with authentication off, or
	// with authentication on but without TLS (tokens in cleartext: a private network or a
	// TLS-terminating proxy must protect them).
	AllowInsecure bool `koanf:"allow_insecure"`
	// RateLimitPerSec is each principal's sustained request rate (0: unlimited); RateBurst the
	// requests it may make at once.
	RateLimitPerSec float64 `koanf:"rate_limit_per_sec"`
	RateBurst       int     `koanf:"rate_burst"`
	// RefusalRatePerSource is the requests refused for their credentials that one source
	// address may cause per second (burst twice that) before its connections are closed (0:
	// unlimited).
	RefusalRatePerSource float64 `koanf:"refusal_rate_per_source"`
	// MaxWorkersPerPrincipal bounds the live (not OFFLINE) workers one principal registers;
	// MaxStreamsPerPrincipal the assignment streams it holds open on one server (and, counted apart,
	// its watch streams: WatchJob, WatchEvents).
	MaxWorkersPerPrincipal int `koanf:"max_workers_per_principal"`
	MaxStreamsPerPrincipal int `koanf:"max_streams_per_principal"`
}

// Auth modes (auth.enabled).
const (
	AuthAuto = "auto"
	AuthOn   = "true"
	AuthOff  = "false"
)

// AuthRequired reports whether the server authenticates requests: as set, or with auto,
// whenever grpc.host is not a loopback address ("" listens on every interface).
func (c *Config) AuthRequired() bool {
	switch c.Auth.Enabled {
	case AuthOn:
		return true
	case AuthOff:
		return false
	}
	return !IsLoopback(c.GRPC.Host)
}

// LoopbackHost is the listen address of the ports that face no credential (health, metrics) unless
// configured: reachable from this machine only.
const LoopbackHost = "127.0.0.1"

// IsLoopback reports whether host is "localhost" or a loopback IP address; "" and every other
// name are not (they may be reachable from elsewhere).
func IsLoopback(host string) bool {
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(strings.Trim(host, "[]"))
	return ip != nil && ip.IsLoopback()
}

// GRPC is the server's API listener.
type GRPC struct {
	Port            int       `koanf:"port"`
	Host            string    `koanf:"host"` // "" listens on all interfaces
	TLS             ServerTLS `koanf:"tls"`
	MaxMessageBytes int       `koanf:"max_message_bytes"`
	// ReadHeaderTimeoutS bounds a new connection's first bytes: the TLS handshake, an HTTP/1.1
	// request's headers, or the HTTP/2 client preface. A connection that sends nothing is closed.
	ReadHeaderTimeoutS int `koanf:"read_header_timeout_s"`
	// IdleTimeoutS closes a connection with no request in progress: an HTTP/1.1 keep-alive
	// connection between requests, or an HTTP/2 connection with no open stream. A worker's
	// assignment stream is an open stream, so its connection is never idle.
	IdleTimeoutS int `koanf:"idle_timeout_s"`
	// ReadBodyTimeoutS is how long a request's body may take to arrive, counted from its headers;
	// a slower request fails with RESOURCE_EXHAUSTED. It ends with the body, so a stream whose
	// request has been sent (StreamJobs) is not limited by it.
	ReadBodyTimeoutS int `koanf:"read_body_timeout_s"`
	// MaxConnections bounds the API's open connections (0: sized from the file-descriptor
	// limit); MaxConnectionsPerSource those from one client address. A connection over a cap is
	// closed at accept.
	MaxConnections          int `koanf:"max_connections"`
	MaxConnectionsPerSource int `koanf:"max_connections_per_source"`
}

// Addr is the listen address, host:port.
func (g GRPC) Addr() string { return net.JoinHostPort(g.Host, strconv.Itoa(g.Port)) }

// ReadHeaderTimeout bounds the first bytes of a connection and the headers of each request.
func (g GRPC) ReadHeaderTimeout() time.Duration { return seconds(g.ReadHeaderTimeoutS) }

// IdleTimeout closes connections with no request in progress.
func (g GRPC) IdleTimeout() time.Duration { return seconds(g.IdleTimeoutS) }

// ReadBodyTimeout bounds the arrival of a request's body.
func (g GRPC) ReadBodyTimeout() time.Duration { return seconds(g.ReadBodyTimeoutS) }

// ServerTLS configures TLS on the API listener; ClientCAPath turns on mTLS.
type ServerTLS struct {
	Enabled      bool   `koanf:"enabled"`
	CertPath     string `koanf:"cert_path"`
	KeyPath      string `koanf:"key_path"`
	ClientCAPath string `koanf:"client_ca_path"`
}

// Server holds server-role limits and switches.
type Server struct {
	// OfflineWorkerRetentionS is how long a deregistered or lost (OFFLINE) worker's row is kept;
	// until then its id stays its owner's (unless the owner's new ids need its place:
	// auth.max_workers_per_principal bounds a principal's rows too).
	OfflineWorkerRetentionS int `koanf:"offline_worker_retention_s"`
	ShutdownGraceS          int `koanf:"shutdown_grace_s"`
	// MaxWorkers bounds the live workers registered in the cluster; MaxStreams the assignment
	// streams open on one server (and, counted apart, the watch streams: WatchJob, WatchEvents).
	MaxWorkers int `koanf:"max_workers"`
	MaxStreams int `koanf:"max_streams"`
	// AllowedHosts are more names clients use for this process's listeners, beside addresses,
	// localhost and the listen hosts: a listener that serves without credentials (API and
	// console with authentication off, any listener on loopback) refuses every other Host and
	// Origin (internal/hostcheck).
	AllowedHosts    []string `koanf:"allowed_hosts"`
	MaxPayloadBytes int      `koanf:"max_payload_bytes"`
	MaxResultBytes  int      `koanf:"max_result_bytes"`
	DryRun          bool     `koanf:"dry_run"`
	// EventRetentionH keeps published events (the history `job logs` shows) this long;
	// unpublished ones are never deleted.
	EventRetentionH int `koanf:"event_retention_h"`
	// MaxPageBytes bounds the encoded size of one page of jobs (ListJobs, PeekQueue): a page stops
	// early, with a next page token, rather than grow past it. A page holds at least one job.
	MaxPageBytes int `koanf:"max_page_bytes"`
	// ScheduleMisfireGraceS is how late a schedule's fire time may be handled and still count as
	// on time; older fire times were missed (no server ran) and the schedule's policy decides
	// (docs/schedules.md). The same on every replica.
	ScheduleMisfireGraceS int `koanf:"schedule_misfire_grace_s"`
}

// ScheduleMisfireGrace is server.schedule_misfire_grace_s.
func (s Server) ScheduleMisfireGrace() time.Duration { return seconds(s.ScheduleMisfireGraceS) }

// ShutdownGrace is how long in-flight requests may drain on stop.
func (s Server) ShutdownGrace() time.Duration { return seconds(s.ShutdownGraceS) }

// EventRetention is how long published events (with Kafka off: all events) stay in Postgres.
func (s Server) EventRetention() time.Duration { return time.Duration(s.EventRetentionH) * time.Hour }

// Store selects the system of record (docs/embedded.md).
type Store struct {
	// Driver is auto, sqlite or postgres. sqlite is the embedded store: one database file in
	// DataDir, in-process dispatch, nothing to install; one server process per database (its
	// workers may be remote). postgres (with Redis for dispatch) serves any number of replicas.
	// auto: sqlite for --role=all when no database is configured (every db.* key at its
	// default), postgres otherwise.
	Driver string `koanf:"driver"`
	// DataDir holds the embedded store's database, jq.db, and its lock file.
	DataDir string `koanf:"data_dir"`
	// Synchronous is the embedded store's durability: NORMAL (a crash of the process loses no
	// commit; a power loss may lose the last ones) or FULL (every commit reaches the disk).
	Synchronous string `koanf:"synchronous"`
}

// Store drivers.
const (
	StoreAuto     = "auto"
	StoreSQLite   = "sqlite"
	StorePostgres = "postgres"
)

// SQLitePath is the embedded store's database file.
func (s Store) SQLitePath() string { return filepath.Join(s.DataDir, "jq.db") }

// DB is the PostgreSQL connection. When URL is set it wins over the discrete
// fields (see DSN).
type DB struct {
	URL              string `koanf:"url" secret:"url"`
	Host             string `koanf:"host"`
	Port             int    `koanf:"port"`
	Name             string `koanf:"name"`
	User             string `koanf:"user"`
	Password         string `koanf:"password" secret:"true"`
	SSLMode          string `koanf:"sslmode"`
	PoolSize         int    `koanf:"pool_size"`
	ConnectTimeoutMS int    `koanf:"connect_timeout_ms"`
}

// ConnectTimeout bounds establishing one connection.
func (d DB) ConnectTimeout() time.Duration { return millis(d.ConnectTimeoutMS) }

// DSN returns a pgx-compatible postgres:// URL. With URL set it is returned
// as given, except that Password is filled in when the URL carries none (so
// the URL can live in a file and the password in JQ_DB_PASSWORD). Otherwise
// it is built from the discrete fields with sslmode and connect_timeout
// (whole seconds, rounded up). PoolSize is not part of the DSN: pass it to
// the pool config.
func (d DB) DSN() string {
	if d.URL != "" {
		return d.urlWithPassword()
	}
	u := url.URL{
		Scheme: "postgres",
		Host:   net.JoinHostPort(d.Host, strconv.Itoa(d.Port)),
		Path:   "/" + d.Name,
	}
	switch {
	case d.Password != "":
		u.User = url.UserPassword(d.User, d.Password)
	case d.User != "":
		u.User = url.User(d.User)
	}
	q := url.Values{}
	q.Set("sslmode", d.SSLMode)
	if d.ConnectTimeoutMS > 0 {
		q.Set("connect_timeout", strconv.Itoa(int(math.Ceil(float64(d.ConnectTimeoutMS)/1000))))
	}
	u.RawQuery = q.Encode()
	return u.String()
}

func (d DB) urlWithPassword() string {
	if d.Password == "" {
		return d.URL
	}
	u, err := url.Parse(d.URL)
	if err != nil || u.Query().Has("password") {
		return d.URL
	}
	if u.User != nil {
		if _, has := u.User.Password(); has {
			return d.URL
		}
		u.User = url.UserPassword(u.User.Username(), d.Password)
	} else {
		u.User = url.UserPassword(d.User, d.Password)
	}
	return u.String()
}

// Redis is the dispatch store. The pool and timeout keys are seed 004's; their defaults are
// go-redis's own, so setting none changes nothing.
type Redis struct {
	Addr string `koanf:"addr"`
	// Username is the ACL user (Redis 6+); "" authenticates as the default user (password only).
	Username         string `koanf:"username"`
	Password         string `koanf:"password" secret:"true"`
	DB               int    `koanf:"db"`
	ConnectTimeoutMS int    `koanf:"connect_timeout_ms"`
	KeyPrefix        string `koanf:"key_prefix"`
	// PoolSizeMultiplier sizes each process's connection pool: multiplier × GOMAXPROCS.
	PoolSizeMultiplier int `koanf:"pool_size_multiplier"`
	// MinIdleConns are kept open even when idle (0: none).
	MinIdleConns int `koanf:"min_idle_conns"`
	// ReadTimeoutMS and WriteTimeoutMS bound one command's socket read and write when the caller's
	// context has no earlier deadline (ContextTimeoutEnabled).
	ReadTimeoutMS  int `koanf:"read_timeout_ms"`
	WriteTimeoutMS int `koanf:"write_timeout_ms"`
	// MaxRetries retries a command failed by a network error (0: none).
	MaxRetries int `koanf:"max_retries"`
}

// PoolSize is the connection pool size of this process.
func (r Redis) PoolSize() int { return r.PoolSizeMultiplier * runtime.GOMAXPROCS(0) }

// ReadTimeout bounds one command's read.
func (r Redis) ReadTimeout() time.Duration { return millis(r.ReadTimeoutMS) }

// WriteTimeout bounds one command's write.
func (r Redis) WriteTimeout() time.Duration { return millis(r.WriteTimeoutMS) }

// ConnectTimeout bounds dialling Redis.
func (r Redis) ConnectTimeout() time.Duration { return millis(r.ConnectTimeoutMS) }

// Kafka is the event stream; off by default.
type Kafka struct {
	Enabled         bool          `koanf:"enabled"`
	Brokers         []string      `koanf:"brokers"`
	TopicEvents     string        `koanf:"topic_events"`
	TopicDeadLetter string        `koanf:"topic_dead_letter"`
	Producer        KafkaProducer `koanf:"producer"`
	Consumer        KafkaConsumer `koanf:"consumer"`
	SASL            KafkaSASL     `koanf:"sasl"`
	TLS             KafkaTLS      `koanf:"tls"`
	RetentionH      int           `koanf:"retention_h"`
	// RelayLeaseS is how long a replica's outbox relay holds the events it is publishing; the
	// events of a relay that died mid-batch are published again (by any replica) after it.
	RelayLeaseS int `koanf:"relay_lease_s"`
	// MaxEventBytes caps one published message (key, value and headers). An event over it is
	// published without its trace-context headers, or, if still over, parked: kept in Postgres,
	// never published (jq_outbox_events_oversized_total). Keep it below the brokers'
	// message.max.bytes (1 MiB by default).
	MaxEventBytes int `koanf:"max_event_bytes"`
}

// RelayLease is the outbox relay's lease on a claimed batch of events.
func (k Kafka) RelayLease() time.Duration { return seconds(k.RelayLeaseS) }

// Retention is the retention asked for when jq creates its topics.
func (k Kafka) Retention() time.Duration { return time.Duration(k.RetentionH) * time.Hour }

// KafkaProducer tunes publishing. Acks is all|one|none; Compression is
// none|gzip|snappy|lz4|zstd.
type KafkaProducer struct {
	Acks        string `koanf:"acks"`
	Compression string `koanf:"compression"`
	BatchSize   int    `koanf:"batch_size"`
	LingerMS    int    `koanf:"linger_ms"`
}

// Linger is how long the producer waits to fill a batch.
func (p KafkaProducer) Linger() time.Duration { return millis(p.LingerMS) }

// KafkaConsumer tunes consuming. AutoOffsetReset is earliest|latest.
type KafkaConsumer struct {
	GroupID         string `koanf:"group_id"`
	AutoOffsetReset string `koanf:"auto_offset_reset"`
}

// KafkaSASL authenticates to the brokers. Mechanism is "" (off), plain,
// scram-sha-256 or scram-sha-512.
type KafkaSASL struct {
	Mechanism string `koanf:"mechanism"`
	Username  string `koanf:"username"`
	Password  string `koanf:"password" secret:"true"`
}

// KafkaTLS turns on TLS to the brokers; an empty CAPath uses system roots.
type KafkaTLS struct {
	Enabled bool   `koanf:"enabled"`
	CAPath  string `koanf:"ca_path"`
}

// Scheduler tunes the server's dispatch loop.
type Scheduler struct {
	IntervalMS              int `koanf:"interval_ms"`
	BatchSize               int `koanf:"batch_size"`
	AssignmentTimeoutS      int `koanf:"assignment_timeout_s"`
	WorkerHeartbeatTimeoutS int `koanf:"worker_heartbeat_timeout_s"`
	ReaperIntervalMS        int `koanf:"reaper_interval_ms"`
	TimeoutGraceS           int `koanf:"timeout_grace_s"`
}

// Interval is the pause between scheduler cycles.
func (s Scheduler) Interval() time.Duration { return millis(s.IntervalMS) }

// AssignmentTimeout is how long an assigned job may wait to start before it
// is taken back.
func (s Scheduler) AssignmentTimeout() time.Duration { return seconds(s.AssignmentTimeoutS) }

// HeartbeatTimeout is how long a silent worker is trusted before its jobs
// are recovered.
func (s Scheduler) HeartbeatTimeout() time.Duration { return seconds(s.WorkerHeartbeatTimeoutS) }

// ReaperInterval is the pause between reaper cycles (timeouts, lost workers,
// retries, TTL expiry).
func (s Scheduler) ReaperInterval() time.Duration { return millis(s.ReaperIntervalMS) }

// TimeoutGrace is how long past a job's own timeout the server waits for the
// worker's report before it fails the attempt with reason "timeout".
func (s Scheduler) TimeoutGrace() time.Duration { return seconds(s.TimeoutGraceS) }

// LockTTL is the lifetime of a dispatch lock; it equals AssignmentTimeout so
// a lock never outlives the assignment it protects.
func (s Scheduler) LockTTL() time.Duration { return s.AssignmentTimeout() }

// Metrics is the Prometheus endpoint of the server (Port) and the worker
// (Worker.MetricsPort). Pprof adds the Go profiler's /debug/pprof/ on the same
// port; off by default, since profiles expose the process's internals and a
// CPU profile or trace costs CPU while it runs.
type Metrics struct {
	Enabled bool `koanf:"enabled"`
	Port    int  `koanf:"port"`
	// Host is the server's metrics listen address: loopback unless configured ("" = all
	// interfaces), so that nobody off the machine can scrape or hold it unless the operator says
	// so (a Prometheus elsewhere: the Helm chart and compose set it).
	Host  string `koanf:"host"`
	Pprof bool   `koanf:"pprof"`
}

// Health is the server's /healthz and /readyz endpoint.
type Health struct {
	Port int `koanf:"port"`
	// Host is the listen address of /healthz and /readyz: loopback unless configured ("" = all
	// interfaces; Kubernetes probes and other machines' load balancers need that or the pod's
	// address: the Helm chart and compose set it).
	Host string `koanf:"host"`
}

// UI is the web console the server component serves on its own port (docs/console.md). Enabled is
// auto, true or false; auto serves it in --role=all only. TracingURL links a job's trace id to a
// tracing UI: its "{trace_id}" is replaced by the id ("": no link).
type UI struct {
	Enabled    string `koanf:"enabled"`
	Port       int    `koanf:"port"`
	TracingURL string `koanf:"tracing_url"`
}

// UI modes (ui.enabled).
const (
	UIAuto = "auto"
	UIOn   = "true"
	UIOff  = "false"
)

// Logging selects level (trace|debug|info|warn|error) and format (json|text).
type Logging struct {
	Level  string `koanf:"level"`
	Format string `koanf:"format"`
}

// Tracing is the OTLP exporter; off by default. Endpoint is host:port or an
// http(s) URL; empty leaves the exporter's own default
// (OTEL_EXPORTER_OTLP_ENDPOINT, else localhost:4317 or :4318). Insecure
// applies to host:port endpoints; a URL's scheme decides for itself.
type Tracing struct {
	Enabled     bool    `koanf:"enabled"`
	Endpoint    string  `koanf:"endpoint"`
	Protocol    string  `koanf:"protocol"`
	SampleRatio float64 `koanf:"sample_ratio"`
	Insecure    bool    `koanf:"insecure"`
}

// Worker configures the worker role.
type Worker struct {
	ServerAddr  string `koanf:"server_addr"`
	ID          string `koanf:"id"` // "" = hostname-PID, resolved by the worker
	Concurrency int    `koanf:"concurrency"`
	// Prefetch is how many assignments the worker accepts beyond its concurrency (they wait on
	// the worker for a free slot): -1 = as many as concurrency, 0 = none.
	Prefetch int `koanf:"prefetch"`
	// AckDelayMS is how long a job runs before the worker acknowledges its start (a shorter job's
	// report acknowledges it): 0 = every start at once.
	AckDelayMS         int       `koanf:"ack_delay_ms"`
	Queues             []string  `koanf:"queues"`
	HeartbeatIntervalS int       `koanf:"heartbeat_interval_s"`
	ShutdownGraceS     int       `koanf:"shutdown_grace_s"`
	MetricsPort        int       `koanf:"metrics_port"`
	HealthPort         int       `koanf:"health_port"`
	BindHost           string    `koanf:"bind_host"` // metrics and health listen address; loopback unless configured, "" = all interfaces
	TLS                WorkerTLS `koanf:"tls"`
	// TestHandlers registers the "fault" handler (panics, exits the process,
	// ignores cancellation) for fault-injection tests. Never in production.
	TestHandlers bool `koanf:"test_handlers"`
	// Exec switches on the exec handler; see WorkerExec.
	Exec WorkerExec `koanf:"exec"`
	// CircuitBreaker stops taking a queue's jobs for a while when too many of them fail.
	CircuitBreaker CircuitBreaker `koanf:"circuit_breaker"`
	// File configures the file handler; see WorkerFile.
	File WorkerFile `koanf:"file"`
	// HTTP configures the http handler; see WorkerHTTP.
	HTTP WorkerHTTP `koanf:"http"`
}

// HostAccess lists the settings by which jobs act on the worker's host with the worker's user
// and access: run its programs (worker.exec.enabled), read and move its files
// (worker.file.roots), send requests from its network, signed with its secret
// (worker.http.allow). Empty: no built-in handler of this worker reaches beyond the process.
func (w Worker) HostAccess() []string {
	var on []string
	if w.Exec.Enabled {
		on = append(on, "worker.exec.enabled")
	}
	if len(w.File.Roots) > 0 {
		on = append(on, "worker.file.roots")
	}
	if len(w.HTTP.Allow) > 0 {
		on = append(on, "worker.http.allow")
	}
	return on
}

// WorkerFile configures the file handler (docs/handlers.md). Roots are the
// directories whose files jobs may check, absolute; empty (the default)
// dead-letters every file job. DoneDir and FailedDir, absolute or empty
// (off), receive the files checked successfully and those that failed
// permanently, at their path relative to their root.
type WorkerFile struct {
	Roots     []string `koanf:"roots"`
	DoneDir   string   `koanf:"done_dir"`
	FailedDir string   `koanf:"failed_dir"`
}

// WorkerHTTP configures the http handler (docs/handlers.md). Allow lists the
// URL prefixes jobs may POST to, absolute http(s) URLs; empty (the default)
// dead-letters every http job. SigningSecret signs every request
// (X-Jq-Signature). MaxResponseBytes bounds a success's response body, which
// becomes the result.
type WorkerHTTP struct {
	Allow            []string `koanf:"allow"`
	SigningSecret    string   `koanf:"signing_secret" secret:"true"`
	MaxResponseBytes int      `koanf:"max_response_bytes"`
}

// CircuitBreaker is the worker's per-queue circuit breaker (seed 004; docs/reliability.md): when
// at least MinSamples attempts of a queue finished within the last WindowS seconds and at least
// FailureThreshold of them failed retryably (an error, a timeout), the worker takes none of that
// queue's jobs for CooldownPeriodS seconds, then one probe job: its success closes the breaker,
// its failure opens it again. The seed's durations (window: 1m, cooldown_period: 30s) are
// integer seconds here, as every jq duration.
type CircuitBreaker struct {
	Enabled          bool    `koanf:"enabled"`
	FailureThreshold float64 `koanf:"failure_threshold"`
	WindowS          int     `koanf:"window_s"`
	CooldownPeriodS  int     `koanf:"cooldown_period_s"`
	MinSamples       int     `koanf:"min_samples"`
}

// Window is the rolling window of finished attempts.
func (c CircuitBreaker) Window() time.Duration { return seconds(c.WindowS) }

// CooldownPeriod is how long an open breaker takes no job of its queue.
func (c CircuitBreaker) CooldownPeriod() time.Duration { return seconds(c.CooldownPeriodS) }

// WorkerExec controls the exec handler, which runs a program per job: off by
// default, because with it on whoever can submit a job runs programs on the
// worker. Allow lists the programs as absolute paths; a job's argv[0] must be
// one of them exactly (after filepath.Clean, no PATH lookup, symbolic links
// not resolved). A shell runs only when a shell is itself listed.
type WorkerExec struct {
	Enabled bool     `koanf:"enabled"`
	Allow   []string `koanf:"allow"`
	// EnvAllow lists the environment variables a job's payload may set for its program: names,
	// or prefixes written "THUMB_*". Empty: none. Interpreter hooks (BASH_ENV, PERL5OPT,
	// NODE_OPTIONS, PYTHONPATH, LD_PRELOAD, …) are refused at start even when listed.
	EnvAllow []string `koanf:"env_allow"`
}

// PrefetchCount is worker.prefetch resolved: -1 is as many as the concurrency.
func (w Worker) PrefetchCount() int {
	if w.Prefetch < 0 {
		return w.Concurrency
	}
	return w.Prefetch
}

// AckDelay is worker.ack_delay_ms for the executor (negative: at once).
func (w Worker) AckDelay() time.Duration {
	if w.AckDelayMS <= 0 {
		return -1
	}
	return millis(w.AckDelayMS)
}

// HeartbeatInterval is the pause between worker heartbeats.
func (w Worker) HeartbeatInterval() time.Duration { return seconds(w.HeartbeatIntervalS) }

// ShutdownGrace is how long running jobs may finish on stop.
func (w Worker) ShutdownGrace() time.Duration { return seconds(w.ShutdownGraceS) }

// WorkerTLS is the worker's client side of the API connection: CAPath
// verifies the server, CertPath/KeyPath present a client certificate (mTLS).
type WorkerTLS struct {
	CertPath string `koanf:"cert_path"`
	KeyPath  string `koanf:"key_path"`
	CAPath   string `koanf:"ca_path"`
}

// Default returns the built-in configuration; it is the only place defaults
// live.
func Default() Config {
	return Config{
		GRPC: GRPC{
			Port:               50051,
			MaxMessageBytes:    4 << 20,
			ReadHeaderTimeoutS: 10,
			IdleTimeoutS:       120,
			ReadBodyTimeoutS:   30,
			// Each worker or producer process holds one HTTP/2 connection; a NAT of many is
			// still far below this.
			MaxConnectionsPerSource: 1024,
		},
		Server: Server{
			AllowedHosts:   []string{},
			ShutdownGraceS: 30,
			MaxWorkers:     10000,
			MaxStreams:     5000,
			// An hour: a fleet restarting with fresh default ids frees them within it.
			OfflineWorkerRetentionS: 3600,
			MaxPayloadBytes:         1 << 20,
			MaxResultBytes:          256 << 10,
			MaxPageBytes:            4 << 20,
			EventRetentionH:         168,
			ScheduleMisfireGraceS:   60,
		},
		Store: Store{Driver: StoreAuto, DataDir: "jq-data", Synchronous: "NORMAL"},
		DB: DB{
			Host:             "localhost",
			Port:             5432,
			Name:             "jobqueue",
			User:             "jq",
			SSLMode:          "disable",
			PoolSize:         10,
			ConnectTimeoutMS: 3000,
		},
		Redis: Redis{
			Addr:               "localhost:6379",
			ConnectTimeoutMS:   1000,
			KeyPrefix:          "jq",
			PoolSizeMultiplier: 10,
			ReadTimeoutMS:      3000,
			WriteTimeoutMS:     3000,
			MaxRetries:         3,
		},
		Kafka: Kafka{
			Brokers:         []string{"localhost:9092"},
			TopicEvents:     "jq.job-events",
			TopicDeadLetter: "job.dead-lettered",
			Producer: KafkaProducer{
				Acks:        "all",
				Compression: "snappy",
				BatchSize:   100,
				LingerMS:    10,
			},
			Consumer: KafkaConsumer{
				GroupID:         "jq-server",
				AutoOffsetReset: "earliest",
			},
			RetentionH:    168,
			RelayLeaseS:   30,
			MaxEventBytes: 900 << 10,
		},
		Scheduler: Scheduler{
			IntervalMS:              500,
			BatchSize:               100,
			AssignmentTimeoutS:      int(queue.DefaultAssignmentTimeout / time.Second),
			WorkerHeartbeatTimeoutS: int(queue.DefaultHeartbeatTimeout / time.Second),
			ReaperIntervalMS:        1000,
			TimeoutGraceS:           int(queue.DefaultTimeoutGrace / time.Second),
		},
		Metrics: Metrics{Enabled: true, Port: 9090, Host: LoopbackHost},
		Health:  Health{Port: 8080, Host: LoopbackHost},
		Logging: Logging{Level: "info", Format: "json"},
		Tracing: Tracing{
			Protocol:    "grpc",
			SampleRatio: 1.0,
			Insecure:    true,
		},
		Worker: Worker{
			ServerAddr:         "localhost:50051",
			Concurrency:        4,
			Prefetch:           -1,
			AckDelayMS:         1000,
			Queues:             []string{"default"},
			HeartbeatIntervalS: int(queue.DefaultHeartbeatInterval / time.Second),
			ShutdownGraceS:     60,
			MetricsPort:        9091,
			HealthPort:         8081,
			BindHost:           LoopbackHost,
			Exec:               WorkerExec{Allow: []string{}, EnvAllow: []string{}},
			// On by default: a queue failing on this worker (a downstream outage) pauses here
			// instead of burning its jobs' retries; nothing is lost, its jobs wait PENDING.
			CircuitBreaker: CircuitBreaker{
				Enabled: true, FailureThreshold: 0.5, WindowS: 60, CooldownPeriodS: 30, MinSamples: 20,
			},
			File: WorkerFile{Roots: []string{}},
			HTTP: WorkerHTTP{Allow: []string{}, MaxResponseBytes: 256 << 10},
		},
		Producer: defaultProducer(),
		UI:       UI{Enabled: UIAuto, Port: 8088},
		Auth: Auth{
			Enabled:                AuthAuto,
			Tokens:                 []string{},
			MTLSPrincipals:         []string{},
			RateLimitPerSec:        20000,
			RateBurst:              40000,
			RefusalRatePerSource:   50,
			MaxWorkersPerPrincipal: 1000,
			MaxStreamsPerPrincipal: 1000,
		},
		Schedules: []Schedule{},
	}
}

func seconds(n int) time.Duration { return time.Duration(n) * time.Second }
func millis(n int) time.Duration  { return time.Duration(n) * time.Millisecond }
