package admin

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"text/tabwriter"
	"time"

	"google.golang.org/protobuf/types/known/timestamppb"

	jqv1 "github.com/jq-dev/jq/api/gen/jq/v1"
	"github.com/jq-dev/jq/client"
)

// BenchReport is what `jq --role=admin bench` measures. Latencies are
// submit→start: the job's started_at minus its created_at, both stamped by
// Postgres, so client and worker clocks play no part.
type BenchReport struct {
	RunID            string  `json:"run_id"`
	RunRef           string  `json:"run_ref,omitempty"` // the run id and its jobs' creation window, for --collect
	Queue            string  `json:"queue"`
	Type             string  `json:"type"`
	Jobs             int     `json:"jobs"`
	Clients          int     `json:"clients"`
	Batch            int     `json:"batch"`
	OfferedRate      int     `json:"offered_rate,omitempty"`
	PayloadBytes     int     `json:"payload_bytes"`
	SubmitErrors     int64   `json:"submit_errors"`
	SubmitSeconds    float64 `json:"submit_seconds"`
	SubmitPerSec     float64 `json:"submit_per_sec"`
	Completed        int     `json:"completed"`
	EndToEndSeconds  float64 `json:"end_to_end_seconds"`
	EndToEndPerSec   float64 `json:"end_to_end_per_sec"`
	ExecSeconds      float64 `json:"exec_seconds"`
	ExecPerSec       float64 `json:"exec_per_sec"`
	WaitP50Ms        float64 `json:"wait_p50_ms"`
	WaitP95Ms        float64 `json:"wait_p95_ms"`
	WaitP99Ms        float64 `json:"wait_p99_ms"`
	WaitMaxMs        float64 `json:"wait_max_ms"`
	SubmitRPCP50Ms   float64 `json:"submit_rpc_p50_ms"`
	SubmitRPCP99Ms   float64 `json:"submit_rpc_p99_ms"`
	NotFinished      int     `json:"not_finished"`
	FinishedNotDone  int     `json:"finished_not_done"`
	WaitedForWorkers bool    `json:"waited_for_workers"`

	window createdWindow // the jobs' creation times, when known
}

// Run submits the jobs, waits for them to finish (unless --no-wait), and
// prints the report.
func (c *BenchCmd) Run(re *runEnv) error {
	if c.Suite {
		return c.runSuite(re)
	}
	if c.Collect == "" && c.Jobs <= 0 && (c.Rate <= 0 || c.Duration <= 0) {
		return errors.New("bench: give --jobs N, or --rate R with --duration D")
	}
	if c.Concurrency < 1 || c.Batch < 1 || c.Batch > 1000 || c.PayloadSize < 0 {
		return errors.New("bench: want -c ≥ 1, --batch 1..1000, --payload-size ≥ 0")
	}
	rep, err := c.run(re)
	if err != nil {
		return err
	}
	return printBench(re, rep)
}

// run submits the jobs and, unless --no-wait, waits for them to finish.
func (c *BenchCmd) run(re *runEnv) (*BenchReport, error) {
	cl, err := re.Client()
	if err != nil {
		return nil, err
	}
	if c.Collect != "" {
		id, win, err := parseRunRef(c.Collect)
		if err != nil {
			return nil, err
		}
		if !c.window.from.IsZero() {
			win = c.window
		}
		rep := &BenchReport{RunID: id, Queue: c.Queue, Type: c.Type, WaitedForWorkers: true}
		if err := c.collect(re.ctx, cl, rep, win); err != nil {
			return nil, err
		}
		rep.Jobs = rep.Completed + rep.FinishedNotDone + rep.NotFinished
		return rep, nil
	}
	total := c.Jobs
	if c.Rate > 0 && c.Duration > 0 {
		total = int(float64(c.Rate) * c.Duration.Seconds())
	}
	rep := &BenchReport{RunID: newRunID(), Queue: c.Queue, Type: c.Type, Jobs: total, Clients: c.Concurrency,
		Batch: c.Batch, OfferedRate: c.Rate, PayloadBytes: c.PayloadSize, WaitedForWorkers: !c.NoWait}

	var submitted atomic.Int64
	start := re.now()
	progress := startLiveLine(re, 500*time.Millisecond, func() string {
		return fmt.Sprintf("bench: submitted %d/%d jobs, %s", submitted.Load(), total, re.now().Sub(start).Truncate(100*time.Millisecond))
	})
	rpcLat, submitDur, errs, ends := c.submit(re.ctx, cl, rep.RunID, total, re.globals.Timeout, &submitted)
	progress.stop()
	rep.SubmitErrors = errs
	rep.SubmitSeconds = submitDur.Seconds()
	rep.SubmitPerSec = float64(total-int(errs)) / submitDur.Seconds()
	rep.SubmitRPCP50Ms, rep.SubmitRPCP99Ms = ms(percentile(rpcLat, 50)), ms(percentile(rpcLat, 99))
	if errs > 0 {
		fmt.Fprintf(re.Stderr, "bench: %d submits failed\n", errs)
	}
	win, werr := runWindow(re.ctx, cl, ends, re.globals.Timeout)
	rep.window = win // for a later --collect of this run (bench --suite's drain)
	if werr == nil && !win.from.IsZero() {
		rep.RunRef = fmt.Sprintf("%s:%d-%d", rep.RunID, win.from.UnixMicro(), win.to.UnixMicro())
	}
	if !c.NoWait {
		start := re.now()
		progress := startLiveLine(re, 500*time.Millisecond, func() string {
			return fmt.Sprintf("bench: %d jobs submitted; waiting for the workers to finish them, %s", total-int(errs), re.now().Sub(start).Truncate(100*time.Millisecond))
		})
		err := werr
		if err == nil {
			err = c.collect(re.ctx, cl, rep, win)
		}
		progress.stop()
		if err != nil {
			return nil, err
		}
	}
	return rep, nil
}

func newRunID() string {
	b := make([]byte, 6)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

// createdWindow holds every job of a run by creation time: [from, to). Zero: unknown.
type createdWindow struct{ from, to time.Time }

// runWindow is the creation-time window of a run's jobs, from the first and last job each
// submitting client got accepted: one client's submits follow each other, so its jobs' creation
// times grow with them. The wait and the collection then walk the queue's creation-time index
// over that window only, however many other jobs the queue holds.
func runWindow(ctx context.Context, cl *client.Client, ends []string, timeout time.Duration) (createdWindow, error) {
	var w createdWindow
	for _, id := range ends {
		rctx, cancel := context.WithTimeout(ctx, timeout)
		j, err := cl.Get(rctx, id)
		cancel()
		if err != nil {
			return createdWindow{}, fmt.Errorf("bench: read job %s: %w", id, err)
		}
		if w.from.IsZero() || j.CreatedAt.Before(w.from) {
			w.from = j.CreatedAt
		}
		if end := j.CreatedAt.Add(time.Microsecond); end.After(w.to) {
			w.to = end
		}
	}
	return w, nil
}

// submit offers total jobs from c.Concurrency clients, as fast as possible or
// at c.Rate jobs/s, and returns the per-RPC latencies and the ids of each
// client's first and last accepted job.
func (c *BenchCmd) submit(ctx context.Context, cl *client.Client, runID string, total int, timeout time.Duration, submitted *atomic.Int64) ([]time.Duration, time.Duration, int64, []string) {
	job := client.Job{Queue: c.Queue, Type: c.Type, Payload: benchPayload(c.Type, c.PayloadSize)}
	opts := []client.Option{client.Labels(map[string]string{"bench_run": runID}), client.Timeout(time.Minute)}
	var next atomic.Int64
	var errs atomic.Int64
	var mu sync.Mutex
	var lat []time.Duration
	var ends []string
	start := time.Now()
	var interval time.Duration
	if c.Rate > 0 {
		interval = time.Duration(float64(time.Second) * float64(c.Batch) / float64(c.Rate))
	}
	var wg sync.WaitGroup
	for range c.Concurrency {
		wg.Go(func() {
			var mine []time.Duration
			var firstID, lastID string
			for ctx.Err() == nil {
				first := int(next.Add(int64(c.Batch))) - c.Batch
				if first >= total {
					break
				}
				n := min(c.Batch, total-first)
				if interval > 0 { // open-loop pacing: batch k is due at start + k·interval
					due := start.Add(time.Duration(first/c.Batch) * interval)
					if d := time.Until(due); d > 0 {
						select {
						case <-ctx.Done():
						case <-time.After(d):
						}
					}
				}
				rctx, cancel := context.WithTimeout(ctx, timeout)
				t0 := time.Now()
				var err error
				var got []client.Submitted
				if c.Batch == 1 {
					var one client.Submitted
					one, err = cl.Submit(rctx, job, opts...)
					got = []client.Submitted{one}
				} else {
					got, err = cl.SubmitMany(rctx, slices.Repeat([]client.Job{job}, n), opts...)
				}
				cancel()
				if err == nil && len(got) > 0 {
					if firstID == "" {
						firstID = got[0].ID
					}
					lastID = got[len(got)-1].ID
				}
				mine = append(mine, time.Since(t0))
				submitted.Add(int64(n))
				if err != nil {
					errs.Add(int64(n))
				}
			}
			mu.Lock()
			lat = append(lat, mine...)
			if firstID != "" {
				ends = append(ends, firstID, lastID)
			}
			mu.Unlock()
		})
	}
	wg.Wait()
	return lat, time.Since(start), errs.Load(), ends
}

func benchPayload(typ string, size int) []byte {
	if typ == "sleep" {
		return []byte(`{"ms":0}`)
	}
	p := make([]byte, size)
	for i := range p {
		p[i] = 'x'
	}
	return p
}

// collect waits until every job of the run has finished, then reads their
// timestamps page by page. With the run's creation-time window known, every
// listing walks that window of the queue's index; without it (--collect), the
// whole queue, and a listing may take as long as the whole wait.
func (c *BenchCmd) collect(ctx context.Context, cl *client.Client, rep *BenchReport, win createdWindow) error {
	labels := map[string]string{"bench_run": rep.RunID}
	deadline := time.Now().Add(c.WaitTimeout)
	// First wait for the run's newest job: newest first, the list finds it at the top of its index
	// at once. Only then ask for any unfinished job of the run (anyUnfinished), a walk over many
	// jobs: polled from the start, it took a core of the machine being measured.
	newest := win.apply(&jqv1.ListJobsRequest{Queue: c.Queue, Labels: labels, PageSize: 1})
	for {
		resp, err := request(ctx, c.WaitTimeout, cl.API().Jobs.ListJobs, newest)
		if err != nil {
			return err
		}
		if jobs := resp.GetJobs(); len(jobs) == 0 || finished(jobs[0].GetState()) {
			break
		}
		if !c.pause(ctx, deadline) {
			rep.NotFinished = -1 // counted below
			break
		}
	}
	for rep.NotFinished == 0 {
		more, err := c.anyUnfinished(ctx, cl, rep.RunID, win)
		if err != nil {
			return err
		}
		if !more {
			break
		}
		if !c.pause(ctx, deadline) {
			rep.NotFinished = -1
			break
		}
	}
	if ctx.Err() != nil {
		return ctx.Err()
	}
	var waits []time.Duration
	var first, last, firstStart time.Time
	token := ""
	for {
		resp, err := request(ctx, c.WaitTimeout, cl.API().Jobs.ListJobs, win.apply(&jqv1.ListJobsRequest{Queue: c.Queue, Labels: labels, PageSize: 1000, PageToken: token}))
		if err != nil {
			return err
		}
		for _, j := range resp.GetJobs() {
			created := j.GetCreatedAt().AsTime()
			if first.IsZero() || created.Before(first) {
				first = created
			}
			switch j.GetState() {
			case jqv1.JobState_JOB_STATE_DONE:
				rep.Completed++
				done := j.GetCompletedAt().AsTime()
				if done.After(last) {
					last = done
				}
				started := j.GetStartedAt().AsTime()
				if firstStart.IsZero() || started.Before(firstStart) {
					firstStart = started
				}
				waits = append(waits, started.Sub(created))
			case jqv1.JobState_JOB_STATE_FAILED, jqv1.JobState_JOB_STATE_DEAD_LETTERED:
				rep.FinishedNotDone++
			default:
				if rep.NotFinished < 0 {
					rep.NotFinished = 0
				}
				rep.NotFinished++
			}
		}
		token = resp.GetNextPageToken()
		if token == "" {
			break
		}
	}
	if rep.NotFinished < 0 {
		rep.NotFinished = 0
	}
	if rep.Completed > 0 {
		rep.EndToEndSeconds = last.Sub(first).Seconds()
		rep.EndToEndPerSec = float64(rep.Completed) / rep.EndToEndSeconds
		rep.ExecSeconds = last.Sub(firstStart).Seconds()
		rep.ExecPerSec = float64(rep.Completed) / rep.ExecSeconds
	}
	rep.WaitP50Ms = ms(percentile(waits, 50))
	rep.WaitP95Ms = ms(percentile(waits, 95))
	rep.WaitP99Ms = ms(percentile(waits, 99))
	rep.WaitMaxMs = ms(percentile(waits, 100))
	return nil
}

// parseRunRef reads --collect: a run id, or a run reference (run_ref: the id, a colon and the
// jobs' creation window in Unix microseconds, FROM-TO), which lets the wait walk that window only.
func parseRunRef(ref string) (string, createdWindow, error) {
	id, span, ok := strings.Cut(ref, ":")
	if !ok {
		return ref, createdWindow{}, nil
	}
	from, to, ok := strings.Cut(span, "-")
	f, ferr := strconv.ParseInt(from, 10, 64)
	t, terr := strconv.ParseInt(to, 10, 64)
	if !ok || ferr != nil || terr != nil || t <= f {
		return "", createdWindow{}, fmt.Errorf("bench: --collect %q: want a run id or a run_ref (ID:FROM-TO, Unix microseconds)", ref)
	}
	return id, createdWindow{from: time.UnixMicro(f), to: time.UnixMicro(t)}, nil
}

// pause waits between two polls of the wait; false once the deadline passed or ctx ended.
func (c *BenchCmd) pause(ctx context.Context, deadline time.Time) bool {
	if time.Now().After(deadline) {
		return false
	}
	select {
	case <-ctx.Done():
		return false
	case <-time.After(100 * time.Millisecond):
		return true
	}
}

// anyUnfinished reports whether a job of the run is still PENDING, ASSIGNED or RUNNING. With the
// window known it lists the window's unfinished jobs newest first — an index range, with no label
// filter that the server would have to bound — and looks for the run's label on them: jobs finish
// roughly in submit order, so while the run drains the first page holds one of its jobs, and once
// it has drained the walk finds none. Without the window it filters the whole queue by label.
func (c *BenchCmd) anyUnfinished(ctx context.Context, cl *client.Client, runID string, win createdWindow) (bool, error) {
	active := []jqv1.JobState{jqv1.JobState_JOB_STATE_PENDING, jqv1.JobState_JOB_STATE_ASSIGNED, jqv1.JobState_JOB_STATE_RUNNING}
	if win.from.IsZero() {
		resp, err := request(ctx, c.WaitTimeout, cl.API().Jobs.ListJobs, &jqv1.ListJobsRequest{
			Queue: c.Queue, States: active, Labels: map[string]string{"bench_run": runID}, PageSize: 1})
		if err != nil {
			return false, err
		}
		return len(resp.GetJobs()) > 0, nil
	}
	token := ""
	for {
		resp, err := request(ctx, c.WaitTimeout, cl.API().Jobs.ListJobs, win.apply(&jqv1.ListJobsRequest{
			Queue: c.Queue, States: active, PageSize: 100, PageToken: token}))
		if err != nil {
			return false, err
		}
		for _, j := range resp.GetJobs() {
			if j.GetLabels()["bench_run"] == runID {
				return true, nil
			}
		}
		if token = resp.GetNextPageToken(); token == "" {
			return false, nil
		}
	}
}

// apply narrows a listing to the window.
func (w createdWindow) apply(r *jqv1.ListJobsRequest) *jqv1.ListJobsRequest {
	if !w.from.IsZero() {
		r.CreatedAfter, r.CreatedBefore = timestamppb.New(w.from), timestamppb.New(w.to)
	}
	return r
}

func percentile(d []time.Duration, p float64) time.Duration {
	if len(d) == 0 {
		return 0
	}
	s := slices.Clone(d)
	slices.Sort(s)
	i := int(p/100*float64(len(s))+0.5) - 1
	return s[max(0, min(i, len(s)-1))]
}

func ms(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }

func printBench(re *runEnv, rep *BenchReport) error {
	if re.globals.Output == "json" || re.globals.Output == "yaml" {
		b, err := json.MarshalIndent(rep, "", "  ")
		if err != nil {
			return err
		}
		_, err = fmt.Fprintln(re.Stdout, string(b))
		return err
	}
	return benchTable(re.Stdout, rep)
}

func benchTable(w io.Writer, r *BenchReport) error {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	mode := "unary SubmitJob"
	if r.Batch > 1 {
		mode = fmt.Sprintf("SubmitJobs batches of %d", r.Batch)
	}
	fmt.Fprintf(tw, "run\t%s (queue %s, type %s, %d B payload)\n", r.RunID, r.Queue, r.Type, r.PayloadBytes)
	if r.RunRef != "" && !r.WaitedForWorkers {
		fmt.Fprintf(tw, "collect later\tbench --queue %s --collect %s\n", r.Queue, r.RunRef)
	}
	if r.Clients > 0 {
		fmt.Fprintf(tw, "submit\t%d jobs, %d clients, %s\n", r.Jobs, r.Clients, mode)
		fmt.Fprintf(tw, "submit throughput\t%.0f jobs/s (%.2f s, %d errors; RPC p50 %.2f ms, p99 %.2f ms)\n",
			r.SubmitPerSec, r.SubmitSeconds, r.SubmitErrors, r.SubmitRPCP50Ms, r.SubmitRPCP99Ms)
	}
	if r.WaitedForWorkers {
		fmt.Fprintf(tw, "end-to-end throughput\t%.0f jobs/s (%d DONE in %.2f s; %d failed, %d unfinished)\n",
			r.EndToEndPerSec, r.Completed, r.EndToEndSeconds, r.FinishedNotDone, r.NotFinished)
		fmt.Fprintf(tw, "execution throughput\t%.0f jobs/s (first start → last completion, %.2f s)\n", r.ExecPerSec, r.ExecSeconds)
		fmt.Fprintf(tw, "submit→start latency\tp50 %.2f ms  p95 %.2f ms  p99 %.2f ms  max %.2f ms\n", r.WaitP50Ms, r.WaitP95Ms, r.WaitP99Ms, r.WaitMaxMs)
	}
	return tw.Flush()
}

// finished reports whether a job in state st will not change without an operator.
func finished(st jqv1.JobState) bool {
	switch st {
	case jqv1.JobState_JOB_STATE_DONE, jqv1.JobState_JOB_STATE_FAILED, jqv1.JobState_JOB_STATE_DEAD_LETTERED:
		return true
	}
	return false
}
