package telemetry

import (
	"fmt"
	"net"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/require"

	"github.com/jq-dev/jq/internal/netlimit"
)

// TestListenerMetrics: connections closed at a cap are counted per listener and reason, and the
// open gauge follows what the listener holds.
func TestListenerMetrics(t *testing.T) {
	reg := prometheus.NewRegistry()
	m := NewListeners(reg)
	raw, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	ln := m.Wrap(ListenerHealth, raw, netlimit.Options{Max: 3, PerSource: 2})
	t.Cleanup(func() { _ = ln.Close() })
	accepted := make(chan net.Conn, 8)
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				close(accepted)
				return
			}
			accepted <- c
		}
	}()
	want := func(open, perSource float64) {
		t.Helper()
		deadline := time.Now().Add(10 * time.Second)
		for {
			got := gatherValues(t, reg)
			exp := map[string]float64{
				"jq_listener_connections_open{listener=health}":                             open,
				"jq_listener_connections_refused_total{listener=health}{reason=per_source}": perSource,
				"jq_listener_connections_refused_total{listener=health}{reason=total}":      0,
				"jq_listener_connections_refused_total{listener=health}{reason=evicted}":    0,
			}
			if fmt.Sprint(got) == fmt.Sprint(exp) || time.Now().After(deadline) {
				require.Equal(t, exp, got)
				return
			}
			time.Sleep(10 * time.Millisecond) // polling the counters, not synchronising
		}
	}
	want(0, 0)
	var clients []net.Conn
	for range 4 { // the 3rd and 4th from 127.0.0.1 are over the per-source cap of 2
		c, err := net.Dial("tcp", ln.Addr().String())
		require.NoError(t, err)
		clients = append(clients, c)
	}
	want(2, 2)
	(<-accepted).Close()
	want(1, 2)
	for _, c := range clients {
		_ = c.Close()
	}
}
