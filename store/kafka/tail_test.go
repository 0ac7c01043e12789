package kafkastore

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/segmentio/kafka-go"
	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
)

// produce writes values with franz-go's client, an independent implementation of the protocol.
func produce(t *testing.T, brokers []string, topic string, keyed map[string]string) {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(brokers...), kgo.AllowAutoTopicCreation())
	require.NoError(t, err)
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	for k, v := range keyed {
		require.NoError(t, cl.ProduceSync(ctx, &kgo.Record{Topic: topic, Key: []byte(k), Value: []byte(v)}).FirstErr())
	}
}

func readN(t *testing.T, tail *Tail, n int) map[string]bool {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	got := map[string]bool{}
	for range n {
		v, err := tail.Next(ctx)
		require.NoError(t, err)
		got[string(v)] = true
	}
	return got
}

func messages(prefix string, n int) (map[string]string, map[string]bool) {
	keyed, want := map[string]string{}, map[string]bool{}
	for i := range n {
		v := fmt.Sprintf("%s-%d", prefix, i)
		keyed[fmt.Sprintf("job-%d", i)] = v
		want[v] = true
	}
	return keyed, want
}

// Every partition is followed from its end: older messages are not read, newer ones all are.
func TestTailFollowsEveryPartitionFromTheEnd(t *testing.T) {
	t.Parallel()
	k, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.SeedTopics(3, "tail-events"))
	require.NoError(t, err)
	defer k.Close()
	brokers := k.ListenAddrs()

	old, _ := messages("old", 12)
	produce(t, brokers, "tail-events", old)

	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	tail, err := NewTail(ctx, TailConfig{Brokers: brokers, Topic: "tail-events"})
	require.NoError(t, err)
	defer func() { require.NoError(t, tail.Close()) }()

	fresh, want := messages("new", 30)
	produce(t, brokers, "tail-events", fresh)
	require.Equal(t, want, readN(t, tail, len(want)))

	short, cancelShort := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancelShort()
	_, err = tail.Next(short)
	require.ErrorIs(t, err, context.DeadlineExceeded, "nothing else: the old messages are not read")
}

// A topic created after the tail started is followed from its start.
func TestTailWaitsForTheTopic(t *testing.T) {
	t.Parallel()
	k, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.AllowAutoTopicCreation())
	require.NoError(t, err)
	defer k.Close()
	brokers := k.ListenAddrs()

	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	tail, err := NewTail(ctx, TailConfig{Brokers: brokers, Topic: "later", TopicPoll: 20 * time.Millisecond})
	require.NoError(t, err)
	defer func() { require.NoError(t, tail.Close()) }()

	msgs, want := messages("first", 5)
	// A transport of its own: the default one is process-wide, and its connections would outlive the
	// test (goleak in TestMain).
	tr := &kafka.Transport{}
	w := &kafka.Writer{Addr: kafka.TCP(brokers...), Topic: "later", AllowAutoTopicCreation: true, BatchTimeout: time.Millisecond, Transport: tr}
	defer func() { _ = w.Close(); tr.CloseIdleConnections() }()
	for key, v := range msgs {
		require.NoError(t, w.WriteMessages(ctx, kafka.Message{Key: []byte(key), Value: []byte(v)}))
	}
	require.Equal(t, want, readN(t, tail, len(want)))
}

func TestNewTailRefusesBadSettings(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	for name, c := range map[string]TailConfig{
		"no brokers": {Topic: "t"},
		"no topic":   {Brokers: []string{"127.0.0.1:1"}},
		"sasl":       {Brokers: []string{"127.0.0.1:1"}, Topic: "t", SASLMechanism: "kerberos"},
		"tls ca":     {Brokers: []string{"127.0.0.1:1"}, Topic: "t", TLS: true, TLSCAPath: "/nonexistent/ca.pem"},
		"down":       {Brokers: []string{"127.0.0.1:1"}, Topic: "t", DialTimeout: time.Second},
	} {
		_, err := NewTail(ctx, c)
		require.Error(t, err, name)
	}
}
