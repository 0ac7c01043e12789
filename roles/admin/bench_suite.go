package admin

import (
	"encoding/json"
	"errors"
	"fmt"
	"text/tabwriter"
	"time"

	jqv1 "github.com/jq-dev/jq/api/gen/jq/v1"
)

// SuiteRow is one workload of `bench --suite`.
type SuiteRow struct {
	Workload string       `json:"workload"`
	Report   *BenchReport `json:"report"`
}

// runSuite runs jq's rows of bench/compare against a running server and its workers: the same
// workloads and sizes, jq alone (docs/performance.md).
func (c *BenchCmd) runSuite(re *runEnv) error {
	cl, err := re.Client()
	if err != nil {
		return err
	}
	jobs := c.Jobs
	window := c.Duration
	if window <= 0 {
		window = 20 * time.Second
	}
	base := BenchCmd{Queue: c.Queue, Type: c.Type, PayloadSize: c.PayloadSize, WaitTimeout: c.WaitTimeout}
	var rows []SuiteRow
	step := func(name string, cmd BenchCmd) (*BenchReport, error) {
		fmt.Fprintf(re.Stderr, "bench: %s\n", name)
		rep, err := cmd.run(re)
		if err != nil {
			return nil, fmt.Errorf("bench %s: %w", name, err)
		}
		rows = append(rows, SuiteRow{Workload: name, Report: rep})
		return rep, nil
	}

	// batch, then drain: the inserts with no worker taking the queue's jobs, then the backlog run off.
	queueReq := func(paused bool) error {
		var err error
		if paused {
			_, err = request(re.ctx, re.globals.Timeout, cl.API().Queues.PauseQueue, &jqv1.PauseQueueRequest{Name: c.Queue})
		} else {
			_, err = request(re.ctx, re.globals.Timeout, cl.API().Queues.ResumeQueue, &jqv1.ResumeQueueRequest{Name: c.Queue})
		}
		return err
	}
	if err := queueReq(true); err != nil {
		return fmt.Errorf("bench: pause queue %s for the batch: %w", c.Queue, err)
	}
	batch := base
	batch.Jobs, batch.Batch, batch.Concurrency, batch.NoWait = jobs, 1000, 4, true
	rep, err := step("batch", batch)
	if rerr := queueReq(false); rerr != nil {
		return errors.Join(err, fmt.Errorf("bench: resume queue %s: %w", c.Queue, rerr))
	}
	if err != nil {
		return err
	}
	drain := base
	drain.Collect, drain.window = rep.RunID, rep.window
	if _, err := step("drain", drain); err != nil {
		return err
	}
	for _, rate := range []int{1000, 5000} {
		r := base
		r.Rate, r.Duration, r.Concurrency, r.Batch = rate, window, 256, 1
		if _, err := step(fmt.Sprintf("rate%d", rate), r); err != nil {
			return err
		}
	}
	submit := base
	submit.Jobs, submit.Concurrency, submit.Batch, submit.NoWait = min(3000, jobs), 1, 1, true
	if _, err := step("submit", submit); err != nil {
		return err
	}
	return printSuite(re, rows)
}

func printSuite(re *runEnv, rows []SuiteRow) error {
	if re.globals.Output == "json" || re.globals.Output == "yaml" {
		b, err := json.MarshalIndent(rows, "", "  ")
		if err != nil {
			return err
		}
		_, err = fmt.Fprintln(re.Stdout, string(b))
		return err
	}
	tw := tabwriter.NewWriter(re.Stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "WORKLOAD\tFIGURE\tDETAIL")
	for _, r := range rows {
		p := r.Report
		switch r.Workload {
		case "batch":
			fmt.Fprintf(tw, "batch\t%.0f jobs/s\t%d jobs in SubmitJobs of %d from %d clients, %d errors\n", p.SubmitPerSec, p.Jobs, p.Batch, p.Clients, p.SubmitErrors)
		case "drain":
			fmt.Fprintf(tw, "drain\t%.0f jobs/s\t%d DONE, first start → last completion %.2f s; %d failed, %d unfinished\n", p.ExecPerSec, p.Completed, p.ExecSeconds, p.FinishedNotDone, p.NotFinished)
		case "submit":
			fmt.Fprintf(tw, "submit\tp50 %.2f ms\tp99 %.2f ms, %d sequential SubmitJob\n", p.SubmitRPCP50Ms, p.SubmitRPCP99Ms, p.Jobs)
		default:
			done := 0.0
			if p.EndToEndSeconds > 0 {
				done = float64(p.Completed) / (float64(p.Jobs) / float64(p.OfferedRate))
			}
			fmt.Fprintf(tw, "%s\t%.0f/s done\tsubmit→start p50 %.2f ms, p99 %.2f ms; %d of %d DONE, %d submit errors\n",
				r.Workload, done, p.WaitP50Ms, p.WaitP99Ms, p.Completed, p.Jobs, p.SubmitErrors)
		}
	}
	return tw.Flush()
}
