package main

import (
	"context"
	"crypto/sha256"
	"encoding/binary"
	"fmt"
	"math/rand/v2"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jq-dev/jq/client"
	"github.com/jq-dev/jq/queue/handlers"
)

// ownerIndex is seed 003's Deterministic Owner Routing Algorithm: the first 8 bytes of the
// SHA-256 of the key's UTF-8 bytes, big-endian, modulo the number of nodes (fixed node order).
func ownerIndex(key string, n int) int {
	h := sha256.Sum256([]byte(key))
	return int(binary.BigEndian.Uint64(h[:8]) % uint64(n))
}

// mixJob is one job of the fixed mix: seed 003's work_duration_ms and payload_size_bytes (the
// size of its output).
type mixJob struct {
	ms, size int
}

// Job mix (seed 003's work_duration_ms / payload_size_bytes): durations and payload sizes each
// drawn uniformly from these, from a fixed seed, so every run offers the same sequence.
var (
	mixDurationsMS = []int{10, 50, 100}
	mixPayloadB    = []int{128, 1024, 4096}
)

func jobMix(n int, fixedMS int) []mixJob {
	r := rand.New(rand.NewPCG(3, 3))
	jobs := make([]mixJob, n)
	for i := range jobs {
		if fixedMS >= 0 {
			jobs[i] = mixJob{ms: fixedMS, size: 0}
			continue
		}
		jobs[i] = mixJob{ms: mixDurationsMS[r.IntN(len(mixDurationsMS))], size: mixPayloadB[r.IntN(len(mixPayloadB))]}
	}
	return jobs
}

// payload is the synthetic handler's payload of j (jq.v1's batch submits; the unary load goes
// through taskqueue.v1, whose JobSpec carries the same numbers).
func payload(j mixJob) []byte {
	return handlers.SyntheticJobPayload(handlers.SyntheticPayload{
		WorkDurationMS: uint32(j.ms), PayloadSizeBytes: uint32(j.size),
	})
}

// loadSpec is one load: jobs offered at rate jobs/s (0 = as fast as the clients go), unary
// idempotent submits routed by owner, or batches when batch > 1 (no routing, no keys).
type loadSpec struct {
	runID   string
	jobs    []mixJob
	rate    float64
	clients int
	batch   int
}

type loadResult struct {
	Submitted     int     `json:"submitted"`
	SubmitErrors  int64   `json:"submit_errors"`
	SubmitSeconds float64 `json:"submit_seconds"`
	SubmitRPCP50  float64 `json:"submit_rpc_p50_ms"`
	SubmitRPCP99  float64 `json:"submit_rpc_p99_ms"`
	PerNode       []int   `json:"submits_per_node,omitempty"`
}

// offer submits the spec's jobs through nodes (one client per node, fixed order).
func offer(ctx context.Context, nodes []*client.Client, s loadSpec) loadResult {
	var next atomic.Int64
	var errs atomic.Int64
	perNode := make([]atomic.Int64, len(nodes))
	var mu sync.Mutex
	var lat []time.Duration
	batch := max(1, s.batch)
	start := time.Now()
	var wg sync.WaitGroup
	for range s.clients {
		wg.Go(func() {
			var mine []time.Duration
			for ctx.Err() == nil {
				first := int(next.Add(int64(batch))) - batch
				if first >= len(s.jobs) {
					break
				}
				if s.rate > 0 { // open loop: job i is due at start + i/rate
					if d := time.Until(start.Add(time.Duration(float64(first) / s.rate * float64(time.Second)))); d > 0 {
						time.Sleep(d)
					}
				}
				labels := client.Labels(map[string]string{"bench_run": s.runID})
				rctx, cancel := context.WithTimeout(ctx, 30*time.Second)
				t0 := time.Now()
				var err error
				if batch == 1 {
					j := s.jobs[first]
					key := s.runID + "-" + strconv.Itoa(first)
					owner := ownerIndex(key, len(nodes))
					perNode[owner].Add(1)
					_, err = nodes[owner].Submit(rctx, client.Job{Queue: "default", Type: handlers.TypeSynthetic, Payload: payload(j)},
						labels, client.IdempotencyKey(key))
				} else {
					end := min(first+batch, len(s.jobs))
					js := make([]client.Job, 0, end-first)
					for _, j := range s.jobs[first:end] {
						js = append(js, client.Job{Queue: "default", Type: handlers.TypeSynthetic, Payload: payload(j)})
					}
					perNode[0].Add(int64(len(js)))
					_, err = nodes[0].SubmitMany(rctx, js, labels)
				}
				cancel()
				mine = append(mine, time.Since(t0))
				if err != nil {
					errs.Add(1)
					if errs.Load() < 5 {
						fmt.Printf("  submit error: %v\n", err)
					}
				}
			}
			mu.Lock()
			lat = append(lat, mine...)
			mu.Unlock()
		})
	}
	wg.Wait()
	r := loadResult{Submitted: len(s.jobs), SubmitErrors: errs.Load(), SubmitSeconds: time.Since(start).Seconds()}
	slices.Sort(lat)
	if len(lat) > 0 {
		r.SubmitRPCP50 = ms(lat[len(lat)*50/100])
		r.SubmitRPCP99 = ms(lat[min(len(lat)-1, len(lat)*99/100)])
	}
	for i := range perNode {
		r.PerNode = append(r.PerNode, int(perNode[i].Load()))
	}
	return r
}

func ms(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }

// jobStats is what Postgres stamped on the run's jobs: created_at, started_at and completed_at
// all come from the database clock, as in `jq --role=admin bench`.
type jobStats struct {
	Done            int     `json:"done"`
	NotDone         int     `json:"not_done"`
	WaitP50Ms       float64 `json:"wait_p50_ms"`
	WaitP95Ms       float64 `json:"wait_p95_ms"`
	WaitP99Ms       float64 `json:"wait_p99_ms"`
	WaitMaxMs       float64 `json:"wait_max_ms"`
	EndToEndSeconds float64 `json:"end_to_end_seconds"` // first created → last completed
	EndToEndPerSec  float64 `json:"end_to_end_per_sec"`
	ExecSeconds     float64 `json:"exec_seconds"` // first started → last completed
	ExecPerSec      float64 `json:"exec_per_sec"`
	Workers         int     `json:"workers_used"`
	JobsPerWorker   []int   `json:"jobs_per_worker,omitempty"`
}

func (e *env) stats(runID string) (jobStats, error) {
	q := fmt.Sprintf(`SELECT count(*) FILTER (WHERE state='DONE'), count(*) FILTER (WHERE state<>'DONE'),
 coalesce(percentile_cont(0.5) WITHIN GROUP (ORDER BY w),0), coalesce(percentile_cont(0.95) WITHIN GROUP (ORDER BY w),0),
 coalesce(percentile_cont(0.99) WITHIN GROUP (ORDER BY w),0), coalesce(max(w),0),
 coalesce(extract(epoch FROM max(completed_at)-min(created_at)),0), coalesce(extract(epoch FROM max(completed_at)-min(started_at)),0),
 count(DISTINCT worker_id) FILTER (WHERE state='DONE')
FROM (SELECT state, created_at, started_at, completed_at, worker_id,
             extract(epoch FROM started_at-created_at)*1000 AS w FROM jobs WHERE labels->>'bench_run' = '%s') t`, runID)
	out, err := e.sql(q)
	if err != nil {
		return jobStats{}, err
	}
	f := strings.Split(out, "|")
	if len(f) != 9 {
		return jobStats{}, fmt.Errorf("stats: unexpected %q", out)
	}
	num := func(s string) float64 { v, _ := strconv.ParseFloat(s, 64); return v }
	s := jobStats{Done: int(num(f[0])), NotDone: int(num(f[1])), WaitP50Ms: num(f[2]), WaitP95Ms: num(f[3]),
		WaitP99Ms: num(f[4]), WaitMaxMs: num(f[5]), EndToEndSeconds: num(f[6]), ExecSeconds: num(f[7]), Workers: int(num(f[8]))}
	if s.EndToEndSeconds > 0 {
		s.EndToEndPerSec = float64(s.Done) / s.EndToEndSeconds
	}
	if s.ExecSeconds > 0 {
		s.ExecPerSec = float64(s.Done) / s.ExecSeconds
	}
	out, err = e.sql(fmt.Sprintf(`SELECT count(*) FROM jobs WHERE state='DONE' AND labels->>'bench_run'='%s' GROUP BY worker_id ORDER BY 1 DESC`, runID))
	if err != nil {
		return s, err
	}
	for _, l := range strings.Fields(out) {
		s.JobsPerWorker = append(s.JobsPerWorker, int(num(l)))
	}
	return s, nil
}
