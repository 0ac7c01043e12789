package kafkastore

import (
	"errors"
	"testing"

	"github.com/segmentio/kafka-go"
	"github.com/stretchr/testify/require"

	"github.com/jq-dev/jq/store"
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

// Messages refused for their size are named by index: the one kafka-go refuses before sending
// (over MaxMessageBytes), and those a broker answers MESSAGE_TOO_LARGE for.
func TestEventsTooLarge(t *testing.T) {
	t.Parallel()
	s, err := New(Config{Brokers: []string{"127.0.0.1:9"}, MaxMessageBytes: 1024}) // never dialled
	require.NoError(t, err)
	t.Cleanup(func() { _ = s.Close() })
	msgs := []store.EventMessage{
		{Key: []byte("a"), Value: []byte("small")},
		{Key: []byte("b"), Value: make([]byte, 2048)},
		{Key: []byte("c"), Value: []byte("small")},
	}
	err = s.EventsPublish(t.Context(), "t", msgs)
	var tl *store.EventsTooLargeError
	require.ErrorAs(t, err, &tl)
	require.Equal(t, []int{1}, tl.Indexes)
	require.ErrorIs(t, err, kafka.MessageSizeTooLarge)

	km := make([]kafka.Message, 4)
	tl = tooLarge(kafka.WriteErrors{nil, kafka.MessageSizeTooLarge, kafka.LeaderNotAvailable, kafka.RecordListTooLarge}, km)
	require.Equal(t, []int{1, 3}, tl.Indexes)
	require.Nil(t, tooLarge(kafka.WriteErrors{nil, kafka.LeaderNotAvailable, nil, nil}, km), "not about size")
	require.Nil(t, tooLarge(errors.New("dial: refused"), km))
}
