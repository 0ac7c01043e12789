// Package health runs dependency checks (Postgres, Redis, Kafka) with a
// deadline and reports each one's outcome. The same checks back `--dry-run`,
// `/readyz` and the AdminService status, so the three never disagree.
package health

import (
	"context"
	"sync"
	"time"
)

// Check probes one dependency.
type Check struct {
	Name string
	// Critical checks decide readiness; a failing non-critical one (Redis:
	// the server dispatches without locks; Kafka: events wait in the outbox)
	// only degrades the service.
	Critical bool
	Probe    func(ctx context.Context) error
}

// Result is the outcome of one check.
type Result struct {
	Name     string        `json:"name"`
	Critical bool          `json:"critical"`
	Healthy  bool          `json:"healthy"`
	Detail   string        `json:"detail"`
	Latency  time.Duration `json:"latency"`
}

// Run probes every check concurrently, each with its own timeout, and returns
// the results in the order of checks.
func Run(ctx context.Context, timeout time.Duration, checks []Check) []Result {
	out := make([]Result, len(checks))
	var wg sync.WaitGroup
	for i, c := range checks {
		wg.Go(func() {
			cctx, cancel := context.WithTimeout(ctx, timeout)
			defer cancel()
			start := time.Now()
			err := c.Probe(cctx)
			r := Result{Name: c.Name, Critical: c.Critical, Healthy: err == nil, Latency: time.Since(start), Detail: "ok"}
			if err != nil {
				r.Detail = err.Error()
			}
			out[i] = r
		})
	}
	wg.Wait()
	return out
}

// Ready reports whether every critical check passed.
func Ready(results []Result) bool {
	for _, r := range results {
		if r.Critical && !r.Healthy {
			return false
		}
	}
	return true
}

// AllHealthy reports whether every check passed.
func AllHealthy(results []Result) bool {
	for _, r := range results {
		if !r.Healthy {
			return false
		}
	}
	return true
}
