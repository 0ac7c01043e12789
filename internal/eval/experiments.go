package main

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"regexp"
	"strconv"
	"strings"
	"time"

	"github.com/jq-dev/jq/client"
)

// runRecord is one measured load.
type runRecord struct {
	Topology string     `json:"topology"`
	Load     string     `json:"load"` // "rate" or "drain"
	Rate     float64    `json:"offered_rate,omitempty"`
	Jobs     int        `json:"jobs"`
	Slots    int        `json:"slots"`
	Workers  int        `json:"worker_processes"`
	Submit   loadResult `json:"submit"`
	// TaskQueue is the operation mix through taskqueue.v1 (offerTQ); nil for jq.v1 batch loads.
	TaskQueue *tqResult `json:"taskqueue,omitempty"`
	Stats     jobStats  `json:"stats"`
	// CPU is the mean cores used during the measured window, by process group (cpu.go).
	CPU map[string]float64 `json:"cpu_cores"`
}

const (
	serverGRPC, serverHealth, serverMetrics = 51001, 51002, 51003
	workerPortBase                          = 52000 // worker i: metrics 52000+2i, health 52001+2i
	nodePortBase                            = 51100 // node i: 51100+10i … +4
)

func startServer(e *env) error {
	_, err := e.start("server", fmt.Sprintf("http://127.0.0.1:%d/readyz", serverHealth), "--role=server",
		"--grpc-port", itoa(serverGRPC), "--health-port", itoa(serverHealth), "--metrics-port", itoa(serverMetrics))
	return err
}

// startWorker starts worker i with slots; wait=true waits for its /readyz.
func startWorker(e *env, i, slots int, wait bool) error {
	ready := ""
	if wait {
		ready = fmt.Sprintf("http://127.0.0.1:%d/readyz", workerPortBase+2*i+1)
	}
	_, err := e.start(fmt.Sprintf("worker%03d", i), ready, "--role=worker", "--server-addr", fmt.Sprintf("127.0.0.1:%d", serverGRPC),
		"--worker-id", fmt.Sprintf("eval-w%03d", i), "--concurrency", itoa(slots),
		"--metrics-port", itoa(workerPortBase+2*i), "--health-port", itoa(workerPortBase+2*i+1))
	return err
}

func startNode(e *env, i, slots int) (string, error) {
	p := nodePortBase + 10*i
	if _, err := e.start(fmt.Sprintf("node%d", i), fmt.Sprintf("http://127.0.0.1:%d/readyz", p+1), "--role=all",
		"--grpc-port", itoa(p), "--health-port", itoa(p+1), "--metrics-port", itoa(p+2),
		"--worker-metrics-port", itoa(p+3), "--worker-health-port", itoa(p+4),
		"--worker-id", fmt.Sprintf("eval-node%d", i), "--concurrency", itoa(slots)); err != nil {
		return "", err
	}
	// The in-process worker's readiness too, so no node starts its share late.
	if err := waitHTTP(fmt.Sprintf("http://127.0.0.1:%d/readyz", p+4)); err != nil {
		return "", err
	}
	return fmt.Sprintf("127.0.0.1:%d", p), nil
}

func clients(addrs ...string) ([]*client.Client, error) {
	var cs []*client.Client
	for _, a := range addrs {
		c, err := client.New(client.Options{Addr: a})
		if err != nil {
			return nil, err
		}
		cs = append(cs, c)
	}
	return cs, nil
}

// Topologies with the same 8 slots: A = 1 server + K=2 workers × 4 slots; B = N=4 all-in-one
// nodes × 2 slots, B8 = N=8 all-in-one nodes × 1 slot, sharing Postgres and Redis, submits routed by
// seed 003's owner formula.
func runTopology(ctx context.Context, cfg *config) (any, error) {
	const slots = 8
	// Capacity of 8 slots with the mix's mean of 53.3 ms: 150 jobs/s.
	rates, drainJobs := cfg.rates, cfg.drainJobs
	var out []runRecord
	for _, topo := range cfg.topologies {
		nodeCount := map[string]int{"B": 4, "B8": 8}[topo]
		if topo != "A" && nodeCount == 0 {
			return nil, fmt.Errorf("unknown topology %q (want A, B or B8)", topo)
		}
		e, err := newEnv(cfg, "topology_"+strings.ToLower(topo))
		if err != nil {
			return nil, err
		}
		var addrs []string
		var workers int
		if topo == "A" {
			if err := startServer(e); err != nil {
				return nil, err
			}
			for i := range 2 {
				if err := startWorker(e, i, slots/2, true); err != nil {
					return nil, err
				}
			}
			workers = 2
			addrs = []string{fmt.Sprintf("127.0.0.1:%d", serverGRPC)}
		} else {
			for i := range nodeCount {
				a, err := startNode(e, i, slots/nodeCount)
				if err != nil {
					return nil, err
				}
				addrs = append(addrs, a)
			}
			workers = nodeCount
		}
		nodes := tqClients(addrs...)
		// Warm-up, not recorded: 100 jobs at 50 jobs/s.
		offerTQ(ctx, nodes, loadSpec{runID: "warmup" + topo, jobs: jobMix(100, -1), rate: 50, clients: 8})
		if err := e.waitIdle(ctx, time.Minute); err != nil {
			return nil, err
		}
		loads := []struct {
			name string
			rate float64
			n    int
		}{}
		for _, r := range rates {
			loads = append(loads, struct {
				name string
				rate float64
				n    int
			}{"rate", r, int(r * cfg.duration.Seconds())})
		}
		loads = append(loads, struct {
			name string
			rate float64
			n    int
		}{"drain", 0, drainJobs})
		for _, l := range loads {
			runID := fmt.Sprintf("topo%s-%s%.0f", topo, l.name, l.rate)
			fmt.Printf("  %s %s rate=%.0f jobs=%d\n", topo, l.name, l.rate, l.n)
			c0 := takeCPU()
			tq := offerTQ(ctx, nodes, loadSpec{runID: runID, jobs: jobMix(l.n, -1), rate: l.rate, clients: 16})
			if err := e.waitIdle(ctx, 3*time.Minute); err != nil {
				return nil, err
			}
			cpu := cpuCores(c0, takeCPU(), e)
			st, err := e.stats(runID)
			if err != nil {
				return nil, err
			}
			rec := runRecord{Topology: topo, Load: l.name, Rate: l.rate, Jobs: l.n, Slots: slots, Workers: workers,
				Submit: tq.loadResult, TaskQueue: &tq, Stats: st, CPU: cpu}
			printRec(rec)
			out = append(out, rec)
		}
		e.stopAll()
	}
	return out, nil
}

// NFR-010: throughput against worker processes, each with cfg.scaleSlots slots, 100 ms sleep
// jobs, pre-submitted (≈ 10 s of ideal work), workers started together; throughput is first
// start → last completion.
func runScaling(ctx context.Context, cfg *config) (any, error) {
	var out []runRecord
	for _, w := range cfg.scaleWorkers {
		e, err := newEnv(cfg, fmt.Sprintf("scaling_%d", w))
		if err != nil {
			return nil, err
		}
		if err := startServer(e); err != nil {
			return nil, err
		}
		nodes, err := clients(fmt.Sprintf("127.0.0.1:%d", serverGRPC))
		if err != nil {
			return nil, err
		}
		ideal := float64(w*cfg.scaleSlots) / 0.1
		n := min(int(ideal*10), 30000)
		runID := fmt.Sprintf("scale%d", w)
		fmt.Printf("  workers=%d slots=%d jobs=%d (ideal %.0f jobs/s)\n", w, cfg.scaleSlots, n, ideal)
		sub := offer(ctx, nodes, loadSpec{runID: runID, jobs: jobMix(n, 100), clients: 4, batch: 500})
		c0 := takeCPU()
		for i := range w {
			if err := startWorker(e, i, cfg.scaleSlots, false); err != nil {
				return nil, err
			}
		}
		if err := e.waitIdle(ctx, 5*time.Minute); err != nil {
			return nil, err
		}
		cpu := cpuCores(c0, takeCPU(), e)
		st, err := e.stats(runID)
		if err != nil {
			return nil, err
		}
		rec := runRecord{Topology: "split", Load: "drain", Jobs: n, Slots: w * cfg.scaleSlots, Workers: w, Submit: sub, Stats: st, CPU: cpu}
		printRec(rec)
		out = append(out, rec)
		e.stopAll()
	}
	return out, nil
}

type manyResult struct {
	Workers           int       `json:"worker_processes"`
	RegisteredTable   int       `json:"registered_workers_table"`
	RegisteredAdmin   int       `json:"registered_admin_worker_list"`
	RegisterSeconds   float64   `json:"seconds_until_all_registered"`
	WorkerRSSMiBTotal float64   `json:"worker_rss_mib_total"`
	WorkerRSSMiBMax   float64   `json:"worker_rss_mib_max"`
	Run               runRecord `json:"run"`
}

// NFR-011: cfg.manyWorkers worker processes of concurrency 1 on one server, 100 ms sleep jobs at
// half their capacity.
func runMany(ctx context.Context, cfg *config) (any, error) {
	w := cfg.manyWorkers
	e, err := newEnv(cfg, "many")
	if err != nil {
		return nil, err
	}
	defer e.stopAll()
	if err := startServer(e); err != nil {
		return nil, err
	}
	t0 := time.Now()
	for i := range w {
		if err := startWorker(e, i, 1, false); err != nil {
			return nil, err
		}
	}
	res := manyResult{Workers: w}
	for {
		n, err := e.sql("SELECT count(*) FROM workers WHERE status = 'ONLINE'")
		if err != nil {
			return nil, err
		}
		res.RegisteredTable, _ = strconv.Atoi(n)
		if res.RegisteredTable >= w || time.Since(t0) > 2*time.Minute {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	res.RegisterSeconds = time.Since(t0).Seconds()
	out, err := exec.Command(cfg.jq, "--role=admin", "worker", "list", "-o", "json",
		"--server-addr", fmt.Sprintf("127.0.0.1:%d", serverGRPC)).Output()
	if err != nil {
		return nil, fmt.Errorf("worker list: %w", err)
	}
	res.RegisteredAdmin = countWorkers(out)
	nodes := tqClients(fmt.Sprintf("127.0.0.1:%d", serverGRPC))
	rate := float64(w) / 0.1 / 2
	n := int(rate * cfg.duration.Seconds())
	runID := "many"
	fmt.Printf("  workers=%d registered=%d/%d in %.1f s; rate=%.0f jobs=%d\n", w, res.RegisteredTable, res.RegisteredAdmin, res.RegisterSeconds, rate, n)
	c0 := takeCPU()
	tq := offerTQ(ctx, nodes, loadSpec{runID: runID, jobs: jobMix(n, 100), rate: rate, clients: 32})
	if err := e.waitIdle(ctx, 3*time.Minute); err != nil {
		return nil, err
	}
	cpu := cpuCores(c0, takeCPU(), e)
	for _, p := range e.procs {
		if strings.HasPrefix(p.name, "worker") {
			mib := rssMiB(p.cmd.Process.Pid)
			res.WorkerRSSMiBTotal += mib
			res.WorkerRSSMiBMax = max(res.WorkerRSSMiBMax, mib)
		}
	}
	st, err := e.stats(runID)
	if err != nil {
		return nil, err
	}
	res.Run = runRecord{Topology: "split", Load: "rate", Rate: rate, Jobs: n, Slots: w, Workers: w, Submit: tq.loadResult, TaskQueue: &tq, Stats: st, CPU: cpu}
	printRec(res.Run)
	return res, nil
}

func countWorkers(b []byte) int {
	var v any
	if json.Unmarshal(b, &v) != nil {
		return -1
	}
	switch t := v.(type) {
	case []any:
		return len(t)
	case map[string]any:
		for _, x := range t {
			if l, ok := x.([]any); ok {
				return len(l)
			}
		}
	}
	return -1
}

func rssMiB(pid int) float64 {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0
	}
	m := regexp.MustCompile(`VmRSS:\s+(\d+) kB`).FindSubmatch(b)
	if m == nil {
		return 0
	}
	kb, _ := strconv.ParseFloat(string(m[1]), 64)
	return kb / 1024
}

func printRec(r runRecord) {
	fmt.Printf("    done=%d notdone=%d e2e=%.0f/s exec=%.0f/s wait p50=%.1f p95=%.1f p99=%.1f max=%.1f ms workers_used=%d submit_err=%d\n",
		r.Stats.Done, r.Stats.NotDone, r.Stats.EndToEndPerSec, r.Stats.ExecPerSec, r.Stats.WaitP50Ms, r.Stats.WaitP95Ms,
		r.Stats.WaitP99Ms, r.Stats.WaitMaxMs, r.Stats.Workers, r.Submit.SubmitErrors)
	if tq := r.TaskQueue; tq != nil {
		for _, m := range []string{"SubmitJob", "GetJobStatus", "GetJobResult", "CancelJob"} {
			o := tq.Ops[m]
			fmt.Printf("    %s calls=%d errors=%d p50=%.1f p99=%.1f ms\n", m, o.Calls, o.Errors, o.P50Ms, o.P99Ms)
		}
		fmt.Printf("    cancel_requests=%d results_verified=%d checksum_mismatches=%d not_terminal=%d\n",
			tq.Cancelled, tq.ResultsFetched, tq.ChecksumMismatch, tq.NotTerminal)
	}
	fmt.Printf("    cpu cores %v\n", r.CPU)
}

func itoa(i int) string { return strconv.Itoa(i) }

func waitHTTP(url string) error {
	deadline := time.Now().Add(30 * time.Second)
	for time.Now().Before(deadline) {
		if r, err := http.Get(url); err == nil {
			r.Body.Close()
			if r.StatusCode == http.StatusOK {
				return nil
			}
		}
		time.Sleep(50 * time.Millisecond)
	}
	return fmt.Errorf("%s not ready", url)
}
