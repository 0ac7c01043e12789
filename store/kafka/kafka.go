// Package kafkastore is the Kafka event sink of the outbox relay (store.EventSink), on segmentio/kafka-go.
//
// One synchronous Writer publishes every topic: a call returns once the brokers acknowledged the
// batch (acks=all by default), so the relay marks events published only after Kafka has them.
// Messages are partitioned by the murmur2 hash of their key (the job id), as the Java client does,
// so a job's events share a partition whatever client produces or consumes next to jq.
package kafkastore

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net"
	"os"
	"strconv"
	"time"

	"github.com/segmentio/kafka-go"
	"github.com/segmentio/kafka-go/sasl"
	"github.com/segmentio/kafka-go/sasl/plain"
	"github.com/segmentio/kafka-go/sasl/scram"

	"github.com/jq-dev/jq/store"
)

// Config configures a Sink. The values mirror config.Kafka.
type Config struct {
	Brokers     []string
	Acks        string // all (default) | one | none
	Compression string // none (default) | gzip | snappy | lz4 | zstd
	BatchSize   int    // messages per partition batch (100)
	// CallSize is the most messages one EventsPublish call carries (the relay's claim). Batches
	// are made at least this big, so kafka-go never splits one call's messages for a partition
	// into several batches by count: it could write a later batch after an earlier one failed,
	// and a job's events would then reach their partition out of order when the relay retries.
	// (A split by bytes, past MaxMessageBytes per partition and call, remains possible; events are
	// small unless they carry a large trace context.)
	CallSize int
	Linger   time.Duration // wait to fill a partial batch (>= 1 ms; kafka-go would wait 1 s on 0)
	// MaxMessageBytes is the most one message may take, and the most one batch to a partition
	// takes (kafka.max_event_bytes; 0: kafka-go's 1 MiB). Keep it at or below the brokers'
	// message.max.bytes, so that no batch is refused whole for one large message.
	MaxMessageBytes int
	// SASLMechanism is "" (off), plain, scram-sha-256 or scram-sha-512; credentials come from the
	// configuration (the password from the environment only).
	SASLMechanism, SASLUsername, SASLPassword string
	TLS                                       bool
	TLSCAPath                                 string // empty: system roots
	// AllowAutoTopicCreation asks the broker to create missing topics (the broker's own setting
	// still decides).
	AllowAutoTopicCreation bool
	DialTimeout            time.Duration // 10 s
}

// Sink publishes encoded events to Kafka.
type Sink struct {
	w    *kafka.Writer
	tr   *kafka.Transport
	addr net.Addr
}

var _ store.EventSink = (*Sink)(nil)

// New builds the writer. It does not contact the brokers: Kafka is not critical to a server (events
// wait in the outbox), and the relay reports an unreachable broker when it publishes.
func New(cfg Config) (*Sink, error) {
	if len(cfg.Brokers) == 0 {
		return nil, errors.New("kafka: no brokers")
	}
	acks, err := requiredAcks(cfg.Acks)
	if err != nil {
		return nil, err
	}
	comp, err := compression(cfg.Compression)
	if err != nil {
		return nil, err
	}
	mech, err := saslMechanism(cfg.SASLMechanism, cfg.SASLUsername, cfg.SASLPassword)
	if err != nil {
		return nil, err
	}
	var tc *tls.Config
	if cfg.TLS {
		if tc, err = tlsConfig(cfg.TLSCAPath); err != nil {
			return nil, err
		}
	}
	dial := cfg.DialTimeout
	if dial <= 0 {
		dial = 10 * time.Second
	}
	tr := &kafka.Transport{SASL: mech, TLS: tc, DialTimeout: dial}
	w := &kafka.Writer{
		Addr:                   kafka.TCP(cfg.Brokers...),
		Balancer:               &kafka.Murmur2Balancer{},
		RequiredAcks:           acks,
		Compression:            comp,
		BatchSize:              max(cfg.BatchSize, cfg.CallSize, 1),
		BatchTimeout:           max(cfg.Linger, time.Millisecond),
		BatchBytes:             int64(cfg.MaxMessageBytes),
		MaxAttempts:            3, // short broker hiccups (leader moves); the relay retries outages
		WriteBackoffMin:        50 * time.Millisecond,
		WriteBackoffMax:        500 * time.Millisecond,
		AllowAutoTopicCreation: cfg.AllowAutoTopicCreation,
		Transport:              tr,
	}
	return &Sink{w: w, tr: tr, addr: w.Addr}, nil
}

// EnsureTopics creates the topics that do not exist yet, with the broker's default partition count
// and replication factor and retention.ms = retention, and returns the ones it created. Existing
// topics are left as they are (their retention is the operator's). It needs a broker that accepts
// -1 for the defaults (Kafka 2.4 or later) and the right to create topics.
func (s *Sink) EnsureTopics(ctx context.Context, topics []string, retention time.Duration) (created []string, err error) {
	req := &kafka.CreateTopicsRequest{Addr: s.addr}
	for _, t := range topics {
		req.Topics = append(req.Topics, kafka.TopicConfig{
			Topic: t, NumPartitions: -1, ReplicationFactor: -1,
			ConfigEntries: []kafka.ConfigEntry{{ConfigName: "retention.ms", ConfigValue: strconv.FormatInt(retention.Milliseconds(), 10)}},
		})
	}
	cl := &kafka.Client{Addr: s.addr, Transport: s.tr}
	res, err := cl.CreateTopics(ctx, req)
	if err != nil {
		return nil, fmt.Errorf("kafka: create topics: %w", err)
	}
	var errs []error
	for _, t := range topics {
		switch e := res.Errors[t]; {
		case e == nil:
			created = append(created, t)
		case errors.Is(e, kafka.TopicAlreadyExists):
		default:
			errs = append(errs, fmt.Errorf("kafka: create topic %s: %w", t, e))
		}
	}
	return created, errors.Join(errs...)
}

// EventsPublish implements store.EventSink.
func (s *Sink) EventsPublish(ctx context.Context, topic string, msgs []store.EventMessage) error {
	if len(msgs) == 0 {
		return nil
	}
	km := make([]kafka.Message, len(msgs))
	for i, m := range msgs {
		km[i] = kafka.Message{Topic: topic, Key: m.Key, Value: m.Value}
		if len(m.Headers) > 0 {
			km[i].Headers = make([]kafka.Header, len(m.Headers))
			for j, h := range m.Headers {
				km[i].Headers[j] = kafka.Header{Key: h.Key, Value: h.Value}
			}
		}
	}
	if err := s.w.WriteMessages(ctx, km...); err != nil {
		if tl := tooLarge(err, km); tl != nil {
			return fmt.Errorf("kafka: publish to %s: %w", topic, tl)
		}
		return fmt.Errorf("kafka: publish to %s: %w", topic, summarize(err))
	}
	return nil
}

// tooLarge names the messages that were refused for their size: the one kafka-go refuses before
// sending anything (over the writer's BatchBytes), or those the broker answered MESSAGE_TOO_LARGE
// (or RECORD_LIST_TOO_LARGE) for. nil when err is not about size.
func tooLarge(err error, km []kafka.Message) *store.EventsTooLargeError {
	var mtl kafka.MessageTooLargeError
	if errors.As(err, &mtl) {
		for i := range km {
			if bytes.Equal(km[i].Key, mtl.Message.Key) && bytes.Equal(km[i].Value, mtl.Message.Value) {
				return &store.EventsTooLargeError{Indexes: []int{i}, Err: kafka.MessageSizeTooLarge}
			}
		}
		return nil
	}
	var we kafka.WriteErrors
	if !errors.As(err, &we) {
		return nil
	}
	var tl store.EventsTooLargeError
	for i, e := range we {
		if errors.Is(e, kafka.MessageSizeTooLarge) || errors.Is(e, kafka.RecordListTooLarge) {
			tl.Indexes = append(tl.Indexes, i)
			tl.Err = e
		}
	}
	if len(tl.Indexes) == 0 {
		return nil
	}
	return &tl
}

// summarize shortens kafka-go's per-message WriteErrors (one entry per message of the batch, mostly
// the same error) to a count and the first error, which it wraps.
func summarize(err error) error {
	var we kafka.WriteErrors
	if !errors.As(err, &we) {
		return err
	}
	for _, e := range we {
		if e != nil {
			return fmt.Errorf("%d of %d messages failed, first: %w", we.Count(), len(we), e)
		}
	}
	return err
}

// Close flushes and closes the writer, then the transport's connection pools (Writer.Close leaves
// their metadata goroutines running).
func (s *Sink) Close() error {
	err := s.w.Close()
	s.tr.CloseIdleConnections()
	return err
}

func requiredAcks(s string) (kafka.RequiredAcks, error) {
	switch s {
	case "", "all":
		return kafka.RequireAll, nil
	case "one":
		return kafka.RequireOne, nil
	case "none":
		return kafka.RequireNone, nil
	}
	return 0, fmt.Errorf("kafka: unknown acks %q", s)
}

func compression(s string) (kafka.Compression, error) {
	switch s {
	case "", "none":
		return 0, nil
	case "gzip":
		return kafka.Gzip, nil
	case "snappy":
		return kafka.Snappy, nil
	case "lz4":
		return kafka.Lz4, nil
	case "zstd":
		return kafka.Zstd, nil
	}
	return 0, fmt.Errorf("kafka: unknown compression %q", s)
}

func saslMechanism(mech, user, pass string) (sasl.Mechanism, error) {
	switch mech {
	case "":
		return nil, nil
	case "plain":
		return plain.Mechanism{Username: user, Password: pass}, nil
	case "scram-sha-256", "scram-sha-512":
		algo := scram.SHA256
		if mech == "scram-sha-512" {
			algo = scram.SHA512
		}
		m, err := scram.Mechanism(algo, user, pass)
		if err != nil {
			return nil, fmt.Errorf("kafka: sasl %s: %w", mech, err)
		}
		return m, nil
	}
	return nil, fmt.Errorf("kafka: unknown sasl mechanism %q", mech)
}

func tlsConfig(caPath string) (*tls.Config, error) {
	tc := &tls.Config{MinVersion: tls.VersionTLS12}
	if caPath == "" {
		return tc, nil
	}
	pem, err := os.ReadFile(caPath)
	if err != nil {
		return nil, fmt.Errorf("kafka: tls ca: %w", err)
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(pem) {
		return nil, fmt.Errorf("kafka: tls ca: no PEM certificates in %s", caPath)
	}
	tc.RootCAs = pool
	return tc, nil
}
