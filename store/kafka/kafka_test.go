package kafka

import (
	"testing"

	"github.com/stretchr/testify/require"
)

func TestNewRefusesBadSettings(t *testing.T) {
	t.Parallel()
	ok := Config{Brokers: []string{"127.0.0.1:9092"}}
	for name, mut := range map[string]func(*Config){
		"no brokers":  func(c *Config) { c.Brokers = nil },
		"acks":        func(c *Config) { c.Acks = "some" },
		"compression": func(c *Config) { c.Compression = "brotli" },
		"sasl":        func(c *Config) { c.SASLMechanism = "kerberos" },
		"tls ca":      func(c *Config) { c.TLS, c.TLSCAPath = true, "/nonexistent/ca.pem" },
	} {
		c := ok
		mut(&c)
		_, err := New(c)
		require.Error(t, err, name)
	}
	for _, mech := range []string{"plain", "scram-sha-256", "scram-sha-512"} {
		s, err := New(Config{Brokers: ok.Brokers, SASLMechanism: mech, SASLUsername: "u", SASLPassword: "p", Acks: "one", Compression: "zstd"})
		require.NoError(t, err, mech)
		require.NoError(t, s.Close())
	}
}
