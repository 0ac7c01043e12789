package config_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/jq-dev/jq/config"
)

func TestMultipleProblemsReportedTogether(t *testing.T) {
	t.Parallel()
	path := writeConfig(t, "scheduler:\n  batch_size: 0\n")
	err := loadErr(t, config.LoadOptions{
		File:    path,
		Environ: []string{"JQ_GRPC_PORT=70000"},
	})
	require.ErrorContains(t, err, "scheduler.batch_size: must be between 1 and 10000, got 0")
	require.ErrorContains(t, err, "grpc.port: must be a port between 1 and 65535, got 70000")
	require.Len(t, strings.Split(err.Error(), "\n"), 2, "one line per problem")
}

func TestValidateRules(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name   string
		mutate func(c *config.Config)
		want   []string
	}{
		{"ports", func(c *config.Config) {
			c.GRPC.Port, c.Metrics.Port, c.Health.Port = 0, 65536, -1
			c.Worker.MetricsPort, c.Worker.HealthPort = 0, 100000
		}, []string{"grpc.port:", "metrics.port:", "health.port:", "worker.metrics_port:", "worker.health_port:"}},
		{"port clash", func(c *config.Config) {
			c.Metrics.Port = c.GRPC.Port
			c.Worker.HealthPort = c.Worker.MetricsPort
		}, []string{"metrics.port: port 50051 is already used by grpc.port", "worker.metrics_port: port 9091 is already used by worker.health_port"}},
		{"ui", func(c *config.Config) {
			c.UI.Enabled, c.UI.Port, c.UI.TracingURL = "yes", 0, "ftp://jaeger/{trace_id}"
		}, []string{`ui.enabled: must be one of`, "ui.port: must be a port", `ui.tracing_url: want an http(s) URL, got "ftp://jaeger/{trace_id}"`}},
		{"ui port clash", func(c *config.Config) { c.UI.Enabled, c.UI.Port = config.UIOn, c.Health.Port },
			[]string{"ui.port: port 8080 is already used by health.port"}},
		{"ui tracing url without the id", func(c *config.Config) { c.UI.TracingURL = "http://jaeger:16686/search" },
			[]string{"ui.tracing_url: must contain {trace_id}"}},
		{"redis pool and timeouts (seed 004)", func(c *config.Config) {
			c.Redis.Username = "has space"
			c.Redis.PoolSizeMultiplier, c.Redis.MinIdleConns = 0, -1
			c.Redis.ReadTimeoutMS, c.Redis.WriteTimeoutMS, c.Redis.MaxRetries = 0, 600001, -1
		}, []string{"redis.username: want 1..128 printable ASCII", "redis.pool_size_multiplier: must be between 1 and 1000, got 0",
			"redis.min_idle_conns: must be between 0 and 10000, got -1", "redis.read_timeout_ms: must be between 1 and 600000, got 0",
			"redis.write_timeout_ms: must be between 1 and 600000, got 600001", "redis.max_retries: must be between 0 and 100, got -1"}},
		{"grpc tls", func(c *config.Config) { c.GRPC.TLS.Enabled = true },
			[]string{"grpc.tls.cert_path: is required when grpc.tls.enabled is true", "grpc.tls.key_path: is required"}},
		{"mtls without tls", func(c *config.Config) { c.GRPC.TLS.ClientCAPath = "/ca.pem" },
			[]string{"grpc.tls.client_ca_path: mTLS needs grpc.tls.enabled: true"}},
		{"sizes", func(c *config.Config) {
			c.GRPC.MaxMessageBytes = 1024
			c.Server.MaxResultBytes = 0
		}, []string{"server.max_payload_bytes: must not exceed grpc.max_message_bytes (1024), got 1048576", "server.max_result_bytes: must be positive"}},
		{"resource bounds", func(c *config.Config) {
			c.GRPC.ReadHeaderTimeoutS, c.GRPC.IdleTimeoutS, c.GRPC.ReadBodyTimeoutS = 0, -1, 86401
			c.Server.MaxPageBytes = 1024
			c.Kafka.MaxEventBytes = 0
		}, []string{"grpc.read_header_timeout_s: must be between 1 and 86400, got 0", "grpc.idle_timeout_s: must be between 1 and 86400, got -1",
			"grpc.read_body_timeout_s: must be between 1 and 86400, got 86401", "server.max_page_bytes: must be between 65536 and 1073741824, got 1024",
			"kafka.max_event_bytes: must be between 4096 and 104857600, got 0"}},
		{"timeouts", func(c *config.Config) {
			c.Server.ShutdownGraceS = 0
			c.Scheduler.IntervalMS = -1
			c.Scheduler.AssignmentTimeoutS = 0
			c.Scheduler.WorkerHeartbeatTimeoutS = 0
			c.Worker.ShutdownGraceS = 0
			c.Worker.HeartbeatIntervalS = 0
			c.DB.ConnectTimeoutMS = 0
			c.Redis.ConnectTimeoutMS = 0
		}, []string{"server.shutdown_grace_s:", "scheduler.interval_ms:", "scheduler.assignment_timeout_s:",
			"scheduler.worker_heartbeat_timeout_s:", "worker.shutdown_grace_s:", "worker.heartbeat_interval_s:",
			"db.connect_timeout_ms:", "redis.connect_timeout_ms:"}},
		{"counts", func(c *config.Config) {
			c.Scheduler.BatchSize = 10001
			c.Worker.Concurrency = 0
			c.DB.PoolSize = 0
			c.Kafka.Producer.BatchSize = 0
			c.Kafka.Producer.LingerMS = -1
			c.Kafka.RetentionH = 0
			c.Redis.DB = -1
		}, []string{"scheduler.batch_size: must be between 1 and 10000, got 10001", "worker.concurrency: must be between 1 and 10000, got 0",
			"db.pool_size: must be at least 1, got 0", "kafka.producer.batch_size:", "kafka.producer.linger_ms:", "kafka.retention_h:", "redis.db:"}},
		{"enums", func(c *config.Config) {
			c.Logging.Level, c.Logging.Format = "verbose", "xml"
			c.DB.SSLMode = "on"
			c.Kafka.Producer.Acks, c.Kafka.Producer.Compression = "2", "brotli"
			c.Kafka.Consumer.AutoOffsetReset = "newest"
			c.Kafka.SASL.Mechanism = "oauth"
			c.Tracing.Protocol = "udp"
		}, []string{`logging.level: must be one of "trace", "debug", "info", "warn", "error", got "verbose"`, "logging.format:", "db.sslmode:",
			"kafka.producer.acks:", "kafka.producer.compression:", "kafka.consumer.auto_offset_reset:", "kafka.sasl.mechanism:", "tracing.protocol:"}},
		{"heartbeat order", func(c *config.Config) { c.Worker.HeartbeatIntervalS = 30 },
			[]string{"worker.heartbeat_interval_s: must be less than scheduler.worker_heartbeat_timeout_s (30), got 30"}},
		{"queues", func(c *config.Config) { c.Worker.Queues = []string{"ok", "Bad", "_x", "ok", strings.Repeat("a", 65)} },
			[]string{`worker.queues[1]: "Bad" is not a valid queue name`, "worker.queues[2]:", `worker.queues[3]: "ok" is listed twice`, "worker.queues[4]:"}},
		{"no queues", func(c *config.Config) { c.Worker.Queues = nil }, []string{"worker.queues: must name at least one queue"}},
		{"sample ratio", func(c *config.Config) { c.Tracing.SampleRatio = 1.5 }, []string{"tracing.sample_ratio: must be between 0 and 1, got 1.5"}},
		{"tracing endpoint", func(c *config.Config) { c.Tracing.Endpoint = "collector" }, []string{"tracing.endpoint: must be host:port"}},
		{"tracing endpoint url", func(c *config.Config) { c.Tracing.Endpoint = "ftp://collector:4318" }, []string{"tracing.endpoint: must be host:port or an http(s) URL"}},
		{"kafka enabled", func(c *config.Config) {
			c.Kafka.Enabled = true
			c.Kafka.Brokers = []string{"nohost", "h:0"}
			c.Kafka.Consumer.GroupID = ""
			c.Kafka.SASL.Mechanism = "plain"
		}, []string{`kafka.brokers[0]: must be host:port, got "nohost"`, `kafka.brokers[1]: port must be between 1 and 65535, got "0"`,
			"kafka.consumer.group_id: is required", "kafka.sasl.username: is required", "kafka.sasl.password: is required when kafka.sasl.mechanism is set (use JQ_KAFKA_SASL_PASSWORD)"}},
		{"kafka no brokers", func(c *config.Config) { c.Kafka.Enabled, c.Kafka.Brokers = true, nil },
			[]string{"kafka.brokers: must list at least one broker"}},
		{"topics", func(c *config.Config) { c.Kafka.TopicEvents, c.Kafka.TopicDeadLetter = "", "a b" },
			[]string{"kafka.topic_events:", "kafka.topic_dead_letter:"}},
		{"db discrete", func(c *config.Config) { c.DB.Host, c.DB.Name, c.DB.User, c.DB.Port = "", " ", "", 0 },
			[]string{"db.host: is required when db.url is empty", "db.name:", "db.user:", "db.port:"}},
		{"db url", func(c *config.Config) { c.DB.URL = "mysql://x" }, []string{"db.url: must be a postgres:// or postgresql:// URL"}},
		{"redis", func(c *config.Config) { c.Redis.Addr, c.Redis.KeyPrefix = "localhost", "jq {x}" },
			[]string{"redis.addr: must be host:port", "redis.key_prefix:"}},
		{"worker", func(c *config.Config) {
			c.Worker.ServerAddr = ":50051"
			c.Worker.ID = "has space"
			c.Worker.TLS.CertPath = "/cert.pem"
		}, []string{"worker.server_addr:", "worker.id:", "worker.tls: cert_path and key_path must be set together"}},
		{"exec enabled without allow", func(c *config.Config) { c.Worker.Exec.Enabled = true },
			[]string{"worker.exec.allow: must list at least one program (an absolute path) when worker.exec.enabled is true"}},
		{"exec allow relative", func(c *config.Config) {
			c.Worker.Exec.Enabled = true
			c.Worker.Exec.Allow = []string{"/usr/bin/convert", "convert", "./bin/gzip", ""}
		}, []string{`worker.exec.allow[1]: must be an absolute path, got "convert"`, `worker.exec.allow[2]: must be an absolute path, got "./bin/gzip"`,
			`worker.exec.allow[3]: must be an absolute path, got ""`}},
		{"exec allow checked while disabled", func(c *config.Config) { c.Worker.Exec.Allow = []string{"sh"} },
			[]string{`worker.exec.allow[0]: must be an absolute path, got "sh"`}},
		{"circuit breaker", func(c *config.Config) {
			c.Worker.CircuitBreaker = config.CircuitBreaker{Enabled: true, FailureThreshold: 1.5, WindowS: 0, CooldownPeriodS: -1, MinSamples: 0}
		}, []string{"worker.circuit_breaker.failure_threshold: must be above 0 and at most 1, got 1.5",
			"worker.circuit_breaker.window_s:", "worker.circuit_breaker.cooldown_period_s:", "worker.circuit_breaker.min_samples:"}},
		{"file paths", func(c *config.Config) {
			c.Worker.File.Roots = []string{"/data/in", "data", ""}
			c.Worker.File.DoneDir, c.Worker.File.FailedDir = "done", "./failed"
		}, []string{`worker.file.roots[1]: must be an absolute path, got "data"`, `worker.file.roots[2]: must be an absolute path, got ""`,
			`worker.file.done_dir: must be an absolute path, got "done"`, `worker.file.failed_dir: must be an absolute path, got "./failed"`}},
		{"http allow", func(c *config.Config) {
			c.Worker.HTTP.Allow = []string{"https://a.example.com/hooks", "a.example.com", "ftp://x/", "https://u:p@a.example.com/", "https://a.example.com/?k=v", "http:///x"}
			c.Worker.HTTP.MaxResponseBytes = 0
		}, []string{`worker.http.allow[1]: must be an absolute http(s) URL, got "a.example.com"`, `worker.http.allow[2]: must be an absolute http(s) URL`,
			`worker.http.allow[3]: must not have user information, a query or a fragment`, `worker.http.allow[4]: must not have user information`,
			`worker.http.allow[5]: must be an absolute http(s) URL`, `worker.http.max_response_bytes: must be between 1 and`}},
		{"bind host", func(c *config.Config) { c.Worker.BindHost = "127.0.0.1:9091" },
			[]string{`worker.bind_host: must be an IP address or a host name without a port ("" = all interfaces), got "127.0.0.1:9091"`}},
		{"bind host brackets", func(c *config.Config) { c.Worker.BindHost = "[::1]" }, []string{"worker.bind_host:"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			c := config.Default()
			tc.mutate(&c)
			err := c.Validate()
			require.Error(t, err)
			require.ErrorIs(t, err, config.ErrInvalid)
			for _, w := range tc.want {
				require.ErrorContains(t, err, w)
			}
			// One line per problem, each starting with a key path.
			for line := range strings.SplitSeq(err.Error(), "\n") {
				require.Regexp(t, `^[a-z_.]+(\[\d+\])?: `, line)
			}
		})
	}
}

func TestValidateAcceptsVariants(t *testing.T) {
	t.Parallel()
	c := config.Default()
	c.DB.URL = "postgresql://u@h/d"
	c.DB.Host, c.DB.SSLMode = "", "" // ignored when the URL is set
	c.GRPC.TLS = config.ServerTLS{Enabled: true, CertPath: "/c", KeyPath: "/k", ClientCAPath: "/ca"}
	c.Worker.CircuitBreaker = config.CircuitBreaker{FailureThreshold: 7} // off: not checked
	c.Kafka.Enabled = true
	c.Kafka.SASL = config.KafkaSASL{Mechanism: "scram-sha-512", Username: "u", Password: "p"}
	c.Worker.ID = "host-1234"
	c.Worker.TLS = config.WorkerTLS{CertPath: "/c", KeyPath: "/k", CAPath: "/ca"}
	c.Tracing.SampleRatio = 0
	c.Worker.Exec = config.WorkerExec{Enabled: true, Allow: []string{"/usr/bin/convert", "/usr/local/bin/../bin/x"}}
	require.NoError(t, c.Validate())
	for _, h := range []string{"127.0.0.1", "::1", "0.0.0.0", "localhost", "worker-1.example.internal"} {
		c.Worker.BindHost = h
		require.NoError(t, c.Validate(), h)
	}
}

func TestExecConfig(t *testing.T) {
	t.Parallel()
	path := writeConfig(t, "worker:\n  exec:\n    enabled: true\n")
	err := loadErr(t, config.LoadOptions{File: path, Environ: []string{"JQ_WORKER_EXEC_ALLOW=convert"}})
	require.ErrorContains(t, err, "worker.exec.allow[0]: must be an absolute path")
	require.Len(t, strings.Split(err.Error(), "\n"), 1, "one line per problem")
	err = loadErr(t, config.LoadOptions{File: path})
	require.EqualError(t, err, "worker.exec.allow: must list at least one program (an absolute path) when worker.exec.enabled is true")

	cfg, _ := load(t, config.LoadOptions{File: path, Environ: []string{"JQ_WORKER_EXEC_ALLOW=/usr/bin/convert, /usr/bin/gzip"}})
	require.Equal(t, config.WorkerExec{Enabled: true, Allow: []string{"/usr/bin/convert", "/usr/bin/gzip"}, EnvAllow: []string{}}, cfg.Worker.Exec)
	require.False(t, config.Default().Worker.Exec.Enabled, "exec is off by default")
}

func TestListenerConfig(t *testing.T) {
	t.Parallel()
	require.False(t, config.Default().Metrics.Pprof, "pprof is off by default")
	def := config.Default()
	// The ports that face no credential are loopback unless configured: nothing listens beyond the host by default.
	require.Equal(t, []string{"127.0.0.1", "127.0.0.1", "127.0.0.1"}, []string{def.Health.Host, def.Metrics.Host, def.Worker.BindHost})
	cfg, _ := load(t, config.LoadOptions{Environ: []string{"JQ_METRICS_PPROF=true", "JQ_WORKER_BIND_HOST=0.0.0.0",
		"JQ_HEALTH_HOST=10.0.0.5", "JQ_METRICS_HOST=jq-0.jq.svc"}})
	require.True(t, cfg.Metrics.Pprof)
	require.Equal(t, []string{"10.0.0.5", "jq-0.jq.svc", "0.0.0.0"}, []string{cfg.Health.Host, cfg.Metrics.Host, cfg.Worker.BindHost})
	cfg, _ = load(t, config.LoadOptions{File: writeConfig(t, "health:\n  host: \"\"\nmetrics:\n  host: \"\"\n")})
	require.Empty(t, cfg.Health.Host, "\"\": every interface")
	require.Empty(t, cfg.Metrics.Host)
	err := loadErr(t, config.LoadOptions{Environ: []string{"JQ_HEALTH_HOST=0.0.0.0:8080", "JQ_METRICS_HOST=a b"}})
	require.ErrorContains(t, err, `health.host: must be an IP address or a host name without a port ("" = all interfaces), got "0.0.0.0:8080"`)
	require.ErrorContains(t, err, `metrics.host: must be an IP address`)
}

func TestFieldError(t *testing.T) {
	t.Parallel()
	e := &config.FieldError{Key: "grpc.port", Msg: "bad"}
	require.Equal(t, "grpc.port: bad", e.Error())
	require.ErrorIs(t, e, config.ErrInvalid)
	require.NotErrorIs(t, e, errors.New("other"))
}
