package telemetry

import (
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// ProducerMetrics are the producer's counters (seed 004's jobs_produced_total, under jq_).
type ProducerMetrics struct {
	produced    *prometheus.CounterVec
	scanned     prometheus.Counter
	rateLimited prometheus.Counter
}

// NewProducerMetrics registers the producer's metrics on reg; the queue's series starts at zero.
func NewProducerMetrics(reg prometheus.Registerer, queue string) *ProducerMetrics {
	m := &ProducerMetrics{
		produced: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "jq_jobs_produced_total",
			Help: "Jobs the producer created, by queue (a file version already submitted is not counted again).",
		}, []string{"queue"}),
		scanned: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "jq_producer_files_scanned_total",
			Help: "Files the producer's scans found matching its globs (every scan counts them again).",
		}),
		rateLimited: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "jq_producer_rate_limited_seconds_total",
			Help: "Time the producer waited for the shared rate limit (producer.rate_limit_per_sec).",
		}),
	}
	reg.MustRegister(m.produced, m.scanned, m.rateLimited)
	m.produced.WithLabelValues(queue)
	return m
}

// Produced counts n new jobs of queue.
func (m *ProducerMetrics) Produced(queue string, n int) {
	m.produced.WithLabelValues(queue).Add(float64(n))
}

// Scanned counts n files found by a scan.
func (m *ProducerMetrics) Scanned(n int) { m.scanned.Add(float64(n)) }

// RateLimited counts a wait for the rate limit.
func (m *ProducerMetrics) RateLimited(d time.Duration) { m.rateLimited.Add(d.Seconds()) }
