package telemetry

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/jq-dev/jq/queue/maintenance"
)

// maintenanceCollector exposes the housekeeping passes of a server replica (queue/maintenance Stats).
type maintenanceCollector struct {
	stats                             func() maintenance.Stats
	passes, failures, pruned, dropped *prometheus.Desc
}

// NewMaintenanceCollector returns a collector of the maintenance counters, read from stats at each
// scrape. A rising failure count with a flat pass count means expired events are piling up.
func NewMaintenanceCollector(stats func() maintenance.Stats) prometheus.Collector {
	return &maintenanceCollector{
		stats:    stats,
		passes:   prometheus.NewDesc("jq_maintenance_passes_total", "Maintenance passes this replica finished without error.", nil, nil),
		failures: prometheus.NewDesc("jq_maintenance_failures_total", "Maintenance passes this replica ended by an error.", nil, nil),
		pruned:   prometheus.NewDesc("jq_events_pruned_total", "Published job events this replica deleted after the retention period.", nil, nil),
		dropped:  prometheus.NewDesc("jq_results_dropped_total", "Kept job results this replica dropped after their queue's result_retention.", nil, nil),
	}
}

func (c *maintenanceCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{c.passes, c.failures, c.pruned, c.dropped} {
		ch <- d
	}
}

func (c *maintenanceCollector) Collect(ch chan<- prometheus.Metric) {
	s := c.stats()
	ch <- prometheus.MustNewConstMetric(c.passes, prometheus.CounterValue, float64(s.Passes))
	ch <- prometheus.MustNewConstMetric(c.failures, prometheus.CounterValue, float64(s.Failures))
	ch <- prometheus.MustNewConstMetric(c.pruned, prometheus.CounterValue, float64(s.EventsDeleted))
	ch <- prometheus.MustNewConstMetric(c.dropped, prometheus.CounterValue, float64(s.ResultsDropped))
}
