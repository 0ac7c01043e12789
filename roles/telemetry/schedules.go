package telemetry

import (
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// ScheduleMetrics implements engine.ScheduleObserver with Prometheus: the fires of periodic jobs
// (docs/schedules.md). Each fire is counted by the one replica whose submit created its job, so the
// sum over the replicas is the number of fires.
type ScheduleMetrics struct {
	fires, failures, missed *prometheus.CounterVec
	lag                     prometheus.Histogram
}

// scheduleLagBuckets span an on-time fire (milliseconds) to a late or caught-up one (an hour).
var scheduleLagBuckets = []float64{.005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30, 60, 300, 3600}

// NewScheduleMetrics registers the schedule metrics on reg.
func NewScheduleMetrics(reg prometheus.Registerer) *ScheduleMetrics {
	m := &ScheduleMetrics{
		fires: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "jq_schedule_fires_total",
			Help: "Fire times of each schedule whose job this replica created (one per fire time across all replicas).",
		}, []string{"schedule"}),
		failures: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "jq_schedule_fire_failures_total",
			Help: "Fire times of each schedule whose job was refused (its queue missing, say), seen by this replica.",
		}, []string{"schedule"}),
		missed: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "jq_schedule_missed_total",
			Help: "Fire times of each schedule dropped by its missed-fire policy (no server ran for longer than the misfire grace).",
		}, []string{"schedule"}),
		lag: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    "jq_schedule_lag_seconds",
			Help:    "Time from a fire time to the commit of its job, by the database clock, for the fires this replica created.",
			Buckets: scheduleLagBuckets,
		}),
	}
	reg.MustRegister(m.fires, m.failures, m.missed, m.lag)
	return m
}

// ScheduleFired implements engine.ScheduleObserver.
func (m *ScheduleMetrics) ScheduleFired(schedule string, lag time.Duration) {
	m.fires.WithLabelValues(schedule).Inc()
	m.lag.Observe(max(lag, 0).Seconds())
}

// ScheduleFireFailed implements engine.ScheduleObserver.
func (m *ScheduleMetrics) ScheduleFireFailed(schedule string) {
	m.failures.WithLabelValues(schedule).Inc()
}

// ScheduleMissed implements engine.ScheduleObserver.
func (m *ScheduleMetrics) ScheduleMissed(schedule string, n int) {
	m.missed.WithLabelValues(schedule).Add(float64(n))
}
