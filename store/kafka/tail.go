package kafkastore

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strconv"
	"sync"
	"time"

	"github.com/segmentio/kafka-go"
)

// TailConfig configures a Tail. The connection values mirror config.Kafka, as Config's do.
type TailConfig struct {
	Brokers []string
	Topic   string
	// SASLMechanism is "" (off), plain, scram-sha-256 or scram-sha-512.
	SASLMechanism, SASLUsername, SASLPassword string
	TLS                                       bool
	TLSCAPath                                 string        // empty: system roots
	DialTimeout                               time.Duration // 10 s
	// TopicPoll is how often a topic that does not exist yet is looked for again (1 s).
	TopicPoll time.Duration
}

// Tail follows one topic from its end (`jq --role=admin events tail`): every partition, without a
// consumer group, so it commits no offsets and never takes partitions from the topic's real
// consumers. Order holds within a partition (a job's events share one); partitions interleave as
// their messages arrive. Partitions added while it runs are not followed.
type Tail struct {
	cfg    TailConfig
	dialer *kafka.Dialer
	msgs   chan []byte
	errc   chan error
	cancel context.CancelFunc
	wg     sync.WaitGroup

	mu      sync.Mutex
	readers []*kafka.Reader
}

// NewTail connects, reads the topic's partitions and their end offsets, and starts following: a
// message written after NewTail returns is read. A topic that does not exist yet is looked for
// every TopicPoll and then followed from its start (it has no older messages). ctx bounds only
// this setup.
func NewTail(ctx context.Context, cfg TailConfig) (*Tail, error) {
	if len(cfg.Brokers) == 0 {
		return nil, errors.New("kafka: no brokers")
	}
	if cfg.Topic == "" {
		return nil, errors.New("kafka: no topic")
	}
	mech, err := saslMechanism(cfg.SASLMechanism, cfg.SASLUsername, cfg.SASLPassword)
	if err != nil {
		return nil, err
	}
	d := &kafka.Dialer{Timeout: cfg.DialTimeout, SASLMechanism: mech, DualStack: true}
	if d.Timeout <= 0 {
		d.Timeout = 10 * time.Second
	}
	if cfg.TLS {
		if d.TLS, err = tlsConfig(cfg.TLSCAPath); err != nil {
			return nil, err
		}
	}
	if cfg.TopicPoll <= 0 {
		cfg.TopicPoll = time.Second
	}
	offsets, err := endOffsets(ctx, d, cfg.Brokers, cfg.Topic)
	if err != nil {
		return nil, err
	}
	runCtx, cancel := context.WithCancel(context.Background())
	t := &Tail{cfg: cfg, dialer: d, msgs: make(chan []byte), errc: make(chan error, 1), cancel: cancel}
	if offsets != nil {
		t.follow(runCtx, offsets)
	} else {
		t.wg.Go(func() { t.awaitTopic(runCtx) })
	}
	return t, nil
}

// Next blocks until the next message and returns its value.
func (t *Tail) Next(ctx context.Context) ([]byte, error) {
	select {
	case v := <-t.msgs:
		return v, nil
	case err := <-t.errc:
		return nil, err
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

// Close stops following and closes the connections.
func (t *Tail) Close() error {
	t.cancel()
	t.wg.Wait()
	t.mu.Lock()
	defer t.mu.Unlock()
	var errs []error
	for _, r := range t.readers {
		errs = append(errs, r.Close())
	}
	t.readers = nil
	return errors.Join(errs...)
}

// errNoTopic: the topic does not exist (yet).
var errNoTopic = errors.New("no such topic")

// endOffsets returns the next offset of each partition of topic; nil (and no error) when the topic
// does not exist.
func endOffsets(ctx context.Context, d *kafka.Dialer, brokers []string, topic string) (map[int]int64, error) {
	parts, err := partitions(ctx, d, brokers, topic)
	if errors.Is(err, errNoTopic) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	out := make(map[int]int64, len(parts))
	for _, p := range parts {
		conn, err := d.DialLeader(ctx, "tcp", net.JoinHostPort(p.Leader.Host, strconv.Itoa(p.Leader.Port)), topic, p.ID)
		if err != nil {
			return nil, fmt.Errorf("kafka: tail %s partition %d: %w", topic, p.ID, err)
		}
		off, err := conn.ReadLastOffset()
		_ = conn.Close()
		if err != nil {
			return nil, fmt.Errorf("kafka: tail %s partition %d: end offset: %w", topic, p.ID, err)
		}
		out[p.ID] = off
	}
	return out, nil
}

// partitions asks the first broker that answers; errNoTopic when the topic does not exist.
func partitions(ctx context.Context, d *kafka.Dialer, brokers []string, topic string) ([]kafka.Partition, error) {
	var errs []error
	for _, b := range brokers {
		conn, err := d.DialContext(ctx, "tcp", b)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		parts, err := conn.ReadPartitions(topic)
		_ = conn.Close()
		if errors.Is(err, kafka.UnknownTopicOrPartition) || (err == nil && len(parts) == 0) {
			return nil, errNoTopic
		}
		if err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", b, err))
			continue
		}
		return parts, nil
	}
	return nil, fmt.Errorf("kafka: tail %s: %w", topic, errors.Join(errs...))
}

// awaitTopic polls for the topic and follows it from the start once it exists.
func (t *Tail) awaitTopic(ctx context.Context) {
	tick := time.NewTicker(t.cfg.TopicPoll)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
		parts, err := partitions(ctx, t.dialer, t.cfg.Brokers, t.cfg.Topic)
		if errors.Is(err, errNoTopic) || (err != nil && ctx.Err() == nil) {
			continue // a broker down is retried like a missing topic
		}
		if err != nil {
			return
		}
		offsets := make(map[int]int64, len(parts))
		for _, p := range parts {
			offsets[p.ID] = kafka.FirstOffset
		}
		t.follow(ctx, offsets)
		return
	}
}

// follow starts one reader per partition at its offset.
func (t *Tail) follow(ctx context.Context, offsets map[int]int64) {
	t.mu.Lock()
	defer t.mu.Unlock()
	for p, off := range offsets {
		r := kafka.NewReader(kafka.ReaderConfig{
			Brokers:   t.cfg.Brokers,
			Topic:     t.cfg.Topic,
			Partition: p,
			Dialer:    t.dialer,
			MinBytes:  1,
			MaxBytes:  10 << 20,
			MaxWait:   500 * time.Millisecond,
		})
		if err := r.SetOffset(off); err != nil {
			t.fail(fmt.Errorf("kafka: tail %s partition %d: %w", t.cfg.Topic, p, err))
			_ = r.Close()
			continue
		}
		t.readers = append(t.readers, r)
		t.wg.Go(func() { t.read(ctx, r, p) })
	}
}

func (t *Tail) read(ctx context.Context, r *kafka.Reader, p int) {
	for {
		m, err := r.ReadMessage(ctx)
		if err != nil {
			if ctx.Err() == nil {
				t.fail(fmt.Errorf("kafka: tail %s partition %d: %w", t.cfg.Topic, p, err))
			}
			return
		}
		select {
		case t.msgs <- m.Value:
		case <-ctx.Done():
			return
		}
	}
}

// fail hands the first error to Next.
func (t *Tail) fail(err error) {
	select {
	case t.errc <- err:
	default:
	}
}
