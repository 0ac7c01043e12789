package telemetry

import (
	"net/http"
	"net/http/pprof"
)

// RegisterPprof adds the Go profiler under /debug/pprof/ to a metrics port's
// mux. Callers do so only with metrics.pprof: a profile shows the process's
// internals (goroutine stacks, heap) and a CPU profile or trace costs CPU
// while it runs, so the metrics port does not serve them by default.
func RegisterPprof(mux *http.ServeMux) {
	mux.HandleFunc("/debug/pprof/", pprof.Index)
	mux.HandleFunc("/debug/pprof/profile", pprof.Profile)
	mux.HandleFunc("/debug/pprof/trace", pprof.Trace)
}
