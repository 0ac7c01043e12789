package health

import (
	"context"
	"encoding/json"
	"net/http"
	"time"
)

// Overall and per-check states of a readiness body.
const (
	StatusOK          = "ok"          // every check passed
	StatusDegraded    = "degraded"    // only non-critical checks failed: still ready
	StatusFailing     = "failing"     // a critical check failed (per check)
	StatusUnavailable = "unavailable" // not ready: a critical check failed, or shutting down
)

// Body is the JSON of /readyz: the overall status, why it is unavailable when
// that is not a check (shutting down), and every check's outcome by name.
type Body struct {
	Status string               `json:"status"`
	Reason string               `json:"reason,omitempty"`
	Checks map[string]CheckBody `json:"checks,omitempty"`
}

// CheckBody is one check's outcome in a Body.
type CheckBody struct {
	Status    string  `json:"status"` // ok, degraded or failing
	Critical  bool    `json:"critical"`
	Error     string  `json:"error,omitempty"`
	LatencyMS float64 `json:"latency_ms"`
}

// NewBody summarises results: unavailable when a critical check failed,
// degraded when only non-critical ones did, ok otherwise.
func NewBody(results []Result) Body {
	b := Body{Status: StatusOK, Checks: make(map[string]CheckBody, len(results))}
	for _, r := range results {
		c := CheckBody{Status: StatusOK, Critical: r.Critical, LatencyMS: float64(r.Latency.Microseconds()) / 1000}
		if !r.Healthy {
			c.Error = r.Detail
			c.Status = StatusDegraded
			if r.Critical {
				c.Status = StatusFailing
			}
			if b.Status == StatusOK {
				b.Status = StatusDegraded
			}
		}
		b.Checks[r.Name] = c
	}
	if !Ready(results) {
		b.Status = StatusUnavailable
	}
	return b
}

// ReadyHandler serves /readyz: 503 with reason "shutting down" as soon as
// stopping reports true (checked before and after the probes, so a stop that
// begins meanwhile wins), else the checks' Body — 200 when ready (ok or
// degraded), 503 when a critical check failed.
func ReadyHandler(stopping func() bool, timeout time.Duration, checks func() []Check) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		shutdown := Body{Status: StatusUnavailable, Reason: "shutting down"}
		if stopping() {
			writeBody(w, http.StatusServiceUnavailable, shutdown)
			return
		}
		b := NewBody(Run(r.Context(), timeout, checks()))
		code := http.StatusOK
		switch {
		case stopping():
			b, code = shutdown, http.StatusServiceUnavailable
		case b.Status == StatusUnavailable:
			code = http.StatusServiceUnavailable
		}
		writeBody(w, code, b)
	})
}

// LiveHandler serves /healthz: 200 while the process serves HTTP at all.
func LiveHandler() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		writeBody(w, http.StatusOK, Body{Status: StatusOK})
	})
}

// StateCheck is a check over in-process state (no I/O): it fails with err
// whenever bad reports true.
func StateCheck(name string, bad func() bool, err error) Check {
	return Check{Name: name, Critical: true, Probe: func(context.Context) error {
		if bad() {
			return err
		}
		return nil
	}}
}

func writeBody(w http.ResponseWriter, code int, b Body) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(code)
	_ = json.NewEncoder(w).Encode(b)
}
