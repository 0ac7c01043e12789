package telemetry

import (
	"context"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/zap"

	"github.com/jq-dev/jq/queue"
	"github.com/jq-dev/jq/store"
)

// DefaultDepthInterval is how often a replica measures the queue depth.
const DefaultDepthInterval = 5 * time.Second

// DepthOptions configure the queue-depth gauges.
type DepthOptions struct {
	// Measure reads one snapshot (postgres.Store.DepthSnapshot: one statement).
	Measure func(context.Context) (store.DepthSnapshot, error)
	Log     *zap.Logger
	// Interval between measurements (DefaultDepthInterval).
	Interval time.Duration
	// Queues, when set, is told the queues of every snapshot (JobMetrics.KnownQueues).
	Queues func([]string)
}

// DepthGauges exports jq_job_queue_depth{queue,status}, jq_queue_length{queue} and
// jq_worker_active_count from the latest snapshot, which a background loop takes every Interval —
// never at scrape time, so scrapes cost the database nothing and N replicas cost N cheap queries
// per interval. Every replica measures the same database: aggregate across replicas with max, not
// sum. Until the first measurement succeeds the gauges are absent, not a misleading zero.
type DepthGauges struct {
	opts                     DepthOptions
	depth, length, activeWkr *prometheus.Desc

	mu   sync.Mutex
	last *store.DepthSnapshot
}

// NewDepthGauges registers the gauges on reg; Start begins the measurements.
func NewDepthGauges(reg prometheus.Registerer, opts DepthOptions) *DepthGauges {
	if opts.Interval <= 0 {
		opts.Interval = DefaultDepthInterval
	}
	if opts.Log == nil {
		opts.Log = zap.NewNop()
	}
	g := &DepthGauges{
		opts: opts,
		depth: prometheus.NewDesc("jq_job_queue_depth",
			"Jobs per queue in each state (status: PENDING, ASSIGNED, RUNNING, FAILED awaiting retry, DEAD_LETTERED), measured every few seconds; the same on every replica (aggregate with max).",
			[]string{"queue", "status"}, nil),
		length: prometheus.NewDesc("jq_queue_length",
			"PENDING jobs per queue (due or delayed), measured every few seconds; the same on every replica (aggregate with max).",
			[]string{"queue"}, nil),
		activeWkr: prometheus.NewDesc("jq_worker_active_count",
			"Workers ONLINE or DRAINING in the database, measured every few seconds; the same on every replica (aggregate with max).",
			nil, nil),
	}
	reg.MustRegister(g)
	return g
}

// Start measures at once and then every Interval until ctx ends; the returned function stops the
// loop and waits for it.
func (g *DepthGauges) Start(ctx context.Context) (stop func()) {
	ctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		g.loop(ctx)
	}()
	return func() {
		cancel()
		<-done
	}
}

func (g *DepthGauges) loop(ctx context.Context) {
	t := time.NewTicker(g.opts.Interval)
	defer t.Stop()
	failing := false
	for {
		err := g.Refresh(ctx)
		switch {
		case ctx.Err() != nil:
			return
		case err != nil && !failing:
			failing = true
			g.opts.Log.Warn("queue depth measurement failed; the depth gauges keep their last values", zap.Error(err))
		case err == nil && failing:
			failing = false
			g.opts.Log.Info("queue depth measured again")
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// Refresh takes one measurement now.
func (g *DepthGauges) Refresh(ctx context.Context) error {
	mctx, cancel := context.WithTimeout(ctx, max(g.opts.Interval, time.Second))
	defer cancel()
	snap, err := g.opts.Measure(mctx)
	if err != nil {
		return err
	}
	g.mu.Lock()
	g.last = &snap
	g.mu.Unlock()
	if g.opts.Queues != nil {
		g.opts.Queues(snap.Queues)
	}
	return nil
}

// Describe implements prometheus.Collector.
func (g *DepthGauges) Describe(ch chan<- *prometheus.Desc) {
	ch <- g.depth
	ch <- g.length
	ch <- g.activeWkr
}

// Collect implements prometheus.Collector: every queue of the snapshot with every counted state,
// zeros included, so series never vanish while a queue exists.
func (g *DepthGauges) Collect(ch chan<- prometheus.Metric) {
	g.mu.Lock()
	snap := g.last
	g.mu.Unlock()
	if snap == nil {
		return
	}
	queues := snap.Queues
	seen := make(map[string]bool, len(queues))
	for _, q := range queues {
		seen[q] = true
	}
	for q := range snap.Jobs { // jobs of a queue deleted while the snapshot was taken
		if !seen[q] {
			queues = append(queues, q)
		}
	}
	for _, q := range queues {
		counts := snap.Jobs[q]
		for _, s := range store.DepthStates {
			ch <- prometheus.MustNewConstMetric(g.depth, prometheus.GaugeValue, float64(counts[s]), q, string(s))
		}
		ch <- prometheus.MustNewConstMetric(g.length, prometheus.GaugeValue, float64(counts[queue.StatePending]), q)
	}
	ch <- prometheus.MustNewConstMetric(g.activeWkr, prometheus.GaugeValue, float64(snap.ActiveWorkers))
}
