package config_test

import (
	"io/fs"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/jq-dev/jq/config"
)

func TestDefaultsValidate(t *testing.T) {
	t.Parallel()
	def := config.Default()
	require.NoError(t, def.Validate())

	cfg, warnings := load(t, config.LoadOptions{})
	require.Empty(t, warnings)
	require.Equal(t, def, *cfg)
}

func TestDefaultValues(t *testing.T) {
	t.Parallel()
	c := config.Default()
	require.Equal(t, 50051, c.GRPC.Port)
	require.Equal(t, 4<<20, c.GRPC.MaxMessageBytes)
	require.Equal(t, 1048576, c.Server.MaxPayloadBytes)
	require.Equal(t, 262144, c.Server.MaxResultBytes)
	require.Equal(t, "jobqueue", c.DB.Name)
	require.Equal(t, []string{"localhost:9092"}, c.Kafka.Brokers)
	require.Equal(t, []string{"default"}, c.Worker.Queues)
	require.Equal(t, "jq", c.Redis.KeyPrefix)
	require.InDelta(t, 1.0, c.Tracing.SampleRatio, 0)
}

func TestDurationHelpers(t *testing.T) {
	t.Parallel()
	c := config.Default()
	require.Equal(t, 500*time.Millisecond, c.Scheduler.Interval())
	require.Equal(t, time.Minute, c.Scheduler.AssignmentTimeout())
	require.Equal(t, time.Minute, c.Scheduler.LockTTL())
	require.Equal(t, 30*time.Second, c.Scheduler.HeartbeatTimeout())
	require.Equal(t, 5*time.Second, c.Worker.HeartbeatInterval())
	require.Equal(t, time.Minute, c.Worker.ShutdownGrace())
	require.Equal(t, 30*time.Second, c.Server.ShutdownGrace())
	require.Equal(t, 3*time.Second, c.DB.ConnectTimeout())
	require.Equal(t, time.Second, c.Redis.ConnectTimeout())
	require.Equal(t, 10*time.Millisecond, c.Kafka.Producer.Linger())
	require.Equal(t, 7*24*time.Hour, c.Kafka.Retention())
	require.Equal(t, ":50051", c.GRPC.Addr())
}

func TestFileOverridesDefaults(t *testing.T) {
	t.Parallel()
	path := writeConfig(t, `
grpc:
  port: 6000
db:
  host: db.internal
scheduler:
  batch_size: 250
kafka:
  brokers: [k1:9092, k2:9092]
  producer:
    acks: one
worker:
  queues: [emails, reports]
tracing:
  sample_ratio: 0.25
`)
	cfg, warnings := load(t, config.LoadOptions{File: path})
	require.Empty(t, warnings)
	require.Equal(t, 6000, cfg.GRPC.Port)
	require.Equal(t, "db.internal", cfg.DB.Host)
	require.Equal(t, 250, cfg.Scheduler.BatchSize)
	require.Equal(t, []string{"k1:9092", "k2:9092"}, cfg.Kafka.Brokers)
	require.Equal(t, "one", cfg.Kafka.Producer.Acks)
	require.Equal(t, []string{"emails", "reports"}, cfg.Worker.Queues)
	require.InDelta(t, 0.25, cfg.Tracing.SampleRatio, 0)
	// Untouched keys keep their defaults, including siblings in touched sections.
	require.Equal(t, 5432, cfg.DB.Port)
	require.Equal(t, "snappy", cfg.Kafka.Producer.Compression)
	require.Equal(t, 500, cfg.Scheduler.IntervalMS)
}

func TestFileNullAndEmptySectionsKeepDefaults(t *testing.T) {
	t.Parallel()
	path := writeConfig(t, "grpc:\ndb: {}\nredis:\n  addr:\n")
	cfg, _ := load(t, config.LoadOptions{File: path})
	require.Equal(t, config.Default(), *cfg)
}

func TestFileLenientScalars(t *testing.T) {
	t.Parallel()
	path := writeConfig(t, `
grpc:
  port: "6001"
  tls:
    enabled: "true"
    cert_path: /c
    key_path: /k
redis:
  key_prefix: 123
tracing:
  sample_ratio: 1
  insecure: off
metrics:
  enabled: no
worker:
  queues: a,b
`)
	cfg, _ := load(t, config.LoadOptions{File: path})
	require.Equal(t, 6001, cfg.GRPC.Port)
	require.True(t, cfg.GRPC.TLS.Enabled)
	require.Equal(t, "123", cfg.Redis.KeyPrefix)
	require.Equal(t, []string{"a", "b"}, cfg.Worker.Queues)
	require.False(t, cfg.Tracing.Insecure)
	require.False(t, cfg.Metrics.Enabled)
}

func TestEnvOverridesFile(t *testing.T) {
	t.Parallel()
	path := writeConfig(t, "grpc:\n  port: 6000\nlogging:\n  level: debug\n")
	cfg, _ := load(t, config.LoadOptions{
		File:    path,
		Environ: []string{"JQ_GRPC_PORT=7000", "PATH=/bin", "HOME=/root"},
	})
	require.Equal(t, 7000, cfg.GRPC.Port)
	require.Equal(t, "debug", cfg.Logging.Level)
}

func TestFlagsOverrideEnv(t *testing.T) {
	t.Parallel()
	path := writeConfig(t, "grpc:\n  port: 6000\n")
	cfg, _ := load(t, config.LoadOptions{
		File:    path,
		Environ: []string{"JQ_GRPC_PORT=7000", "JQ_LOGGING_LEVEL=warn", "JQ_WORKER_QUEUES=a,b"},
		Flags: map[string]any{
			"grpc.port":      8000,
			"server.dry_run": true,
			"worker.queues":  []string{"c"},
			"worker.id":      nil, // nil = not set
		},
	})
	require.Equal(t, 8000, cfg.GRPC.Port)
	require.True(t, cfg.Server.DryRun)
	require.Equal(t, "warn", cfg.Logging.Level)
	require.Equal(t, []string{"c"}, cfg.Worker.Queues)
	require.Empty(t, cfg.Worker.ID)
}

func TestFlagTypes(t *testing.T) {
	t.Parallel()
	cfg, _ := load(t, config.LoadOptions{Flags: map[string]any{
		"worker.concurrency":   uint16(8),
		"metrics.port":         int64(9100),
		"tracing.sample_ratio": float32(0.5),
		"worker.queues":        "x, y,,",
		"logging.level":        "debug",
	}})
	require.Equal(t, 8, cfg.Worker.Concurrency)
	require.Equal(t, 9100, cfg.Metrics.Port)
	require.InDelta(t, 0.5, cfg.Tracing.SampleRatio, 0)
	require.Equal(t, []string{"x", "y"}, cfg.Worker.Queues)
}

func TestUnknownFlagKey(t *testing.T) {
	t.Parallel()
	_, _, err := config.Load(config.LoadOptions{Flags: map[string]any{"grpc.prot": 1}})
	require.ErrorContains(t, err, `unknown flag key "grpc.prot"`)
	require.NotErrorIs(t, err, config.ErrInvalid)
}

func TestBadFlagValue(t *testing.T) {
	t.Parallel()
	err := loadErr(t, config.LoadOptions{Flags: map[string]any{
		"scheduler.interval_ms": 500 * time.Millisecond,
		"server.dry_run":        "maybe",
	}})
	require.ErrorContains(t, err, "scheduler.interval_ms (flag): expected an integer, got the duration 500ms")
	require.ErrorContains(t, err, `server.dry_run (flag): expected true or false, got "maybe"`)
}

func TestEnvKeysWithUnderscores(t *testing.T) {
	t.Parallel()
	cfg, warnings := load(t, config.LoadOptions{Environ: []string{
		"JQ_SCHEDULER_BATCH_SIZE=42",
		"JQ_SCHEDULER_WORKER_HEARTBEAT_TIMEOUT_S=45",
		"JQ_DB_PASSWORD=s3cret",
		"JQ_KAFKA_PRODUCER_ACKS=none",
		"JQ_KAFKA_SASL_PASSWORD=kpw",
		"JQ_SERVER_MAX_PAYLOAD_BYTES=2048",
		"JQ_GRPC_TLS_CLIENT_CA_PATH=",
		"JQ_TRACING_SAMPLE_RATIO=0.5",
		"JQ_METRICS_ENABLED=false",
	}})
	require.Empty(t, warnings, "secrets from the environment are fine")
	require.Equal(t, 42, cfg.Scheduler.BatchSize)
	require.Equal(t, 45, cfg.Scheduler.WorkerHeartbeatTimeoutS)
	require.Equal(t, "s3cret", cfg.DB.Password)
	require.Equal(t, "none", cfg.Kafka.Producer.Acks)
	require.Equal(t, "kpw", cfg.Kafka.SASL.Password)
	require.Equal(t, 2048, cfg.Server.MaxPayloadBytes)
	require.InDelta(t, 0.5, cfg.Tracing.SampleRatio, 0)
	require.False(t, cfg.Metrics.Enabled)
}

func TestEnvIgnoresUnrelatedVariables(t *testing.T) {
	t.Parallel()
	cfg, warnings := load(t, config.LoadOptions{Environ: []string{
		"JQ_ROLE=server",
		"JQ_SERVER_ADDR=elsewhere:1",
		"JQ_TEST_POSTGRES_URL=postgres://x",
		"JQ_GRPC_PROT=1",
		"jq_grpc_port=1",
		"JQ_GRPC_PORT",  // no "=": ignored
		"JQ_GRPC_PORT=", // empty: unset
		"JQ_METRICS_PORT=9200",
		"JQ_METRICS_PORT=9300", // repeated: first wins, as with os.Getenv
	}})
	require.Empty(t, warnings)
	require.Equal(t, 50051, cfg.GRPC.Port)
	require.Equal(t, 9200, cfg.Metrics.Port)
}

func TestEnvLists(t *testing.T) {
	t.Parallel()
	cfg, _ := load(t, config.LoadOptions{Environ: []string{
		"JQ_KAFKA_BROKERS=a:9092, b:9092",
		"JQ_WORKER_QUEUES=a,b",
	}})
	require.Equal(t, []string{"a:9092", "b:9092"}, cfg.Kafka.Brokers)
	require.Equal(t, []string{"a", "b"}, cfg.Worker.Queues)
}

func TestEnvBadValueType(t *testing.T) {
	t.Parallel()
	err := loadErr(t, config.LoadOptions{Environ: []string{
		"JQ_GRPC_PORT=abc",
		"JQ_KAFKA_ENABLED=yes please",
		"JQ_TRACING_SAMPLE_RATIO=NaN",
	}})
	require.ErrorContains(t, err, `grpc.port (env JQ_GRPC_PORT): expected an integer, got "abc"`)
	require.ErrorContains(t, err, `kafka.enabled (env JQ_KAFKA_ENABLED): expected true or false`)
	require.ErrorContains(t, err, `tracing.sample_ratio (env JQ_TRACING_SAMPLE_RATIO): expected a number`)
	var fe *config.FieldError
	require.ErrorAs(t, err, &fe)
	require.Equal(t, "grpc.port", fe.Key)
	require.Equal(t, "env JQ_GRPC_PORT", fe.Source)
}

func TestFileBadValueTypes(t *testing.T) {
	t.Parallel()
	path := writeConfig(t, `
grpc:
  port: 1.5
  tls: true
db:
  port:
    nested: 1
  pool_size: [1]
kafka:
  brokers: [{host: a}]
metrics:
  enabled: 3
tracing:
  sample_ratio: lots
  endpoint: [a]
`)
	err := loadErr(t, config.LoadOptions{File: path})
	src := "(file " + path + ")"
	for _, want := range []string{
		"grpc.port " + src + ": expected an integer, got 1.5",
		"grpc.tls " + src + ": expected a mapping of keys, got true",
		"db.port " + src + ": expected an integer, got a mapping",
		"db.pool_size " + src + ": expected an integer, got a list",
		"kafka.brokers " + src + ": expected a list of strings, got a list containing a mapping",
		"metrics.enabled " + src + ": expected true or false, got 3",
		"tracing.sample_ratio " + src + `: expected a number, got "lots"`,
		"tracing.endpoint " + src + ": expected a string, got a list",
	} {
		require.ErrorContains(t, err, want)
	}
}

func TestUnknownFileKey(t *testing.T) {
	t.Parallel()
	path := writeConfig(t, "grpc:\n  prot: 1\nschedular:\n  batch_size: 5\n")
	err := loadErr(t, config.LoadOptions{File: path})
	require.ErrorContains(t, err, "grpc.prot (file "+path+"): unknown key (did you mean grpc.port?)")
	require.ErrorContains(t, err, "schedular.batch_size (file "+path+"): unknown key (did you mean scheduler.batch_size?)")

	path = writeConfig(t, "\"odd key\\nx\": 1\n")
	err = loadErr(t, config.LoadOptions{File: path})
	require.Equal(t, "\"odd key\\nx\" (file "+path+"): unknown key", err.Error())
}

func TestMissingFile(t *testing.T) {
	t.Parallel()
	_, _, err := config.Load(config.LoadOptions{File: "/nonexistent/jq.yaml"})
	require.ErrorIs(t, err, fs.ErrNotExist)
	require.ErrorContains(t, err, "/nonexistent/jq.yaml")
	require.NotErrorIs(t, err, config.ErrInvalid)
}

func TestYAMLSyntaxError(t *testing.T) {
	t.Parallel()
	path := writeConfig(t, "grpc:\n  port: 1\n bad: [\n")
	_, _, err := config.Load(config.LoadOptions{File: path})
	require.Error(t, err)
	require.ErrorContains(t, err, path)
	require.Regexp(t, `yaml: line \d+: `, err.Error())
	require.NotErrorIs(t, err, config.ErrInvalid)
}

func TestSecretInFileWarns(t *testing.T) {
	t.Parallel()
	path := writeConfig(t, `
db:
  password: hunter2
redis:
  password: ""
kafka:
  sasl:
    password: kpw
`)
	_, warnings := load(t, config.LoadOptions{File: path})
	require.Equal(t, []string{
		"config: db.password is set in the config file; provide secrets with JQ_DB_PASSWORD instead",
		"config: kafka.sasl.password is set in the config file; provide secrets with JQ_KAFKA_SASL_PASSWORD instead",
	}, warnings)
}

// FR-045: in production (the caller's Production says so) a secret in the file is refused, naming
// the key and the variable to use; the value is never echoed. Local development keeps the warning.
func TestSecretInFileRefusedInProduction(t *testing.T) {
	t.Parallel()
	path := writeConfig(t, "db:\n  password: hunter2\n  url: postgres://jq:pw@db:5432/jobqueue\nredis:\n  password: r\n")
	var asked *config.Config
	prod := func(c *config.Config) bool { asked = c; return !config.IsLoopback(c.GRPC.Host) }
	err := loadErr(t, config.LoadOptions{File: path, Production: prod})
	require.NotNil(t, asked, "asked with the merged configuration")
	require.ErrorIs(t, err, config.ErrInvalid)
	lines := strings.Split(err.Error(), "\n")
	require.Len(t, lines, 3, "one line per secret")
	require.Contains(t, err.Error(), "db.password (file "+path+"): is set in the config file: a non-loopback listener means production")
	require.Contains(t, err.Error(), "set JQ_DB_PASSWORD instead")
	require.Contains(t, err.Error(), "redis.password (file "+path+"): is set in the config file")
	require.Contains(t, err.Error(), "set JQ_REDIS_PASSWORD instead")
	require.Contains(t, err.Error(), "db.url (file "+path+"): contains a password")
	require.NotContains(t, err.Error(), "hunter2")
	require.NotContains(t, err.Error(), ":pw@")

	// The same file on a loopback listener: local development, warnings.
	cfg, warnings, err := config.Load(config.LoadOptions{File: path, Environ: []string{"JQ_GRPC_HOST=127.0.0.1"}, Production: prod})
	require.NoError(t, err)
	require.Equal(t, "hunter2", cfg.DB.Password)
	require.Len(t, warnings, 3)

	// Secrets from the environment are fine in production.
	_, warnings, err = config.Load(config.LoadOptions{Environ: []string{"JQ_DB_PASSWORD=x"}, Production: prod})
	require.NoError(t, err)
	require.Empty(t, warnings)
}

func TestSecretInFileURLWarns(t *testing.T) {
	t.Parallel()
	path := writeConfig(t, "db:\n  url: postgres://jq:pw@db:5432/jobqueue\n")
	_, warnings := load(t, config.LoadOptions{File: path})
	require.Len(t, warnings, 1)
	require.Contains(t, warnings[0], "db.url in the config file contains a password")

	path = writeConfig(t, "db:\n  url: postgres://jq@db:5432/jobqueue\n")
	_, warnings = load(t, config.LoadOptions{File: path})
	require.Empty(t, warnings)
}

func TestSecretFromEnvDoesNotWarn(t *testing.T) {
	t.Parallel()
	path := writeConfig(t, "db:\n  host: db\n")
	cfg, warnings := load(t, config.LoadOptions{
		File:    path,
		Environ: []string{"JQ_DB_PASSWORD=hunter2", "JQ_REDIS_PASSWORD=r", "JQ_DB_URL=postgres://u:p@h/d"},
	})
	require.Empty(t, warnings)
	require.Equal(t, "hunter2", cfg.DB.Password)
	require.Equal(t, "r", cfg.Redis.Password)
}

func TestExampleConfigLoadsCleanly(t *testing.T) {
	t.Parallel()
	const example = "../examples/config.yaml"
	cfg, warnings := load(t, config.LoadOptions{File: example})
	require.Empty(t, warnings)
	require.Equal(t, config.Default(), *cfg, "the example documents the defaults")

	// Every key is present, so the example stays complete as keys are added.
	k := readKeys(t, example)
	require.ElementsMatch(t, config.Keys(), k)
}

func TestKeysAndEnvVar(t *testing.T) {
	t.Parallel()
	keys := config.Keys()
	require.Equal(t, "grpc.port", keys[0])
	require.Contains(t, keys, "kafka.producer.acks")
	require.Equal(t, "JQ_SCHEDULER_WORKER_HEARTBEAT_TIMEOUT_S", config.EnvVar("scheduler.worker_heartbeat_timeout_s"))
	seen := map[string]bool{}
	for _, k := range keys {
		env := config.EnvVar(k)
		require.False(t, seen[env], "env name %s is ambiguous", env)
		seen[env] = true
	}
}

func TestUnknownEnvWarnsWithSuggestion(t *testing.T) {
	t.Parallel()
	got := config.UnknownEnv([]string{
		"JQ_WORKER_CONCURENCY=3", // a typo of a key
		"JQ_ROL=admin",           // a typo of a name read elsewhere
		"JQ_WORKER_CONCURRENCY=3",
		"JQ_ROLE=admin",
		"JQ_TEST_DATABASE_URL=x", // the test suite's
		"JQ_SOMETHING_ELSE_ENTIRELY=1",
		"PATH=/bin",
	}, []string{"JQ_ROLE"})
	require.Equal(t, []string{
		"JQ_WORKER_CONCURENCY is not a jq setting (did you mean JQ_WORKER_CONCURRENCY?); ignored",
		"JQ_ROL is not a jq setting (did you mean JQ_ROLE?); ignored",
		"JQ_SOMETHING_ELSE_ENTIRELY is not a jq setting; ignored",
	}, got)
}
