package telemetry

import (
	"slices"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/jq-dev/jq/api/auth"
)

// limitReasons are the refusals of a limit (RESOURCE_EXHAUSTED); every other reason is an
// authentication or authorization refusal.
var limitReasons = []string{auth.ReasonRateLimited, auth.ReasonStreamLimit, auth.ReasonWorkerLimit}

// NewAuthMetrics registers jq_auth_denied_total{reason} (UNAUTHENTICATED and PERMISSION_DENIED)
// and jq_api_limited_total{reason} (RESOURCE_EXHAUSTED by a rate, stream or worker limit), every
// reason at 0, and returns the function that counts one refusal.
func NewAuthMetrics(reg prometheus.Registerer) func(reason string) {
	denied := prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "jq_auth_denied_total",
		Help: "API requests refused before they changed anything: missing_credentials, invalid_token, unknown_certificate (UNAUTHENTICATED), forbidden (the role may not call the RPC) and not_owner (a worker id, queue or job of another principal; PERMISSION_DENIED).",
	}, []string{"reason"})
	limited := prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "jq_api_limited_total",
		Help: "API requests refused with RESOURCE_EXHAUSTED by a limit: rate_limited (auth.rate_limit_per_sec), stream_limit (server.max_streams, auth.max_streams_per_principal), worker_limit (server.max_workers, auth.max_workers_per_principal).",
	}, []string{"reason"})
	reg.MustRegister(denied, limited)
	for _, r := range auth.Reasons {
		if slices.Contains(limitReasons, r) {
			limited.WithLabelValues(r)
		} else {
			denied.WithLabelValues(r)
		}
	}
	return func(reason string) {
		if slices.Contains(limitReasons, reason) {
			limited.WithLabelValues(reason).Inc()
			return
		}
		denied.WithLabelValues(reason).Inc()
	}
}
