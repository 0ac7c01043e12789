package telemetry

import (
	"context"
	"errors"
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
	// Constraints, when set, reads every constraint's usage with the snapshot (ConstraintUsages).
	Constraints func(context.Context) ([]ConstraintSample, error)
}

// ConstraintSample is one constraint's usage as the gauges export it.
type ConstraintSample struct {
	Name        string
	Concurrency int // 0: no concurrency limit
	Usage       *queue.ConstraintUsage
}

// TopConstraintKeys is how many of a constraint's busiest keys get a series of their own: the
// label values are the jobs' keys, so they are bounded here.
const TopConstraintKeys = 5

// ConstraintUsages reads the usage of every constraint of st, with its TopConstraintKeys busiest
// keys: one read of the set, then one per constraint (queue.MaxConstraints at most).
func ConstraintUsages(st store.ConstraintStore) func(context.Context) ([]ConstraintSample, error) {
	return func(ctx context.Context) ([]ConstraintSample, error) {
		set, err := st.ConstraintSet(ctx)
		if err != nil {
			return nil, err
		}
		out := make([]ConstraintSample, 0, len(set.Constraints))
		for _, c := range set.Constraints {
			u, err := st.ConstraintUsage(ctx, store.ConstraintUsageParams{Name: c.Name, Top: TopConstraintKeys})
			if errors.Is(err, queue.ErrConstraintNotFound) {
				continue // deleted since the set was read
			}
			if err != nil {
				return nil, err
			}
			out = append(out, ConstraintSample{Name: c.Name, Concurrency: c.Concurrency, Usage: u})
		}
		return out, nil
	}
}

// DepthGauges exports jq_job_queue_depth{queue,status}, jq_queue_length{queue} and
// jq_worker_active_count from the latest snapshot, which a background loop takes every Interval —
// never at scrape time, so scrapes cost the database nothing and N replicas cost N cheap queries
// per interval. Every replica measures the same database: aggregate across replicas with max, not
// sum. Until the first measurement succeeds the gauges are absent, not a misleading zero.
type DepthGauges struct {
	opts                     DepthOptions
	depth, length, activeWkr *prometheus.Desc
	// The constraints' usage.
	consRunning, consKeys, consKeyRunning, consLimit *prometheus.Desc

	mu          sync.Mutex
	last        *store.DepthSnapshot
	constraints []ConstraintSample
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
		consRunning: prometheus.NewDesc("jq_constraint_running",
			"Jobs ASSIGNED or RUNNING under each constraint, all keys together, measured every few seconds; the same on every replica (aggregate with max).",
			[]string{"constraint"}, nil),
		consKeys: prometheus.NewDesc("jq_constraint_active_keys",
			"Keys of each constraint with at least one job ASSIGNED or RUNNING, measured every few seconds.",
			[]string{"constraint"}, nil),
		consKeyRunning: prometheus.NewDesc("jq_constraint_key_running",
			"Jobs ASSIGNED or RUNNING under the busiest keys of each constraint (at most 5 keys per constraint), measured every few seconds.",
			[]string{"constraint", "key"}, nil),
		consLimit: prometheus.NewDesc("jq_constraint_concurrency_limit",
			"Each constraint's concurrency limit per key (constraints with a concurrency limit only).",
			[]string{"constraint"}, nil),
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
	var cons []ConstraintSample
	if g.opts.Constraints != nil {
		if cons, err = g.opts.Constraints(mctx); err != nil {
			return err
		}
	}
	g.mu.Lock()
	g.last = &snap
	g.constraints = cons
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
	ch <- g.consRunning
	ch <- g.consKeys
	ch <- g.consKeyRunning
	ch <- g.consLimit
}

// Collect implements prometheus.Collector: every queue of the snapshot with every counted state,
// zeros included, so series never vanish while a queue exists.
func (g *DepthGauges) Collect(ch chan<- prometheus.Metric) {
	g.mu.Lock()
	snap, cons := g.last, g.constraints
	g.mu.Unlock()
	if snap == nil {
		return
	}
	for _, c := range cons {
		ch <- prometheus.MustNewConstMetric(g.consRunning, prometheus.GaugeValue, float64(c.Usage.Running), c.Name)
		ch <- prometheus.MustNewConstMetric(g.consKeys, prometheus.GaugeValue, float64(c.Usage.Keys), c.Name)
		for _, k := range c.Usage.Top {
			ch <- prometheus.MustNewConstMetric(g.consKeyRunning, prometheus.GaugeValue, float64(k.Running), c.Name, k.Key)
		}
		if c.Concurrency > 0 {
			ch <- prometheus.MustNewConstMetric(g.consLimit, prometheus.GaugeValue, float64(c.Concurrency), c.Name)
		}
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
