package maintenance

import (
	"context"
	"errors"
	"sync/atomic"
	"time"

	"go.uber.org/zap"

	"github.com/jq-dev/jq/store"
)

// Options configure a Maintenance. Zero values take the documented defaults.
type Options struct {
	Store store.RetentionStore
	// Progress, when set, has each pass also delete the progress of attempts that are over
	// (job_progress); nil: none kept, none pruned.
	Progress store.ProgressStore
	Log      *zap.Logger
	// Retention is how long published events are kept (server.event_retention_h); required.
	Retention time.Duration
	// KafkaOff: events are never published (kafka.enabled false), so unpublished events expire
	// after the retention too instead of waiting forever for a relay.
	KafkaOff bool

	// Interval is the pause between passes, and before the first one (1 min): a server starting
	// up has its migrations to apply first.
	Interval time.Duration
	// BatchSize is the most events one statement deletes (5,000).
	BatchSize int
	// MaxBatches bounds the statements of one pass (100).
	MaxBatches int
	// StatementTimeout bounds one statement (30 s).
	StatementTimeout time.Duration
}

func (o *Options) defaults() error {
	if o.Store == nil || o.Log == nil {
		return errors.New("maintenance: store and logger are required")
	}
	if o.Retention < time.Millisecond {
		return errors.New("maintenance: the event retention must be positive")
	}
	if o.Interval <= 0 {
		o.Interval = time.Minute
	}
	if o.BatchSize <= 0 {
		o.BatchSize = 5000
	}
	o.BatchSize = min(o.BatchSize, store.MaxEventsPruneBatch)
	if o.MaxBatches <= 0 {
		o.MaxBatches = 100
	}
	if o.StatementTimeout <= 0 {
		o.StatementTimeout = 30 * time.Second
	}
	return nil
}

// Stats is what the passes have done since the component started.
type Stats struct {
	Passes        int64 // passes finished without error
	Failures      int64 // passes ended by an error
	EventsDeleted int64
	// ResultsDropped counts kept job results dropped after their queue's result_retention.
	ResultsDropped int64
}

// Maintenance runs the housekeeping passes; see the package documentation.
type Maintenance struct {
	opts Options
	log  *zap.Logger

	passes, failures, deleted, dropped atomic.Int64
	failing                            bool // only Run's goroutine touches it
	running                            atomic.Bool
}

// New validates opts. It contacts nothing: the server has pinged Postgres already.
func New(opts Options) (*Maintenance, error) {
	if err := opts.defaults(); err != nil {
		return nil, err
	}
	return &Maintenance{opts: opts, log: opts.Log}, nil
}

// Stats returns the counters, for metrics.
func (m *Maintenance) Stats() Stats {
	return Stats{Passes: m.passes.Load(), Failures: m.failures.Load(), EventsDeleted: m.deleted.Load(),
		ResultsDropped: m.dropped.Load()}
}

// Run runs a pass every Interval until ctx ends. A statement in flight when ctx ends is cancelled:
// its delete rolls back and the next pass does it again.
func (m *Maintenance) Run(ctx context.Context) error {
	if !m.running.CompareAndSwap(false, true) {
		return errors.New("maintenance: already running")
	}
	defer m.running.Store(false)
	m.log.Info("maintenance started",
		zap.Duration("event_retention", m.opts.Retention), zap.Duration("interval", m.opts.Interval),
		zap.Int("batch_size", m.opts.BatchSize))
	t := time.NewTicker(m.opts.Interval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			m.log.Info("maintenance stopped")
			return nil
		case <-t.C:
			m.Pass(ctx)
		}
	}
}

// Start runs Run in a goroutine; stop cancels it and waits for it to return. For wiring next to
// another component's Run: `defer m.Start(ctx)()`.
func (m *Maintenance) Start(ctx context.Context) (stop func()) {
	ctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		_ = m.Run(ctx)
	}()
	return func() {
		cancel()
		<-done
	}
}

// Pass deletes expired published events in batches, then drops expired job results in batches,
// and returns how many events it deleted. Run calls it; it is exported for tests and tools.
func (m *Maintenance) Pass(ctx context.Context) int64 {
	start := time.Now()
	var total int64
	for range m.opts.MaxBatches {
		n, err := m.prune(ctx)
		total += n
		if err != nil {
			if ctx.Err() == nil {
				m.fail("events", err, total)
			}
			m.deleted.Add(total)
			return total
		}
		if n < int64(m.opts.BatchSize) {
			break
		}
	}
	m.deleted.Add(total)
	if total > 0 {
		m.log.Info("expired job events deleted", zap.Int64("events", total),
			zap.Duration("retention", m.opts.Retention), zap.Duration("duration", time.Since(start)))
	}
	if err := m.dropResults(ctx); err != nil {
		if ctx.Err() == nil {
			m.fail("results", err, total)
		}
		return total
	}
	if err := m.pruneProgress(ctx); err != nil {
		if ctx.Err() == nil {
			m.fail("progress", err, total)
		}
		return total
	}
	m.passes.Add(1)
	if m.failing {
		m.failing = false
		m.log.Info("event retention recovered")
	}
	return total
}

// dropResults drops the results whose queue's result_retention passed, in batches of BatchSize,
// and logs how many per queue.
func (m *Maintenance) dropResults(ctx context.Context) error {
	start := time.Now()
	byQueue := map[string]int{}
	defer func() {
		var total int64
		for q, n := range byQueue {
			total += int64(n)
			m.log.Info("expired job results dropped", zap.String("queue", q), zap.Int("results", n),
				zap.Duration("duration", time.Since(start)))
		}
		m.dropped.Add(total)
	}()
	for range m.opts.MaxBatches {
		dctx, cancel := context.WithTimeout(ctx, m.opts.StatementTimeout)
		got, err := m.opts.Store.JobResultsDrop(dctx, min(m.opts.BatchSize, store.MaxResultsDropBatch))
		cancel()
		if err != nil {
			return err
		}
		n := 0
		for q, c := range got {
			byQueue[q] += c
			n += c
		}
		if n < min(m.opts.BatchSize, store.MaxResultsDropBatch) {
			return nil
		}
	}
	return nil
}

// pruneProgress deletes the progress records of attempts that are over, in batches of BatchSize.
// The table holds one small row per job that reported progress lately, so this is short.
func (m *Maintenance) pruneProgress(ctx context.Context) error {
	if m.opts.Progress == nil {
		return nil
	}
	limit := min(m.opts.BatchSize, store.MaxEventsPruneBatch)
	for range m.opts.MaxBatches {
		pctx, cancel := context.WithTimeout(ctx, m.opts.StatementTimeout)
		n, err := m.opts.Progress.JobProgressPrune(pctx, limit)
		cancel()
		if err != nil || n < int64(limit) {
			return err
		}
	}
	return nil
}

func (m *Maintenance) prune(ctx context.Context) (int64, error) {
	ctx, cancel := context.WithTimeout(ctx, m.opts.StatementTimeout)
	defer cancel()
	return m.opts.Store.EventsPrune(ctx, store.EventsPruneParams{
		OlderThan: m.opts.Retention, Limit: m.opts.BatchSize, Unpublished: m.opts.KafkaOff,
	})
}

// fail logs the first failure of an outage at warn and the following ones at debug. step names
// what failed: "events" or "results".
func (m *Maintenance) fail(step string, err error, deleted int64) {
	m.failures.Add(1)
	if m.failing {
		m.log.Debug("event retention failed; retrying next pass", zap.String("step", step), zap.Error(err),
			zap.Int64("events", deleted))
		return
	}
	m.failing = true
	m.log.Warn("event retention failed; retrying next pass", zap.String("step", step), zap.Error(err),
		zap.Int64("events", deleted))
}
