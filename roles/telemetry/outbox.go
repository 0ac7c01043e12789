package telemetry

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/jq-dev/jq/queue/outbox"
)

// outboxCollector exposes the outbox relay of a server replica (queue/outbox Stats).
type outboxCollector struct {
	stats                                  func() outbox.Stats
	topics                                 []string
	published, errors, backlog, oldestSecs *prometheus.Desc
	oversized                              *prometheus.Desc
}

// NewOutboxCollector returns a collector of the relay's counters and of the backlog it last
// measured, read from stats at each scrape. Every replica measures the same database, so the backlog
// gauges agree across replicas (aggregate them with max, not sum).
//
// jq_kafka_publish_errors_total has a series for each of topics from the start, at 0, so a
// dashboard's rate() works before the first error. With Kafka disabled (stats nil) only those zero
// series are exported: nothing is published, so nothing fails.
func NewOutboxCollector(stats func() outbox.Stats, topics ...string) prometheus.Collector {
	return &outboxCollector{
		stats:      stats,
		topics:     topics,
		published:  prometheus.NewDesc("jq_outbox_published_events_total", "Events this replica's relay published to Kafka and marked published.", nil, nil),
		errors:     prometheus.NewDesc("jq_kafka_publish_errors_total", "Failed publish attempts of this replica's outbox relay, by topic.", []string{"topic"}, nil),
		backlog:    prometheus.NewDesc("jq_outbox_backlog_events", "Job events not yet published to Kafka.", nil, nil),
		oldestSecs: prometheus.NewDesc("jq_outbox_oldest_unpublished_seconds", "Age of the oldest job event not yet published to Kafka (0 when none).", nil, nil),
		oversized: prometheus.NewDesc("jq_outbox_events_oversized_total",
			"Job events too large for Kafka (kafka.max_event_bytes, or refused by the broker), by action: trimmed (published without their trace context) or parked (never published).",
			[]string{"action"}, nil),
	}
}

func (c *outboxCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{c.published, c.errors, c.backlog, c.oldestSecs, c.oversized} {
		ch <- d
	}
}

func (c *outboxCollector) Collect(ch chan<- prometheus.Metric) {
	var s outbox.Stats
	if c.stats != nil {
		s = c.stats()
	}
	errs := make(map[string]int64, len(c.topics)+len(s.PublishErrors))
	for _, topic := range c.topics {
		errs[topic] = 0
	}
	for topic, n := range s.PublishErrors {
		errs[topic] += n
	}
	for topic, n := range errs {
		ch <- prometheus.MustNewConstMetric(c.errors, prometheus.CounterValue, float64(n), topic)
	}
	if c.stats == nil {
		return
	}
	ch <- prometheus.MustNewConstMetric(c.published, prometheus.CounterValue, float64(s.Published))
	for action, n := range s.Oversized {
		ch <- prometheus.MustNewConstMetric(c.oversized, prometheus.CounterValue, float64(n), action)
	}
	if !s.BacklogKnown {
		return
	}
	ch <- prometheus.MustNewConstMetric(c.backlog, prometheus.GaugeValue, float64(s.Backlog.Events))
	ch <- prometheus.MustNewConstMetric(c.oldestSecs, prometheus.GaugeValue, s.Backlog.OldestAge.Seconds())
}
