package main

import (
	"fmt"
	"io"
	"maps"
	"runtime"
	"slices"
	"sort"
	"strings"
	"time"
)

type report struct {
	Date      string            `json:"date"`
	Machine   string            `json:"machine"`
	Runs      int               `json:"runs"`
	Settings  map[string]string `json:"settings"`
	Workloads []string          `json:"workloads"`
	Systems   []string          `json:"systems"`
	// Median is the median run (by Value) of each system × workload, keyed "system/workload".
	Median map[string]result `json:"median"`
	// JQOverRiver is jq's Value ÷ River's per workload, keyed "jq-remote/batch" and the like.
	JQOverRiver map[string]float64 `json:"jq_over_river"`
	All         []result           `json:"all_runs"`
}

func buildReport(cfg *config, all []result, started time.Time) report {
	rep := report{
		Date:    started.UTC().Format(time.RFC3339),
		Machine: fmt.Sprintf("%s/%s, %d CPUs, %s", runtime.GOOS, runtime.GOARCH, runtime.NumCPU(), runtime.Version()),
		Runs:    cfg.runs,
		Settings: map[string]string{
			"concurrency":          fmt.Sprint(cfg.concurrency),
			"river_fetch_cooldown": cfg.riverFetchCooldown.String(),
			"river_fetch_poll":     cfg.riverFetchPoll.String(),
			"river_pool":           fmt.Sprint(cfg.poolSize),
			"asynq_task_check":     cfg.asynqTaskCheck.String(),
			"asynq_redis_db":       fmt.Sprint(cfg.asynqDB),
			"jobs":                 fmt.Sprint(cfg.jobs),
			"batch":                fmt.Sprintf("%d × %d inserters (Asynq: %d Enqueue goroutines)", cfg.batchSize, cfg.batchInserters, cfg.asynqEnqueuers),
			"rate_duration":        cfg.rateDuration.String(),
			"submitters":           fmt.Sprint(cfg.submitters),
			"submits":              fmt.Sprint(cfg.submits),
			"jq":                   cfg.jqBin,
			"jq_logs":              cfg.logDir,
		},
		Systems:     cfg.systems,
		Median:      map[string]result{},
		JQOverRiver: map[string]float64{},
		All:         all,
	}
	for _, w := range workloads {
		if slices.Contains(cfg.workloads, w.name) {
			rep.Workloads = append(rep.Workloads, w.name)
		}
	}
	for _, s := range cfg.systems {
		for _, w := range rep.Workloads {
			var ok []result
			for _, r := range all {
				if r.System == s && r.Workload == w && r.Error == "" {
					ok = append(ok, r)
				}
			}
			if len(ok) == 0 { // every run failed: show the first error
				for _, r := range all {
					if r.System == s && r.Workload == w {
						rep.Median[s+"/"+w] = r
						break
					}
				}
				continue
			}
			sort.Slice(ok, func(i, j int) bool { return ok[i].Value < ok[j].Value })
			rep.Median[s+"/"+w] = ok[(len(ok)-1)/2]
		}
	}
	for _, s := range []string{"jq-remote", "jq-all", "jq-embedded"} {
		for _, w := range rep.Workloads {
			j, jok := rep.Median[s+"/"+w]
			r, rok := rep.Median["river/"+w]
			if jok && rok && j.Error == "" && r.Error == "" && r.Value > 0 {
				rep.JQOverRiver[s+"/"+w] = float64(int64(j.Value/r.Value*100+0.5)) / 100
			}
		}
	}
	return rep
}

func unitOf(name string) string {
	for _, w := range workloads {
		if w.name == name {
			return w.unit
		}
	}
	return ""
}

// cell is the headline of one median run, with the latencies where the workload has them.
func cell(w string, r result) string {
	if r.Error != "" {
		return "error (see JSON / stderr)"
	}
	switch {
	case strings.HasPrefix(w, "rate"):
		s := fmt.Sprintf("%s/s; p50 %s ms, p99 %s ms", thousands(r.Value), num(r.P50Ms), num(r.P99Ms))
		if r.BacklogAfter5s > 0 {
			s += fmt.Sprintf("; backlog %s", thousands(float64(r.BacklogAfter5s)))
		} else {
			s += "; no backlog"
		}
		if r.OfferedPerSec < 0.95*float64(r.Jobs)/r.Seconds {
			s += fmt.Sprintf("; offered only %s/s", thousands(r.OfferedPerSec))
		}
		return s
	case w == "submit":
		return fmt.Sprintf("p50 %s ms, p99 %s ms", num(r.P50Ms), num(r.P99Ms))
	}
	return thousands(r.Value) + "/s"
}

func brief(w workload, r result) string {
	if r.Error != "" {
		return "ERROR " + r.Error
	}
	return cell(w.name, r)
}

func writeMarkdown(out io.Writer, rep report) {
	fmt.Fprintf(out, "Side by side, %s; %s; median of %d run(s).\n\n", rep.Date, rep.Machine, rep.Runs)
	fmt.Fprint(out, "| system |")
	for _, w := range rep.Workloads {
		fmt.Fprintf(out, " %s (%s) |", w, unitOf(w))
	}
	fmt.Fprint(out, "\n|---|")
	fmt.Fprint(out, strings.Repeat("---|", len(rep.Workloads)))
	fmt.Fprintln(out)
	for _, s := range rep.Systems {
		fmt.Fprintf(out, "| %s |", s)
		for _, w := range rep.Workloads {
			fmt.Fprintf(out, " %s |", cell(w, rep.Median[s+"/"+w]))
		}
		fmt.Fprintln(out)
	}
	for _, s := range []string{"jq-remote", "jq-all", "jq-embedded"} {
		if !slices.Contains(rep.Systems, s) || !slices.Contains(rep.Systems, "river") {
			continue
		}
		fmt.Fprintf(out, "| %s ÷ river |", s)
		for _, w := range rep.Workloads {
			if v, ok := rep.JQOverRiver[s+"/"+w]; ok {
				fmt.Fprintf(out, " %s× |", num(v))
			} else {
				fmt.Fprint(out, " — |")
			}
		}
		fmt.Fprintln(out)
	}
	fmt.Fprintln(out, "\nRatios are of the headline: throughput (higher is better for jq) and, for submit, p50 latency (lower is better for jq).")

	fmt.Fprintln(out, "\nCPU in cores over each measured interval (compare = this process, River's and Asynq's workers included; postgres and redis = every process of the instance), and Postgres WAL bytes per job (cluster-wide):")
	fmt.Fprintln(out, "\n| workload | system | compare | jq processes | postgres | redis | WAL B/job |")
	fmt.Fprintln(out, "|---|---|---|---|---|---|---|")
	for _, w := range rep.Workloads {
		for _, s := range rep.Systems {
			r := rep.Median[s+"/"+w]
			if r.Error != "" {
				fmt.Fprintf(out, "| %s | %s | error | | | | |\n", w, s)
				continue
			}
			var jqs []string
			for _, k := range slices.Sorted(maps.Keys(r.CPUCores)) {
				if strings.HasPrefix(k, "jq-") {
					jqs = append(jqs, fmt.Sprintf("%s %s", strings.TrimPrefix(k, "jq-"), num(r.CPUCores[k])))
				}
			}
			wal := "—"
			if r.WALBytesPerJob > 0 {
				wal = thousands(r.WALBytesPerJob)
			}
			jq := strings.Join(jqs, ", ")
			if jq == "" {
				jq = "—"
			}
			fmt.Fprintf(out, "| %s | %s | %s | %s | %s | %s | %s |\n", w, s, num(r.CPUCores["compare"]), jq,
				num(r.CPUCores["postgres"]), num(r.CPUCores["redis"]), wal)
		}
	}
	var errs []string
	for _, r := range rep.All {
		if r.Error != "" {
			errs = append(errs, fmt.Sprintf("- run %d %s %s: %s", r.Run, r.Workload, r.System, r.Error))
		}
	}
	if len(errs) > 0 {
		fmt.Fprintln(out, "\nErrors:")
		fmt.Fprintln(out, strings.Join(errs, "\n"))
	}
}

// num prints a figure with 3 significant digits or so.
func num(f float64) string {
	switch {
	case f >= 100:
		return fmt.Sprintf("%.0f", f)
	case f >= 10:
		return fmt.Sprintf("%.1f", f)
	default:
		return fmt.Sprintf("%.2f", f)
	}
}

func thousands(f float64) string {
	n := int64(f + 0.5)
	s := fmt.Sprint(n)
	var b strings.Builder
	for i, c := range s {
		if i > 0 && (len(s)-i)%3 == 0 {
			b.WriteByte(',')
		}
		b.WriteRune(c)
	}
	return b.String()
}
