// Command compare measures River, Asynq and jq side by side on this machine, in one run, the way a
// user comparing them would: each with a no-op job and 100 concurrent workers, through its public
// Go API (jq as its built binary and its client package). See README.md.
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"time"
)

type config struct {
	systems, workloads []string
	runs               int
	output, jsonFile   string

	jqBin, logDir     string
	jqConstraint      string // arguments of `jq constraint create`, run before every jq run's jobs
	profileDir        string // CPU profiles of jq's server process during rate1000 go here
	pgBase, redisAddr string
	riverDB, jqDB     string
	asynqDB, portBase int

	concurrency, poolSize      int
	jobs, batchSize            int
	batchInserters             int
	asynqEnqueuers, submitters int
	submits                    int
	rateDuration, drainTimeout time.Duration
	poll                       time.Duration

	riverFetchCooldown, riverFetchPoll time.Duration
	asynqTaskCheck                     time.Duration
}

func main() {
	cfg, err := parseFlags(os.Args[1:])
	if err != nil {
		fmt.Fprintln(os.Stderr, "compare:", err)
		os.Exit(2)
	}
	// Only main handles signals: Ctrl-C cancels the context and every system is still stopped.
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	findInstances(ctx, cfg)
	if err := run(ctx, cfg); err != nil {
		fmt.Fprintln(os.Stderr, "compare:", err)
		os.Exit(1)
	}
}

func parseFlags(args []string) (*config, error) {
	fs := flag.NewFlagSet("compare", flag.ContinueOnError)
	c := &config{}
	var systems, wls string
	fs.StringVar(&systems, "systems", "river,asynq,jq-remote,jq-all", "comma-separated systems (also jq-embedded: jq --role=all on its embedded store)")
	fs.StringVar(&wls, "workloads", "batch,drain,rate100,rate1000,rate5000,submit", "comma-separated workloads")
	fs.IntVar(&c.runs, "runs", 3, "runs of each workload on each system; the median run is reported")
	fs.StringVar(&c.output, "o", "markdown", "output: markdown or json")
	fs.StringVar(&c.jsonFile, "json-file", "", "also write the JSON report to this file")
	fs.StringVar(&c.jqBin, "jq", "../../bin/jq", "the jq binary (go build -o bin/jq . at the repository root)")
	fs.StringVar(&c.jqConstraint, "jq-constraint", "", "create this constraint in every jq run before its jobs (the arguments of `jq constraint create`, e.g. 'never-binds --match queue=default --concurrency 1000000'): the overhead of constrained dispatch")
	fs.StringVar(&c.logDir, "log-dir", "", "where the jq processes' logs go (default: a new temporary directory)")
	fs.StringVar(&c.pgBase, "pg", "postgres://postgres@127.0.0.1:5432", "PostgreSQL base URL (no database)")
	fs.StringVar(&c.redisAddr, "redis", "127.0.0.1:6379", "Redis address")
	fs.StringVar(&c.riverDB, "river-db", "cmp_river", "River's database, dropped and created for every run (cmp_* only)")
	fs.StringVar(&c.jqDB, "jq-db", "cmp_jq", "jq's database, dropped and created for every run (cmp_* only)")
	fs.IntVar(&c.asynqDB, "asynq-redis-db", 5, "Redis DB number for Asynq, FLUSHDB'd before every run")
	fs.IntVar(&c.portBase, "port-base", 27170, "jq ports: API, health, metrics, worker health, worker metrics from here (below the ephemeral range 32768-60999, where an outgoing connection can hold a port)")
	fs.IntVar(&c.concurrency, "concurrency", 100, "workers of every system")
	fs.IntVar(&c.poolSize, "river-pool", 10, "River's pgx pool size (jq's db.pool_size default is 10)")
	fs.IntVar(&c.jobs, "jobs", 100000, "jobs of batch and drain")
	fs.IntVar(&c.batchSize, "batch", 1000, "jobs per batch insert (River InsertManyFast, jq SubmitMany)")
	fs.IntVar(&c.batchInserters, "inserters", 4, "concurrent batch inserters (River, jq)")
	fs.IntVar(&c.asynqEnqueuers, "asynq-enqueuers", 100, "concurrent Enqueue goroutines standing in for a batch (Asynq)")
	fs.IntVar(&c.submitters, "submitters", 256, "concurrent submitters of the rate workloads")
	fs.StringVar(&c.profileDir, "jq-profile", "", "write a CPU profile of jq's server process (jq-remote: the server; jq-all: the one process) over each rate1000 offer to this directory, as <system>-rate1000-run<N>.pprof")
	fs.IntVar(&c.submits, "submits", 3000, "sequential single submits of the submit workload")
	fs.DurationVar(&c.rateDuration, "rate-duration", 20*time.Second, "how long the rate workloads offer load")
	fs.DurationVar(&c.drainTimeout, "drain-timeout", 3*time.Minute, "the most a drain, or a rate's backlog, is waited for")
	fs.DurationVar(&c.poll, "poll", 200*time.Millisecond, "how often completion is polled")
	fs.DurationVar(&c.riverFetchCooldown, "river-fetch-cooldown", time.Millisecond, "River FetchCooldown (default 100ms caps a drain)")
	fs.DurationVar(&c.riverFetchPoll, "river-fetch-poll", 10*time.Millisecond, "River FetchPollInterval (default 1s)")
	fs.DurationVar(&c.asynqTaskCheck, "asynq-task-check", 10*time.Millisecond, "Asynq TaskCheckInterval (default 1s: an idle processor sleeps 0.5-1.5× it)")
	if err := fs.Parse(args); err != nil {
		return nil, err
	}
	c.systems, c.workloads = split(systems), split(wls)
	for _, s := range c.systems {
		if !slices.Contains([]string{"river", "asynq", "jq-remote", "jq-all", "jq-embedded"}, s) {
			return nil, fmt.Errorf("unknown system %q", s)
		}
	}
	for _, w := range c.workloads {
		if !slices.ContainsFunc(workloads, func(x workload) bool { return x.name == w }) {
			return nil, fmt.Errorf("unknown workload %q", w)
		}
	}
	if c.runs < 1 || (c.output != "markdown" && c.output != "json") {
		return nil, fmt.Errorf("want -runs ≥ 1 and -o markdown|json")
	}
	return c, nil
}

func split(s string) []string {
	var out []string
	for f := range strings.SplitSeq(s, ",") {
		if f = strings.TrimSpace(f); f != "" {
			out = append(out, f)
		}
	}
	return out
}

func newSystem(cfg *config, name string) system {
	switch name {
	case "river":
		return newRiver(cfg)
	case "asynq":
		return newAsynq(cfg)
	case "jq-remote":
		return newJQRemote(cfg)
	case "jq-embedded":
		return newJQEmbedded(cfg)
	default:
		return newJQAll(cfg)
	}
}

func run(ctx context.Context, cfg *config) error {
	if slices.ContainsFunc(cfg.systems, func(s string) bool { return strings.HasPrefix(s, "jq-") }) {
		abs, err := filepath.Abs(cfg.jqBin)
		if err != nil {
			return err
		}
		if _, err := os.Stat(abs); err != nil {
			return fmt.Errorf("jq binary: %w (build it: go build -o bin/jq . at the repository root)", err)
		}
		cfg.jqBin = abs
	}
	if cfg.logDir == "" {
		d, err := os.MkdirTemp("", "jq-compare-")
		if err != nil {
			return err
		}
		cfg.logDir = d
	}
	systems := make([]system, len(cfg.systems))
	for i, n := range cfg.systems {
		systems[i] = newSystem(cfg, n)
	}
	started := time.Now()
	var all []result
	// Interleaved (run, workload, system) so that a drift of the machine spreads over every system.
	for run := 1; run <= cfg.runs; run++ {
		for _, w := range workloads {
			if !slices.Contains(cfg.workloads, w.name) {
				continue
			}
			for _, s := range systems {
				if ctx.Err() != nil {
					return ctx.Err()
				}
				r := runOne(ctx, cfg, s, w, run)
				fmt.Fprintf(os.Stderr, "compare: run %d %-8s %-9s %s\n", run, w.name, s.Name(), brief(w, r))
				all = append(all, r)
			}
		}
	}
	rep := buildReport(cfg, all, started)
	js, err := json.MarshalIndent(rep, "", "  ")
	if err != nil {
		return err
	}
	if cfg.jsonFile != "" {
		if err := os.WriteFile(cfg.jsonFile, append(js, '\n'), 0o600); err != nil {
			return err
		}
	}
	if cfg.output == "json" {
		_, err := fmt.Printf("%s\n", js)
		return err
	}
	writeMarkdown(os.Stdout, rep)
	return nil
}

func runOne(ctx context.Context, cfg *config, s system, w workload, run int) result {
	r := result{System: s.Name(), Workload: w.name, Run: run}
	err := s.Prepare(ctx)
	if err == nil {
		err = w.run(ctx, cfg, s, &r)
	}
	// Stop with a context of its own: an interrupted run still stops its processes.
	if serr := s.Stop(context.WithoutCancel(ctx)); serr != nil && err == nil {
		err = serr
	}
	if err != nil {
		r.Error = err.Error()
	}
	return r
}
