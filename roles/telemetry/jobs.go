package telemetry

import (
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/jq-dev/jq/queue"
	"github.com/jq-dev/jq/queue/engine"
)

// Histogram buckets, in seconds.
var (
	// jobBuckets cover a job's wait and processing: milliseconds to ten minutes.
	jobBuckets = []float64{.001, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30, 60, 120, 300, 600}
	// cycleBuckets cover a scheduler cycle: sub-millisecond to seconds.
	cycleBuckets = []float64{.0005, .001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5}
)

// JobMetrics is the Prometheus side of the engine's Observer: the job lifecycle counters and
// latency histograms of FR-040 and seed 004. Every value counts what this replica committed; sum
// them over the replicas for the cluster's totals.
type JobMetrics struct {
	transitions *prometheus.CounterVec   // jq_job_total{queue,status}
	assigned    *prometheus.CounterVec   // jq_scheduler_jobs_assigned_total{queue}
	processing  *prometheus.HistogramVec // jq_job_processing_duration_seconds{queue}
	wait        *prometheus.HistogramVec // jq_job_wait_duration_seconds{queue}
	cycle       prometheus.Histogram     // jq_scheduler_cycle_duration_seconds
	throttled   *prometheus.CounterVec   // jq_constraint_throttled_total{constraint}

	produced, consumed, completed, failed, deadLetter prometheus.Counter

	mu       sync.Mutex
	known    map[string]bool // queues whose series exist
	snapshot map[string]bool // queues of the latest depth snapshot
}

var _ engine.Observer = (*JobMetrics)(nil)

// jobStates are the status label values of jq_job_total: every state a job can enter.
var jobStates = []queue.State{
	queue.StatePending, queue.StateAssigned, queue.StateRunning, queue.StateDone, queue.StateFailed,
	queue.StateDeadLettered,
}

// NewJobMetrics registers the job metrics on reg.
func NewJobMetrics(reg prometheus.Registerer) *JobMetrics {
	m := &JobMetrics{
		transitions: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "jq_job_total",
			Help: "Jobs entering each state (status), per queue, committed by this replica. PENDING counts submits and requeues (retries).",
		}, []string{"queue", "status"}),
		assigned: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "jq_scheduler_jobs_assigned_total",
			Help: "Jobs assigned to workers (PENDING to ASSIGNED) by this replica, per queue.",
		}, []string{"queue"}),
		processing: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "jq_job_processing_duration_seconds",
			Help:    "Time from an attempt's start (RUNNING) to the worker's report (DONE or FAILED), by the database clock, per queue.",
			Buckets: jobBuckets,
		}, []string{"queue"}),
		wait: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "jq_job_wait_duration_seconds",
			Help:    "Time from a job becoming due (max of created_at and not_before) to its attempt's start, by the database clock, per queue.",
			Buckets: jobBuckets,
		}, []string{"queue"}),
		cycle: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    "jq_scheduler_cycle_duration_seconds",
			Help:    "Duration of this replica's dispatch claims (the Postgres claim statement and the Redis in-flight record of one batch for one worker).",
			Buckets: cycleBuckets,
		}),
		throttled: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "jq_constraint_throttled_total",
			Help: "Due jobs a claim of this replica passed over because the constraint held them back (a job waiting through several claims counts in each).",
		}, []string{"constraint"}),
		produced:   counter("jq_jobs_produced_total", "Jobs submitted (new jobs; an idempotent repeat is not counted) through this replica."),
		consumed:   counter("jq_jobs_consumed_total", "Attempts started by workers (ASSIGNED to RUNNING) through this replica."),
		completed:  counter("jq_jobs_completed_total", "Attempts reported successful (DONE) through this replica."),
		failed:     counter("jq_jobs_failed_total", "Attempts failed (FAILED): failure reports through this replica and this replica's reaper timeouts."),
		deadLetter: counter("jq_jobs_dead_letter_total", "Jobs dead-lettered by this replica, whatever the path: retries exhausted, permanent failure, cancellation, TTL expiry."),
		known:      map[string]bool{},
	}
	reg.MustRegister(m.transitions, m.assigned, m.processing, m.wait, m.cycle, m.throttled,
		m.produced, m.consumed, m.completed, m.failed, m.deadLetter)
	return m
}

func counter(name, help string) prometheus.Counter {
	return prometheus.NewCounter(prometheus.CounterOpts{Name: name, Help: help})
}

// KnownQueues creates the per-queue series of queues at zero, so that a queue's rates start from
// a sample rather than from nothing (the depth refresher reports the queues it finds), and removes
// the series of a queue that an earlier snapshot had and this one has not: it was deleted, and its
// series would otherwise stay for the life of the process. A queue seen only in observations (created
// after the snapshot was read) is left alone.
func (m *JobMetrics) KnownQueues(queues []string) {
	now := make(map[string]bool, len(queues))
	for _, q := range queues {
		now[q] = true
		m.queue(q)
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	for q := range m.snapshot {
		if now[q] {
			continue
		}
		delete(m.known, q)
		for _, s := range jobStates {
			m.transitions.DeleteLabelValues(q, string(s))
		}
		m.assigned.DeleteLabelValues(q)
		m.processing.DeleteLabelValues(q)
		m.wait.DeleteLabelValues(q)
	}
	m.snapshot = now
}

// queue returns q after creating its series once.
func (m *JobMetrics) queue(q string) string {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.known[q] {
		return q
	}
	m.known[q] = true
	for _, s := range jobStates {
		m.transitions.WithLabelValues(q, string(s))
	}
	m.assigned.WithLabelValues(q)
	m.processing.WithLabelValues(q)
	m.wait.WithLabelValues(q)
	return q
}

func (m *JobMetrics) add(q string, s queue.State, n int) {
	m.transitions.WithLabelValues(m.queue(q), string(s)).Add(float64(n))
}

// Submitted implements engine.Observer.
func (m *JobMetrics) Submitted(q string, n int) {
	m.add(q, queue.StatePending, n)
	m.produced.Add(float64(n))
}

// Assigned implements engine.Observer.
func (m *JobMetrics) Assigned(q string, n int) {
	m.add(q, queue.StateAssigned, n)
	m.assigned.WithLabelValues(q).Add(float64(n))
}

// Started implements engine.Observer.
func (m *JobMetrics) Started(q string, wait time.Duration) {
	m.add(q, queue.StateRunning, 1)
	m.consumed.Inc()
	m.wait.WithLabelValues(q).Observe(wait.Seconds())
}

// Finished implements engine.Observer.
func (m *JobMetrics) Finished(q string, state queue.State, processing time.Duration) {
	m.add(q, state, 1)
	switch state {
	case queue.StateDone:
		m.completed.Inc()
	case queue.StateFailed:
		m.failed.Inc()
	}
	m.processing.WithLabelValues(q).Observe(processing.Seconds())
}

// Failed implements engine.Observer.
func (m *JobMetrics) Failed(q string, n int) {
	m.add(q, queue.StateFailed, n)
	m.failed.Add(float64(n))
}

// Requeued implements engine.Observer.
func (m *JobMetrics) Requeued(q string, n int) { m.add(q, queue.StatePending, n) }

// DeadLettered implements engine.Observer.
func (m *JobMetrics) DeadLettered(q string, n int) {
	m.add(q, queue.StateDeadLettered, n)
	m.deadLetter.Add(float64(n))
}

// SchedulerCycle implements engine.Observer.
func (m *JobMetrics) SchedulerCycle(d time.Duration) { m.cycle.Observe(d.Seconds()) }

// ConstraintThrottled implements engine.Observer. The series of a deleted constraint stays until
// the process restarts: constraints are few (queue.MaxConstraints) and their names are bounded.
func (m *JobMetrics) ConstraintThrottled(constraint string, n int) {
	m.throttled.WithLabelValues(constraint).Add(float64(n))
}
