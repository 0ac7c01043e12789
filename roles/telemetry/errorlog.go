package telemetry

import "github.com/prometheus/client_golang/prometheus"

// NewErrorLogMetrics registers jq_api_error_logs_dropped_total on reg and returns the API's
// callback for a log line left out (api/server.ErrorLog.Dropped).
func NewErrorLogMetrics(reg prometheus.Registerer) func() {
	c := prometheus.NewCounter(prometheus.CounterOpts{
		Name: "jq_api_error_logs_dropped_total",
		Help: "Log lines of non-OK API responses left out by the rate limit of that log (a flood of bad requests); the next line written says how many it follows.",
	})
	reg.MustRegister(c)
	return c.Inc
}
