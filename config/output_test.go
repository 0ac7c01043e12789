package config_test

import (
	"testing"

	"github.com/jackc/pgx/v5/pgconn"
	"github.com/stretchr/testify/require"

	"github.com/jq-dev/jq/config"
)

func TestRedactedHidesSecrets(t *testing.T) {
	t.Parallel()
	c := config.Default()
	c.DB.Password = "dbpw"
	c.DB.URL = "postgres://jq:urlpw@db:5432/jobqueue?sslmode=disable"
	c.Redis.Password = "redispw"
	c.Kafka.SASL.Password = "kafkapw"
	c.Worker.HTTP.SigningSecret = "hmacpw"

	r := c.Redacted()
	require.Equal(t, "[REDACTED]", r.Worker.HTTP.SigningSecret)
	require.Equal(t, "[REDACTED]", r.DB.Password)
	require.Equal(t, "[REDACTED]", r.Redis.Password)
	require.Equal(t, "[REDACTED]", r.Kafka.SASL.Password)
	require.Equal(t, "postgres://jq:REDACTED@db:5432/jobqueue?sslmode=disable", r.DB.URL)
	require.Equal(t, "dbpw", c.DB.Password, "the original is untouched")

	out, err := r.YAML()
	require.NoError(t, err)
	for _, secret := range []string{"dbpw", "urlpw", "redispw", "kafkapw", "hmacpw"} {
		require.NotContains(t, string(out), secret)
	}

	// The copy's lists do not alias the original's.
	r.Worker.Queues[0] = "changed"
	require.Equal(t, "default", c.Worker.Queues[0])
}

func TestRedactedURLVariants(t *testing.T) {
	t.Parallel()
	for in, want := range map[string]string{
		"":                                "",
		"postgres://jq@db/x":              "postgres://jq@db/x",
		"postgres://db/x?password=secret": "postgres://db/x?password=REDACTED",
		"postgres://%zz":                  "[REDACTED]",
	} {
		c := config.Default()
		c.DB.URL = in
		require.Equal(t, want, c.Redacted().DB.URL, in)
	}
	c := config.Default()
	require.Empty(t, c.Redacted().DB.Password, "empty secrets stay empty")
}

func TestYAMLRoundTrip(t *testing.T) {
	t.Parallel()
	c := config.Default()
	c.GRPC.Port = 6000
	c.DB.Password = "pw: with 'quotes' and # hash"
	c.Kafka.Brokers = []string{"a:1", "b:2"}
	c.Tracing.SampleRatio = 0.1
	c.Tracing.Endpoint = "otel:4317"
	c.Worker.Queues = []string{"q1", "q.2"}
	c.Logging.Format = "text"
	c.Server.DryRun = true

	out, err := c.YAML()
	require.NoError(t, err)
	path := writeConfig(t, string(out))
	got, warnings := load(t, config.LoadOptions{File: path})
	require.Equal(t, c, *got)
	require.Len(t, warnings, 1, "db.password is in the printed file")

	// An empty list survives as [] rather than null.
	c.Kafka.Brokers = nil
	out, err = c.YAML()
	require.NoError(t, err)
	require.Contains(t, string(out), "brokers: []")
	got, _ = load(t, config.LoadOptions{File: writeConfig(t, string(out))})
	require.Empty(t, got.Kafka.Brokers)
}

func TestYAMLShape(t *testing.T) {
	t.Parallel()
	c := config.Default()
	out, err := c.YAML()
	require.NoError(t, err)
	require.Contains(t, string(out), "grpc:\n  port: 50051\n")
	require.Contains(t, string(out), "scheduler:\n  interval_ms: 500\n  batch_size: 100\n")
	require.ElementsMatch(t, config.Keys(), readKeys(t, writeConfig(t, string(out))))
}

func TestDSN(t *testing.T) {
	t.Parallel()
	c := config.Default().DB
	require.Equal(t, "postgres://jq@localhost:5432/jobqueue?connect_timeout=3&sslmode=disable", c.DSN())

	c.Password = "p@ss:w/rd?#%& é"
	c.Host = "::1"
	c.ConnectTimeoutMS = 1500
	pc, err := pgconn.ParseConfig(c.DSN())
	require.NoError(t, err)
	require.Equal(t, "p@ss:w/rd?#%& é", pc.Password)
	require.Equal(t, "jq", pc.User)
	require.Equal(t, "::1", pc.Host)
	require.Equal(t, uint16(5432), pc.Port)
	require.Equal(t, "jobqueue", pc.Database)
	require.Equal(t, 2e9, float64(pc.ConnectTimeout), "rounded up to whole seconds")

	c.Password, c.User = "", ""
	require.Equal(t, "postgres://[::1]:5432/jobqueue?connect_timeout=2&sslmode=disable", c.DSN())
}

func TestDSNFromURL(t *testing.T) {
	t.Parallel()
	d := config.Default().DB
	d.URL = "postgres://app@db:5432/jq?sslmode=require"
	require.Equal(t, d.URL, d.DSN(), "URL wins; no password to add")

	d.Password = "s e/cret"
	pc, err := pgconn.ParseConfig(d.DSN())
	require.NoError(t, err)
	require.Equal(t, "app", pc.User)
	require.Equal(t, "s e/cret", pc.Password, "db.password fills a URL without one")

	d.URL = "postgres://db/jq"
	pc, err = pgconn.ParseConfig(d.DSN())
	require.NoError(t, err)
	require.Equal(t, "jq", pc.User, "db.user is used when the URL names no user")
	require.Equal(t, "s e/cret", pc.Password)

	for _, u := range []string{"postgres://app:own@db/jq", "postgres://db/jq?password=own", "postgres://%zz"} {
		d.URL = u
		require.Equal(t, u, d.DSN(), "a URL with its own password (or unparsable) is kept as is")
	}
}
