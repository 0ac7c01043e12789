package main

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"time"
)

// result is one workload run on one system. Value is the workload's headline: jobs/s for batch and
// drain, done/s for the rates, p50 milliseconds for submit.
type result struct {
	System   string `json:"system"`
	Workload string `json:"workload"`
	Run      int    `json:"run"`
	Error    string `json:"error,omitempty"`

	Value   float64 `json:"value"`
	Jobs    int     `json:"jobs"`
	Seconds float64 `json:"seconds"` // the interval Value is measured over

	P50Ms float64 `json:"p50_ms,omitempty"` // submit: call latency; rate: submit→start
	P99Ms float64 `json:"p99_ms,omitempty"`

	// Rates only.
	OfferedPerSec  float64            `json:"offered_per_sec,omitempty"`   // achieved: jobs sent ÷ (last send − first)
	SendLateP99Ms  float64            `json:"send_late_p99_ms,omitempty"`  // how far behind its scheduled time a send started
	SubmitErrors   int64              `json:"submit_errors,omitempty"`     // failed inserts (not retried)
	BacklogAfter5s int                `json:"backlog_after_5s"`            // unfinished jobs 5 s after the offer ended
	NotFinished    int                `json:"not_finished,omitempty"`      // still unfinished when the collection gave up
	LatencyOfJobs  int                `json:"latency_of_jobs,omitempty"`   // completed jobs the percentiles cover
	CPUCores       map[string]float64 `json:"cpu_cores"`                   // per process group over the measured interval
	WALBytesPerJob float64            `json:"wal_bytes_per_job,omitempty"` // Postgres systems only; cluster-wide WAL
}

type workload struct {
	name string
	unit string // how Value reads
	run  func(ctx context.Context, cfg *config, s system, r *result) error
}

var workloads = []workload{
	{"batch", "jobs/s", runBatch},
	{"drain", "jobs/s", runDrain},
	{"rate100", "done/s", func(ctx context.Context, cfg *config, s system, r *result) error {
		return runRate(ctx, cfg, s, r, 100)
	}},
	{"rate1000", "done/s", func(ctx context.Context, cfg *config, s system, r *result) error {
		return runRate(ctx, cfg, s, r, 1000)
	}},
	{"rate5000", "done/s", func(ctx context.Context, cfg *config, s system, r *result) error {
		return runRate(ctx, cfg, s, r, 5000)
	}},
	{"submit", "p50 ms", runSubmit},
}

// measure brackets an interval with CPU and WAL readings.
type measure struct {
	cfg *config
	s   system
	cpu cpuSnapshot
	wal int64
}

func startMeasure(ctx context.Context, cfg *config, s system) *measure {
	m := &measure{cfg: cfg, s: s, cpu: takeCPU(s.Processes())}
	if s.UsesPostgres() {
		m.wal, _ = walLSN(ctx, cfg.pgBase)
	}
	return m
}

func (m *measure) finish(ctx context.Context, r *result, jobs int) {
	r.CPUCores = cpuCores(m.cpu, takeCPU(m.s.Processes()))
	if m.s.UsesPostgres() && jobs > 0 {
		if wal, err := walLSN(ctx, m.cfg.pgBase); err == nil {
			r.WALBytesPerJob = float64(int64(float64(wal-m.wal)/float64(jobs)*10+0.5)) / 10
		}
	}
}

// runBatch: bulk insert, nothing consuming.
func runBatch(ctx context.Context, cfg *config, s system, r *result) error {
	if err := s.StartIdle(ctx); err != nil {
		return err
	}
	m := startMeasure(ctx, cfg, s)
	t0 := time.Now()
	if err := s.BulkInsert(ctx, cfg.jobs); err != nil {
		return err
	}
	el := time.Since(t0)
	m.finish(ctx, r, cfg.jobs)
	r.Jobs, r.Seconds, r.Value = cfg.jobs, el.Seconds(), float64(cfg.jobs)/el.Seconds()
	return nil
}

// runDrain: bulk insert with no worker, then start the workers and time first start → last
// completion from the system's own stamps.
func runDrain(ctx context.Context, cfg *config, s system, r *result) error {
	if err := s.StartIdle(ctx); err != nil {
		return err
	}
	if err := s.BulkInsert(ctx, cfg.jobs); err != nil {
		return err
	}
	m := startMeasure(ctx, cfg, s)
	if err := s.StartWorkers(ctx); err != nil {
		return err
	}
	start := time.Now()
	deadline := start.Add(cfg.drainTimeout)
	for {
		n, err := s.Completed(ctx)
		if err != nil {
			return err
		}
		if n >= cfg.jobs {
			break
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("drain: %d of %d jobs completed after %s", n, cfg.jobs, cfg.drainTimeout)
		}
		time.Sleep(drainPoll(cfg.poll, cfg.jobs-n, n, time.Since(start)))
	}
	m.finish(ctx, r, cfg.jobs)
	t, err := s.Timings(ctx, time.Time{}, time.Time{})
	if err != nil {
		return err
	}
	el := t.LastDone.Sub(t.FirstStart)
	r.Jobs, r.Seconds, r.Value = len(t.Waits), el.Seconds(), float64(len(t.Waits))/el.Seconds()
	return nil
}

// runRate offers rate single inserts per second, open loop: send i is due at t0 + i/rate whatever
// happened to the sends before it, from cfg.submitters goroutines.
func runRate(ctx context.Context, cfg *config, s system, r *result, rate int) error {
	if err := s.StartIdle(ctx); err != nil {
		return err
	}
	if err := s.StartWorkers(ctx); err != nil {
		return err
	}
	time.Sleep(time.Second) // let every system's workers settle into their idle loop
	total := int(float64(rate) * cfg.rateDuration.Seconds())
	m := startMeasure(ctx, cfg, s)
	t0 := time.Now()
	window := t0.Add(cfg.rateDuration)
	if p, ok := s.(profiler); ok && cfg.profileDir != "" && rate == 1000 {
		go p.profile(ctx, cfg.rateDuration, cfg.profileDir, "rate1000")
	}
	var next, errs, unsent atomic.Int64
	late := make([]time.Duration, 0, total)
	var lateMu sync.Mutex
	var wg sync.WaitGroup
	for range cfg.submitters {
		wg.Go(func() {
			for ctx.Err() == nil {
				i := int(next.Add(1)) - 1
				if i >= total {
					return
				}
				due := t0.Add(time.Duration(float64(i) / float64(rate) * float64(time.Second)))
				time.Sleep(time.Until(due))
				sent := time.Now()
				if sent.After(window) { // the offer ends with the window: what the submitters could not send is not sent
					unsent.Add(1)
					continue
				}
				lateMu.Lock()
				late = append(late, sent.Sub(due))
				lateMu.Unlock()
				cctx, cancel := context.WithTimeout(ctx, 10*time.Second)
				if err := s.InsertOne(cctx); err != nil {
					errs.Add(1)
				}
				cancel()
			}
		})
	}
	wg.Wait()
	offerEnd := time.Now()
	m.finish(ctx, r, total-int(unsent.Load()))

	time.Sleep(time.Until(offerEnd.Add(5 * time.Second)))
	backlog, err := s.Unfinished(ctx)
	if err != nil {
		return err
	}
	r.BacklogAfter5s = backlog
	// Collect the latency of every job, the backlog's included, unless it takes too long.
	deadline := time.Now().Add(cfg.drainTimeout)
	for backlog > 0 && time.Now().Before(deadline) {
		time.Sleep(cfg.poll)
		if backlog, err = s.Unfinished(ctx); err != nil {
			return err
		}
	}
	r.NotFinished = backlog
	t, err := s.Timings(ctx, t0, window)
	if err != nil {
		return err
	}
	r.Jobs, r.Seconds = total, cfg.rateDuration.Seconds()
	r.Value = float64(t.DoneInWindow) / cfg.rateDuration.Seconds()
	r.OfferedPerSec = float64(total-int(unsent.Load())) / cfg.rateDuration.Seconds()
	r.SendLateP99Ms = ms(percentile(late, 99))
	r.SubmitErrors = errs.Load()
	r.LatencyOfJobs = len(t.Waits)
	r.P50Ms, r.P99Ms = ms(percentile(t.Waits, 50)), ms(percentile(t.Waits, 99))
	return nil
}

// runSubmit: one client, sequential single inserts, nothing consuming.
func runSubmit(ctx context.Context, cfg *config, s system, r *result) error {
	if err := s.StartIdle(ctx); err != nil {
		return err
	}
	lat := make([]time.Duration, 0, cfg.submits)
	m := startMeasure(ctx, cfg, s)
	t0 := time.Now()
	for range cfg.submits {
		t := time.Now()
		if err := s.InsertOne(ctx); err != nil {
			return err
		}
		lat = append(lat, time.Since(t))
	}
	r.Seconds = time.Since(t0).Seconds()
	m.finish(ctx, r, cfg.submits)
	r.Jobs = cfg.submits
	r.P50Ms, r.P99Ms = ms(percentile(lat, 50)), ms(percentile(lat, 99))
	r.Value = r.P50Ms
	return nil
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

// drainPoll is the pause before the next completion count of a drain: half the time the remaining
// jobs should take at the rate so far, between poll and 2 s. The count is a scan of the system's
// job table on the Postgres being measured — the harness's own cost, which a fixed 200 ms poll made
// a large share of a drain's Postgres CPU (and a larger one for jq's wider table). The headline
// comes from the systems' own stamps, so the poll only decides when the harness looks.
func drainPoll(poll time.Duration, left, done int, elapsed time.Duration) time.Duration {
	if done <= 0 || elapsed <= 0 {
		return poll
	}
	eta := time.Duration(float64(left) / (float64(done) / elapsed.Seconds()) * float64(time.Second))
	return min(max(eta/2, poll), 2*time.Second)
}
