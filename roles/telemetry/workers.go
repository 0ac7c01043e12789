package telemetry

import (
	"sync"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/jq-dev/jq/queue"
	"github.com/jq-dev/jq/queue/executor"
)

// WorkerState is what a worker process reports at each scrape.
type WorkerState struct {
	Active  bool // registered with the server and its assignment stream open
	Running int  // handlers running now
}

// WorkerMetrics are a worker process's metrics (served on worker.metrics_port): its own state,
// read from the executor at each scrape, and what its handlers did (JobDone, the executor's
// OnJobDone hook).
type WorkerMetrics struct {
	workerID string
	mu       sync.Mutex
	state    func() WorkerState

	active, concurrency *prometheus.Desc
	breaker             *prometheus.GaugeVec
	jobs                *prometheus.CounterVec
	duration            *prometheus.HistogramVec
}

// Values of jq_circuit_breaker_state (seed 004).
const (
	breakerClosed   = 0
	breakerHalfOpen = 1
	breakerOpen     = 2
)

// NewWorkerMetrics registers the worker's metrics on reg. workerID labels
// jq_worker_job_concurrency: one value per worker process, so the label stays bounded by the fleet.
// The per-queue series of queues start at zero.
func NewWorkerMetrics(reg prometheus.Registerer, workerID string, queues []string) *WorkerMetrics {
	m := &WorkerMetrics{
		workerID: workerID,
		active: prometheus.NewDesc("jq_worker_active",
			"1 while this worker is registered with a server and its assignment stream is open, else 0.", nil, nil),
		concurrency: prometheus.NewDesc("jq_worker_job_concurrency",
			"Jobs this worker is running now.", []string{"worker_id"}, nil),
		breaker: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "jq_circuit_breaker_state",
			Help: "State of this worker's circuit breaker of each queue: 0 closed, 1 half-open (one probe job), 2 open (no jobs of the queue until the cooldown ends).",
		}, []string{"queue"}),
		jobs: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "jq_worker_jobs_total",
			Help: "Handlers of this worker that returned, by queue and outcome (succeeded, failed: reported to the server; abandoned: not reported, lease lost or shutdown).",
		}, []string{"queue", "outcome"}),
		duration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "jq_worker_job_duration_seconds",
			Help:    "Run time of this worker's handlers, by queue, measured in the worker.",
			Buckets: jobBuckets,
		}, []string{"queue"}),
	}
	reg.MustRegister(m, m.breaker, m.jobs, m.duration)
	for _, q := range queues {
		m.breaker.WithLabelValues(q).Set(breakerClosed)
		for _, o := range []executor.Outcome{executor.OutcomeSucceeded, executor.OutcomeFailed, executor.OutcomeAbandoned} {
			m.jobs.WithLabelValues(q, string(o))
		}
		m.duration.WithLabelValues(q)
	}
	return m
}

// Watch sets where the worker's state is read from (nil: inactive, nothing running).
func (m *WorkerMetrics) Watch(state func() WorkerState) {
	m.mu.Lock()
	m.state = state
	m.mu.Unlock()
}

// WatchExecutor reads the state from a running executor.
func (m *WorkerMetrics) WatchExecutor(e *executor.Executor) {
	m.Watch(func() WorkerState {
		st := e.Status()
		return WorkerState{Active: st.Registered && st.Connected, Running: e.Stats().Running}
	})
}

// JobDone records a handler that returned (executor.Options.OnJobDone).
func (m *WorkerMetrics) JobDone(d executor.JobDone) {
	q := ""
	if d.Job != nil {
		q = d.Job.Queue
	}
	m.jobs.WithLabelValues(q, string(d.Outcome)).Inc()
	m.duration.WithLabelValues(q).Observe(d.Runtime.Seconds())
}

// BreakerChanged follows a circuit breaker's state change (executor CircuitBreakerOptions.OnChange).
func (m *WorkerMetrics) BreakerChanged(c executor.BreakerChange) {
	v := breakerClosed
	switch c.To {
	case queue.BreakerHalfOpen:
		v = breakerHalfOpen
	case queue.BreakerOpen:
		v = breakerOpen
	}
	m.breaker.WithLabelValues(c.Queue).Set(float64(v))
}

// Describe implements prometheus.Collector.
func (m *WorkerMetrics) Describe(ch chan<- *prometheus.Desc) {
	ch <- m.active
	ch <- m.concurrency
}

// Collect implements prometheus.Collector.
func (m *WorkerMetrics) Collect(ch chan<- prometheus.Metric) {
	m.mu.Lock()
	state := m.state
	m.mu.Unlock()
	var st WorkerState
	if state != nil {
		st = state()
	}
	active := 0.0
	if st.Active {
		active = 1
	}
	ch <- prometheus.MustNewConstMetric(m.active, prometheus.GaugeValue, active)
	ch <- prometheus.MustNewConstMetric(m.concurrency, prometheus.GaugeValue, float64(st.Running), m.workerID)
}
