package outbox

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"time"

	"go.uber.org/zap"

	"github.com/jq-dev/jq/internal/ctxtime"
	"github.com/jq-dev/jq/queue"
	"github.com/jq-dev/jq/store"
)

// DefaultBatchSize is the most events one claim takes unless Options.BatchSize says otherwise.
const DefaultBatchSize = 500

// Options configure a Relay. Zero values take the documented defaults.
type Options struct {
	Store store.OutboxStore
	Sink  store.EventSink
	Log   *zap.Logger
	// Encode gives each event's message value (api.MarshalEvent: protobuf jq.v1.JobEvent).
	Encode Encoder

	// TopicEvents receives every event (jq.job-events); TopicDeadLetter additionally receives the
	// events into DEAD_LETTERED (job.dead-lettered).
	TopicEvents, TopicDeadLetter string
	// TraceHeaders adds the job's W3C trace context as message headers (tracing on).
	TraceHeaders bool
	// EnsureTopics, when set, runs once before the relay publishes (it creates the missing topics
	// with jq's retention). A failure is logged and relaying goes on: the topics may exist already,
	// or the broker creates them on first use.
	EnsureTopics func(ctx context.Context) error

	// BatchSize is the most events one claim takes (500).
	BatchSize int
	// Lease is how long other replicas leave a claimed batch alone (30 s). A relay that dies
	// mid-batch delays its events by up to this much.
	Lease time.Duration
	// PublishTimeout bounds one publish of a batch (Lease/2); it must stay below Lease so a live
	// relay finishes before its lease lapses.
	PublishTimeout time.Duration
	// StopGrace is how long a batch in flight when the relay is stopped may still take to be
	// published and marked (5 s): the server's shutdown stays within its bound (NFR-014).
	StopGrace time.Duration
	// PollInterval is the pause after a claim that found nothing (200 ms).
	PollInterval time.Duration
	// BackoffMin and BackoffMax bound the retry delay after a failure (100 ms, 10 s).
	BackoffMin, BackoffMax time.Duration
	// BacklogInterval is how often the backlog is measured for the metrics (5 s).
	BacklogInterval time.Duration
	// MaxEventBytes caps one message (DefaultMaxEventBytes): an event over it is published without
	// its trace context, or parked if still too large; so is one the broker refuses as too large.
	MaxEventBytes int
}

// DefaultMaxEventBytes is Options.MaxEventBytes unless set: below Kafka's default
// message.max.bytes (1 MiB), with room for the record batch around the message.
const DefaultMaxEventBytes = 900 << 10

func (o *Options) defaults() error {
	if o.Store == nil || o.Sink == nil || o.Log == nil || o.Encode == nil {
		return errors.New("outbox: store, sink, encoder and logger are required")
	}
	if o.TopicEvents == "" || o.TopicDeadLetter == "" {
		return errors.New("outbox: both topics are required")
	}
	if o.BatchSize <= 0 {
		o.BatchSize = DefaultBatchSize
	}
	o.BatchSize = min(o.BatchSize, store.MaxOutboxBatch)
	if o.Lease <= 0 {
		o.Lease = 30 * time.Second
	}
	if o.PublishTimeout <= 0 || o.PublishTimeout >= o.Lease {
		o.PublishTimeout = o.Lease / 2
	}
	if o.StopGrace <= 0 {
		o.StopGrace = 5 * time.Second
	}
	if o.PollInterval <= 0 {
		o.PollInterval = 200 * time.Millisecond
	}
	if o.BackoffMin <= 0 {
		o.BackoffMin = 100 * time.Millisecond
	}
	if o.BackoffMax < o.BackoffMin {
		o.BackoffMax = max(o.BackoffMin, 10*time.Second)
	}
	if o.BacklogInterval <= 0 {
		o.BacklogInterval = 5 * time.Second
	}
	if o.MaxEventBytes <= 0 {
		o.MaxEventBytes = DefaultMaxEventBytes
	}
	return nil
}

// Stats is what a relay has done since it started, and the latest backlog it measured.
type Stats struct {
	Published     int64            // events marked published by this relay
	PublishErrors map[string]int64 // failed publish attempts by topic
	Backlog       store.OutboxBacklog
	BacklogKnown  bool // a measurement succeeded at least once
	// Oversized counts the events too large for Kafka by what became of them: Trimmed (published
	// without their trace context) or Parked (never published).
	Oversized map[string]int64
}

// Relay publishes the outbox to the event sink; see the package documentation.
type Relay struct {
	opts Options
	log  *zap.Logger

	published atomic.Int64
	mu        sync.Mutex
	errs      map[string]int64
	oversized map[string]int64
	backlog   store.OutboxBacklog
	known     bool
	running   atomic.Bool
}

// New validates opts. It contacts nothing: Kafka is not critical to a server, and the relay reports
// an unreachable broker once it runs.
func New(opts Options) (*Relay, error) {
	if err := opts.defaults(); err != nil {
		return nil, err
	}
	// Both topics are exported from the start, so an error rate is defined before the first error.
	errs := map[string]int64{opts.TopicEvents: 0, opts.TopicDeadLetter: 0}
	return &Relay{opts: opts, log: opts.Log, errs: errs, oversized: map[string]int64{Trimmed: 0, Parked: 0}}, nil
}

// Stats returns the relay's counters and the latest backlog measurement.
func (r *Relay) Stats() Stats {
	r.mu.Lock()
	defer r.mu.Unlock()
	errs := make(map[string]int64, len(r.errs))
	for k, v := range r.errs {
		errs[k] = v
	}
	return Stats{Published: r.published.Load(), PublishErrors: errs, Oversized: maps.Clone(r.oversized),
		Backlog: r.backlog, BacklogKnown: r.known}
}

// Run relays until ctx ends. A batch being published when ctx ends is finished (published and
// marked, within PublishTimeout and at most StopGrace after ctx ended) before Run returns.
func (r *Relay) Run(ctx context.Context) error {
	if !r.running.CompareAndSwap(false, true) {
		return errors.New("outbox: relay already running")
	}
	defer r.running.Store(false)
	r.log.Info("outbox relay started",
		zap.String("topic_events", r.opts.TopicEvents), zap.String("topic_dead_letter", r.opts.TopicDeadLetter),
		zap.Int("batch_size", r.opts.BatchSize), zap.Duration("lease", r.opts.Lease))
	if r.opts.EnsureTopics != nil {
		tctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		if err := r.opts.EnsureTopics(tctx); err != nil && ctx.Err() == nil {
			r.log.Warn("kafka topics not created; relying on existing topics or the broker's auto-creation", zap.Error(err))
		}
		cancel()
	}
	var wg sync.WaitGroup
	wg.Go(func() { r.backlogLoop(ctx) })
	r.relayLoop(ctx)
	wg.Wait()
	r.log.Info("outbox relay stopped")
	return nil
}

// outage tracks one kind of failure so that it is logged when it starts and when it ends, not at
// every attempt.
type outage struct {
	since    time.Time
	attempts int
}

func (o *outage) fail(log *zap.Logger, msg string, err error, fields ...zap.Field) {
	o.attempts++
	if o.attempts == 1 {
		o.since = time.Now()
		log.Warn(msg, append(fields, zap.Error(err))...)
		return
	}
	log.Debug(msg, append(fields, zap.Error(err), zap.Int("attempt", o.attempts))...)
}

func (o *outage) recover(log *zap.Logger, msg string) {
	if o.attempts == 0 {
		return
	}
	log.Info(msg, zap.Int("failed_attempts", o.attempts), zap.Duration("outage", time.Since(o.since)))
	*o = outage{}
}

func (r *Relay) relayLoop(ctx context.Context) {
	var (
		storeDown, sinkDown outage
		backoff             time.Duration
	)
	for ctx.Err() == nil {
		claim, err := r.opts.Store.EventsClaim(ctx, store.EventsClaimParams{Limit: r.opts.BatchSize, Lease: r.opts.Lease})
		if err != nil {
			if ctx.Err() != nil {
				return
			}
			storeDown.fail(r.log, "outbox claim failed; retrying", err)
			backoff = r.sleepBackoff(ctx, backoff)
			continue
		}
		storeDown.recover(r.log, "outbox claim recovered")
		evs := claim.Events
		if len(evs) == 0 {
			backoff = 0
			ctxtime.Sleep(ctx, r.opts.PollInterval)
			continue
		}
		// The batch is finished even when ctx ends meanwhile: its lease is ours, and marking it
		// now spares the next relay a duplicate. It gets StopGrace after ctx ends, so a slow broker
		// cannot hold up the server's shutdown; what is left unmarked is published again later.
		wctx, done := afterStop(ctx, r.opts.StopGrace)
		topic, shrunk, err := r.publish(wctx, evs)
		if err != nil {
			r.countError(topic)
			sinkDown.fail(r.log, "kafka publish failed; retrying", err,
				zap.String("topic", topic), zap.Int("events", len(evs)))
			r.release(wctx, claim)
			done()
			backoff = r.sleepBackoff(ctx, backoff)
			continue
		}
		sinkDown.recover(r.log, "kafka publish recovered")
		backoff = 0
		err = r.mark(wctx, claim)
		done()
		if err != nil {
			// Published but not marked: the lease expires and the events are published again
			// (at least once).
			storeDown.fail(r.log, "outbox mark published failed; events will be published again", err,
				zap.Int("events", len(evs)))
			backoff = r.sleepBackoff(ctx, backoff)
			continue
		}
		r.published.Add(int64(len(evs) - shrunk.parked))
		r.countOversized(shrunk)
	}
}

// afterStop returns a context that ends grace after ctx ends (or when done is called): work that
// must not be cut off by a stop, but must not outlast it by much either.
func afterStop(ctx context.Context, grace time.Duration) (context.Context, func()) {
	wctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	var timer *time.Timer
	var mu sync.Mutex
	stop := context.AfterFunc(ctx, func() {
		mu.Lock()
		defer mu.Unlock()
		timer = time.AfterFunc(grace, cancel)
	})
	return wctx, func() {
		stop()
		mu.Lock()
		if timer != nil {
			timer.Stop()
		}
		mu.Unlock()
		cancel()
	}
}

// publish writes the batch to the events topic, then its dead-letter events to the dead-letter
// topic, each event trimmed or parked when it is too large (see shrink). It returns the topic that
// failed, and what it shrank.
func (r *Relay) publish(ctx context.Context, evs []store.OutboxEvent) (string, shrunk, error) {
	ctx, cancel := context.WithTimeout(ctx, r.opts.PublishTimeout)
	defer cancel()
	var sh shrunk
	all := make([]*outgoing, len(evs))
	for i := range evs {
		m, err := encode(r.opts.Encode, &evs[i], r.opts.TraceHeaders)
		if err != nil {
			return r.opts.TopicEvents, sh, fmt.Errorf("outbox: encode event %d: %w", evs[i].ID, err)
		}
		o := &outgoing{ev: &evs[i], msg: m}
		for !o.parked && messageBytes(m) > r.opts.MaxEventBytes {
			r.shrink(o, &sh, "over kafka.max_event_bytes")
			m = o.msg
		}
		all[i] = o
	}
	if err := r.publishTopic(ctx, r.opts.TopicEvents, all, &sh); err != nil {
		return r.opts.TopicEvents, sh, err
	}
	var dead []*outgoing
	for _, o := range all {
		if !o.parked && o.ev.To == queue.StateDeadLettered {
			dead = append(dead, o)
		}
	}
	if err := r.publishTopic(ctx, r.opts.TopicDeadLetter, dead, &sh); err != nil {
		return r.opts.TopicDeadLetter, sh, err
	}
	return "", sh, nil
}

// outgoing is one event on its way to Kafka.
type outgoing struct {
	ev      *store.OutboxEvent
	msg     store.EventMessage
	trimmed bool // its trace context is left out
	parked  bool // too large even so: never published
}

// shrunk counts what one publish trimmed and parked; it is counted once the batch is published.
type shrunk struct{ trimmed, parked int }

// Actions on an oversized event (Stats.Oversized, jq_outbox_events_oversized_total{action}).
const (
	Trimmed = "trimmed"
	Parked  = "parked"
)

// truncatedHeader marks a message whose event was trimmed; its value names what was left out.
const truncatedHeader = "jq-truncated"

// shrink makes o smaller after it was found or refused as too large: it drops the trace-context
// headers (the only part of an event that can be large; the event itself is a few hundred bytes)
// and marks the message truncated, or, when there is nothing left to drop, parks it. A parked event
// stays in Postgres (job logs show it) and is marked published with its batch: it would never fit.
func (r *Relay) shrink(o *outgoing, sh *shrunk, why string) {
	fields := []zap.Field{zap.String("job_id", o.ev.JobID), zap.Int64("seq", o.ev.Seq), zap.Int64("event_id", o.ev.ID),
		zap.Int("bytes", messageBytes(o.msg)), zap.Int("max_event_bytes", r.opts.MaxEventBytes), zap.String("cause", why)}
	if !o.trimmed && len(o.msg.Headers) > 0 {
		o.msg.Headers = []store.EventHeader{{Key: truncatedHeader, Value: []byte("trace_context")}}
		o.trimmed = true
		sh.trimmed++
		r.log.Warn("outbox event too large for kafka; publishing it without its trace context", fields...)
		return
	}
	o.parked = true
	sh.parked++
	if o.trimmed {
		sh.trimmed-- // counted by its end: parked
	}
	r.log.Error("outbox event too large for kafka; parked, it stays in postgres and is not published", fields...)
}

// publishTopic publishes the events that are not parked. A message refused as too large on its own
// is shrunk and the batch published again (duplicates, never gaps). When several are refused at
// once they may be innocent: a broker refuses a whole batch to a partition when the batch is over
// its limit. Then the events are published one at a time, and only one refused on its own is
// shrunk; nothing is trimmed or parked for its neighbours' size.
func (r *Relay) publishTopic(ctx context.Context, topic string, out []*outgoing, sh *shrunk) error {
	for {
		var live []*outgoing
		for _, o := range out {
			if !o.parked {
				live = append(live, o)
			}
		}
		if len(live) == 0 {
			return nil
		}
		err := r.opts.Sink.EventsPublish(ctx, topic, messages(live))
		var tl *store.EventsTooLargeError
		if !errors.As(err, &tl) || len(tl.Indexes) == 0 {
			return err
		}
		if len(tl.Indexes) == 1 {
			r.shrink(live[tl.Indexes[0]], sh, "refused by kafka")
			continue
		}
		r.log.Warn("kafka refused a batch as too large; publishing its events one at a time",
			zap.String("topic", topic), zap.Int("refused", len(tl.Indexes)), zap.Int("events", len(live)))
		return r.publishOneByOne(ctx, topic, live, sh)
	}
}

func (r *Relay) publishOneByOne(ctx context.Context, topic string, live []*outgoing, sh *shrunk) error {
	for _, o := range live {
		for !o.parked {
			err := r.opts.Sink.EventsPublish(ctx, topic, []store.EventMessage{o.msg})
			if err == nil {
				break
			}
			var tl *store.EventsTooLargeError
			if !errors.As(err, &tl) {
				return err
			}
			r.shrink(o, sh, "refused by kafka on its own")
		}
	}
	return nil
}

func messages(out []*outgoing) []store.EventMessage {
	msgs := make([]store.EventMessage, len(out))
	for i, o := range out {
		msgs[i] = o.msg
	}
	return msgs
}

// storeWriteTimeout bounds the relay's own writes after a publish.
const storeWriteTimeout = 10 * time.Second

func (r *Relay) mark(ctx context.Context, c store.OutboxClaim) error {
	ctx, cancel := context.WithTimeout(ctx, storeWriteTimeout)
	defer cancel()
	return r.opts.Store.EventsMarkPublished(ctx, c)
}

// release lets the next claim (of any replica) retry the batch at once; if it fails, the lease
// simply runs out.
func (r *Relay) release(ctx context.Context, c store.OutboxClaim) {
	// Its own short deadline: a release after the stop grace ran out still frees the events now
	// rather than after the lease.
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), min(storeWriteTimeout, 2*time.Second))
	defer cancel()
	if err := r.opts.Store.EventsRelease(ctx, c); err != nil {
		r.log.Debug("outbox release failed; the lease will expire", zap.Error(err))
	}
}

func (r *Relay) countOversized(sh shrunk) {
	if sh == (shrunk{}) {
		return
	}
	r.mu.Lock()
	r.oversized[Trimmed] += int64(sh.trimmed)
	r.oversized[Parked] += int64(sh.parked)
	r.mu.Unlock()
}

func (r *Relay) countError(topic string) {
	r.mu.Lock()
	r.errs[topic]++
	r.mu.Unlock()
}

// sleepBackoff waits the next delay of an exponential backoff with 0–20 % jitter and returns it.
func (r *Relay) sleepBackoff(ctx context.Context, prev time.Duration) time.Duration {
	next := min(max(prev*2, r.opts.BackoffMin), r.opts.BackoffMax)
	ctxtime.Sleep(ctx, next+time.Duration(rand.Int64N(int64(next)/5+1)))
	return next
}

func (r *Relay) backlogLoop(ctx context.Context) {
	t := time.NewTicker(r.opts.BacklogInterval)
	defer t.Stop()
	for {
		r.measureBacklog(ctx)
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

func (r *Relay) measureBacklog(ctx context.Context) {
	ctx, cancel := context.WithTimeout(ctx, max(r.opts.BacklogInterval, time.Second))
	defer cancel()
	b, err := r.opts.Store.OutboxBacklog(ctx)
	if err != nil {
		// The claim loop reports a database outage; the gauges keep their last value.
		r.log.Debug("outbox backlog measurement failed", zap.Error(err))
		return
	}
	r.mu.Lock()
	r.backlog, r.known = b, true
	r.mu.Unlock()
}
