package telemetry

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/jq-dev/jq/queue/engine"
)

// recoveryCollector exposes a server replica's reaper counters (queue/engine RecoveryStats).
type recoveryCollector struct {
	stats                                                         func() engine.RecoveryStats
	workersLost, failed, retried, deadLettered, ttl, orphans, dir *prometheus.Desc
}

// NewRecoveryCollector returns a collector of the reaper's counters read from stats at each scrape.
func NewRecoveryCollector(stats func() engine.RecoveryStats) prometheus.Collector {
	d := func(name, help string, labels ...string) *prometheus.Desc {
		return prometheus.NewDesc("jq_"+name, help, labels, nil)
	}
	return &recoveryCollector{
		stats:        stats,
		workersLost:  d("workers_lost_total", "Workers this replica's reaper declared OFFLINE (no heartbeat within the timeout)."),
		failed:       d("reaper_failed_attempts_total", "Attempts this replica's reaper failed, by reason.", "reason"),
		retried:      d("jobs_retried_total", "FAILED jobs moved back to PENDING by this replica's retry sweep."),
		deadLettered: d("jobs_dead_lettered_total", "FAILED jobs dead-lettered by this replica's retry sweep."),
		ttl:          d("jobs_ttl_expired_total", "PENDING jobs dead-lettered because their TTL expired."),
		orphans:      d("inflight_orphans_removed_total", "Orphaned Redis in-flight entries removed by the reaper."),
		dir:          d("dispatch_direct_claims_total", "Jobs assigned without a Redis in-flight record because Redis was unreachable (the reaper recovers them from Postgres alike)."),
	}
}

func (c *recoveryCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{c.workersLost, c.failed, c.retried, c.deadLettered, c.ttl, c.orphans, c.dir} {
		ch <- d
	}
}

func (c *recoveryCollector) Collect(ch chan<- prometheus.Metric) {
	s := c.stats()
	counter := func(d *prometheus.Desc, v int64, labels ...string) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.CounterValue, float64(v), labels...)
	}
	counter(c.workersLost, s.WorkersLost)
	for reason, n := range s.Failed {
		counter(c.failed, n, reason)
	}
	counter(c.retried, s.Retried)
	counter(c.deadLettered, s.DeadLettered)
	counter(c.ttl, s.TTLExpired)
	counter(c.orphans, s.Orphans)
	counter(c.dir, s.DirectClaims)
}
