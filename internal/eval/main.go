// Command eval runs the topology evaluation of docs/evaluation.md against real jq processes
// (bin/jq) on this machine, sharing one Postgres and one Redis, and writes machine-readable
// results to -out (JSON, one file per experiment). `go tool -modfile=tools/go.mod task eval` runs it and then the
// plotter (tools/evalplot).
//
//	go run ./internal/eval [-only topology,scaling,many,nfr012] [-out docs/eval]
//
// Every experiment gets its own database (jq_eval_<name>, dropped and created again; no other
// database is touched) and its own Redis key prefix. Latencies are submit→start from Postgres's
// timestamps, as `jq --role=admin bench` reports them.
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"syscall"
	"time"
)

type config struct {
	jq, pgBase, redis, out, logDir string
	only                           []string
	topologies                     []string
	duration                       time.Duration
	scaleWorkers                   []int
	scaleSlots                     int
	manyWorkers                    int
	rows                           []int
	rates                          []float64
	drainJobs                      int
}

func main() {
	cfg := &config{}
	var only, scale, rows, topologies, rates string
	flag.StringVar(&cfg.jq, "jq", "bin/jq", "the jq binary (go tool -modfile=tools/go.mod task build)")
	flag.StringVar(&cfg.pgBase, "pg", envOr("PGURL_BASE", "postgres://postgres@127.0.0.1:5432"), "Postgres base URL (no database)")
	flag.StringVar(&cfg.redis, "redis", envOr("REDIS_ADDR", "127.0.0.1:6379"), "Redis address")
	flag.StringVar(&cfg.out, "out", "docs/eval", "directory for the JSON results")
	flag.StringVar(&cfg.logDir, "logs", "/tmp/jq-eval", "directory for the processes' logs")
	flag.StringVar(&only, "only", "topology,scaling,many,nfr012", "experiments to run, comma-separated")
	flag.StringVar(&topologies, "topologies", "A,B", "topologies to run: A (1 server + 2 workers × 4 slots), B (4 --role=all nodes × 2 slots), B8 (8 nodes × 1 slot)")
	flag.DurationVar(&cfg.duration, "duration", 15*time.Second, "length of each fixed-rate load")
	flag.StringVar(&rates, "rates", "100,140", "topology: offered rates (jobs/s), comma-separated")
	flag.IntVar(&cfg.drainJobs, "drain-jobs", 2000, "topology: jobs of the drain load")
	flag.StringVar(&scale, "scale-workers", "1,2,4,8,16,32", "NFR-010: worker process counts")
	flag.IntVar(&cfg.scaleSlots, "scale-slots", 16, "NFR-010: slots (--concurrency) of each worker")
	flag.IntVar(&cfg.manyWorkers, "many-workers", 100, "NFR-011: worker processes (concurrency 1 each)")
	flag.StringVar(&rows, "rows", "1000000", "NFR-012: table sizes, comma-separated")
	flag.Parse()
	cfg.only = strings.Split(only, ",")
	cfg.topologies = strings.Split(topologies, ",")
	cfg.scaleWorkers = ints(scale)
	cfg.rows = ints(rows)
	for _, r := range ints(rates) {
		cfg.rates = append(cfg.rates, float64(r))
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := os.MkdirAll(cfg.out, 0o755); err != nil {
		fatal(err)
	}
	exps := []struct {
		name string
		run  func(context.Context, *config) (any, error)
	}{
		{"topology", runTopology},
		{"scaling", runScaling},
		{"many", runMany},
		{"nfr012", runNFR012},
	}
	for _, x := range exps {
		if !slices.Contains(cfg.only, x.name) {
			continue
		}
		fmt.Printf("=== %s\n", x.name)
		res, err := x.run(ctx, cfg)
		if err != nil {
			fatal(fmt.Errorf("%s: %w", x.name, err))
		}
		if err := writeJSON(filepath.Join(cfg.out, x.name+".json"), map[string]any{
			"experiment": x.name, "at": time.Now().UTC().Format(time.RFC3339), "machine": machine(), "results": res,
		}); err != nil {
			fatal(err)
		}
	}
}

func machine() map[string]any {
	return map[string]any{"cpus": runtime.NumCPU(), "goos": runtime.GOOS, "goarch": runtime.GOARCH,
		"note": "server(s), workers, load generator, Postgres and Redis co-located on one machine"}
}

func writeJSON(path string, v any) error {
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return err
	}
	return os.WriteFile(path, append(b, '\n'), 0o644)
}

func envOr(k, def string) string {
	if v := os.Getenv(k); v != "" {
		return v
	}
	return def
}

func ints(s string) []int {
	var out []int
	for _, f := range strings.Split(s, ",") {
		var n int
		if _, err := fmt.Sscan(strings.TrimSpace(f), &n); err == nil && n > 0 {
			out = append(out, n)
		}
	}
	return out
}

func fatal(err error) {
	fmt.Fprintln(os.Stderr, "eval:", err)
	os.Exit(1)
}
