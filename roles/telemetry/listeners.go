package telemetry

import (
	"net"
	"sync"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/jq-dev/jq/internal/netlimit"
)

// Listener names, the listener label of the connection metrics.
const (
	ListenerAPI     = "api"
	ListenerHealth  = "health"
	ListenerMetrics = "metrics"
	ListenerConsole = "console"
)

// Listeners counts the connections each bounded listener (internal/netlimit) refused at
// a cap and shows those it holds:
//
//	jq_listener_connections_refused_total{listener,reason}  reason total or per_source
//	jq_listener_connections_open{listener}
//
// A nil set counts nothing.
type Listeners struct {
	refused  *prometheus.CounterVec
	openDesc *prometheus.Desc

	mu   sync.Mutex
	open map[string]*netlimit.Listener
}

// NewListeners registers the connection metrics with reg.
func NewListeners(reg prometheus.Registerer) *Listeners {
	m := &Listeners{
		refused: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "jq_listener_connections_refused_total",
			Help: "Connections closed because the listener was at a cap: total (its max connections) or per_source (its max connections from one address), at accept; evicted (a side listener at its total closed the oldest connection of its heaviest address to admit one from a lighter address).",
		}, []string{"listener", "reason"}),
		openDesc: prometheus.NewDesc("jq_listener_connections_open",
			"Connections the listener holds now (those within its caps).", []string{"listener"}, nil),
		open: map[string]*netlimit.Listener{},
	}
	reg.MustRegister(m.refused, m)
	return m
}

// Wrap bounds ln as netlimit.Wrap does and counts its connections under name.
func (m *Listeners) Wrap(name string, ln net.Listener, opts netlimit.Options) *netlimit.Listener {
	if m == nil {
		return netlimit.Wrap(ln, opts)
	}
	for _, r := range []string{netlimit.ReasonTotal, netlimit.ReasonPerSource, netlimit.ReasonEvicted} {
		m.refused.WithLabelValues(name, r)
	}
	count := opts.Refused
	opts.Refused = func(reason string) {
		m.refused.WithLabelValues(name, reason).Inc()
		if count != nil {
			count(reason)
		}
	}
	l := netlimit.Wrap(ln, opts)
	m.mu.Lock()
	m.open[name] = l
	m.mu.Unlock()
	return l
}

// Describe implements prometheus.Collector (the open gauge).
func (m *Listeners) Describe(ch chan<- *prometheus.Desc) { ch <- m.openDesc }

// Collect implements prometheus.Collector (the open gauge).
func (m *Listeners) Collect(ch chan<- prometheus.Metric) {
	m.mu.Lock()
	defer m.mu.Unlock()
	for name, l := range m.open {
		ch <- prometheus.MustNewConstMetric(m.openDesc, prometheus.GaugeValue, float64(l.Open()), name)
	}
}
