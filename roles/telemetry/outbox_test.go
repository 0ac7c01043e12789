package telemetry

import (
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/require"

	"github.com/jq-dev/jq/queue/maintenance"
	"github.com/jq-dev/jq/queue/outbox"
	"github.com/jq-dev/jq/store"
)

func TestOutboxCollector(t *testing.T) {
	stats := outbox.Stats{
		Published:     7,
		PublishErrors: map[string]int64{"jq.job-events": 3, "job.dead-lettered": 0},
		Oversized:     map[string]int64{outbox.Trimmed: 2, outbox.Parked: 1},
	}
	reg := prometheus.NewRegistry()
	reg.MustRegister(NewOutboxCollector(func() outbox.Stats { return stats }))
	gather := func() map[string]float64 { return gatherValues(t, reg) }
	// No backlog measured yet: the gauges are absent rather than a misleading 0.
	require.Equal(t, map[string]float64{
		"jq_outbox_published_events_total":                       7,
		"jq_kafka_publish_errors_total{topic=jq.job-events}":     3,
		"jq_kafka_publish_errors_total{topic=job.dead-lettered}": 0,
		"jq_outbox_events_oversized_total{action=trimmed}":       2,
		"jq_outbox_events_oversized_total{action=parked}":        1,
	}, gather())

	stats.Backlog, stats.BacklogKnown = store.OutboxBacklog{Events: 42, OldestAge: 1500 * time.Millisecond}, true
	got := gather()
	require.InDelta(t, 42, got["jq_outbox_backlog_events"], 0)
	require.InDelta(t, 1.5, got["jq_outbox_oldest_unpublished_seconds"], 1e-9)
}

// gatherValues returns every sample of reg by name{label=value}, counters and gauges alike.
func gatherValues(t *testing.T, reg *prometheus.Registry) map[string]float64 {
	t.Helper()
	families, err := reg.Gather()
	require.NoError(t, err)
	got := map[string]float64{}
	for _, f := range families {
		for _, m := range f.GetMetric() {
			name := f.GetName()
			for _, l := range m.GetLabel() {
				name += "{" + l.GetName() + "=" + l.GetValue() + "}"
			}
			got[name] = m.GetCounter().GetValue() + m.GetGauge().GetValue()
		}
	}
	return got
}

func TestMaintenanceCollector(t *testing.T) {
	reg := prometheus.NewRegistry()
	reg.MustRegister(NewMaintenanceCollector(func() maintenance.Stats {
		return maintenance.Stats{Passes: 4, Failures: 1, EventsDeleted: 12000, ResultsDropped: 7}
	}))
	require.Equal(t, map[string]float64{
		"jq_maintenance_passes_total":   4,
		"jq_maintenance_failures_total": 1,
		"jq_events_pruned_total":        12000,
		"jq_results_dropped_total":      7,
	}, gatherValues(t, reg))
}
