package telemetry

import (
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/require"

	"github.com/jq-dev/jq/queue/engine"
)

func TestRecoveryCollector(t *testing.T) {
	stats := engine.RecoveryStats{
		WorkersLost: 2, Failed: map[string]int64{"worker_lost": 3, "timeout": 1}, Retried: 4,
		DeadLettered: 5, TTLExpired: 6, Orphans: 7, DirectClaims: 8,
	}
	reg := prometheus.NewRegistry()
	reg.MustRegister(NewRecoveryCollector(func() engine.RecoveryStats { return stats }))
	got := gatherValues(t, reg)
	require.Equal(t, map[string]float64{
		"jq_workers_lost_total":                               2,
		"jq_reaper_failed_attempts_total{reason=timeout}":     1,
		"jq_reaper_failed_attempts_total{reason=worker_lost}": 3,
		"jq_jobs_retried_total":                               4,
		"jq_jobs_dead_lettered_total":                         5,
		"jq_jobs_ttl_expired_total":                           6,
		"jq_inflight_orphans_removed_total":                   7,
		"jq_dispatch_direct_claims_total":                     8,
	}, got)
}
