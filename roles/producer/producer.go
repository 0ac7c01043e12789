// Package producer is the producer component (seed 004; docs/producer.md): it scans a directory
// and submits one job per file version through the jq API, like any client, at a rate limit
// shared by every producer through Redis.
//
// A file version is its path, size and modification time (and content hash with
// producer.hash_content); its idempotency key is derived from them, so restarts, overlapping
// scans and several producers on one directory create one job per version — the server's
// idempotency keys decide, not local state. Within one process, versions already submitted are
// remembered, so a watch-mode re-scan sends only what changed.
package producer

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"sync"
	"time"

	"connectrpc.com/connect"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/trace"
	"go.opentelemetry.io/otel/trace/noop"
	"go.uber.org/zap"
	"golang.org/x/time/rate"

	jqv1 "github.com/jq-dev/jq/api/gen/jq/v1"
	"github.com/jq-dev/jq/api/gen/jq/v1/jqv1connect"
	"github.com/jq-dev/jq/config"
	"github.com/jq-dev/jq/internal/jobtrace"
)

// Limiter is a rate limit shared with other producers (store/redis.RateLimiter).
type Limiter interface {
	// Take asks for n events (1..Burst): 0 when admitted now, else how long to wait before asking
	// again.
	Take(ctx context.Context, n int) (time.Duration, error)
	Burst() int
}

// Metrics receives what the producer did (roles/telemetry.ProducerMetrics); nil: none.
type Metrics interface {
	Produced(queue string, n int)
	Scanned(n int)
	RateLimited(d time.Duration)
}

// Deps is what the producer needs; roles/wire.go builds it.
type Deps struct {
	Config *config.Producer
	Log    *zap.Logger
	// Jobs submits the jobs (the API client's job service).
	Jobs jqv1connect.JobServiceClient
	// Limiter is the shared rate limit; nil with a rate limit set: this process limits itself.
	Limiter Limiter
	Metrics Metrics
	// Progress receives the progress bar when it is a terminal (nil: log lines only).
	Progress io.Writer
	// SubmitTimeout bounds one submit call, also the last one a stop lets finish (default 30 s).
	SubmitTimeout time.Duration
	// Tracer starts one span per submitted batch (SpanBatch); nil: none. With Jobs built on a
	// client that propagates trace context, the server's submit span is its child and the jobs
	// carry its trace, so a job's assignment and execution spans join the batch's trace.
	Tracer trace.Tracer
}

// SpanBatch is the name of the producer's span of one submitted batch (seed 004: a span per
// produce).
const SpanBatch = "jq.producer.batch"

// Stats is what a producer did since it started.
type Stats struct {
	Passes    int // completed scans
	Scanned   int // files matching the globs, over all scans
	Submitted int // new jobs created
	Existing  int // file versions the server already had a job for
	Skipped   int // files that vanished, could not be read, or clashed with another spec
}

// Producer scans and submits.
type Producer struct {
	deps    Deps
	cfg     *config.Producer
	log     *zap.Logger
	match   *matcher
	local   *rate.Limiter // the limit when there is no shared one, or while Redis fails
	chunk   int           // jobs per submit call
	metrics Metrics

	mu       sync.Mutex
	stats    Stats
	known    map[string]string // path → idempotency key of the version submitted
	redisBad bool              // the shared limit failed last time (logged once per outage)
}

// New validates deps. It contacts nothing.
func New(deps Deps) (*Producer, error) {
	if deps.Config == nil || deps.Log == nil || deps.Jobs == nil {
		return nil, errors.New("producer: config, logger and job client are required")
	}
	cfg := deps.Config
	if cfg.ScanDir == "" {
		return nil, errors.New("producer: producer.scan_dir is not set (JQ_PRODUCER_SCAN_DIR or --scan-dir)")
	}
	m, err := newMatcher(cfg.IncludeGlobs, cfg.ExcludeGlobs, cfg.HighPriorityExts, cfg.HighPriority, cfg.DefaultPriority)
	if err != nil {
		return nil, fmt.Errorf("producer: %w", err)
	}
	if deps.SubmitTimeout <= 0 {
		deps.SubmitTimeout = 30 * time.Second
	}
	p := &Producer{deps: deps, cfg: cfg, log: deps.Log, match: m, chunk: cfg.BatchSize, metrics: deps.Metrics,
		known: map[string]string{}}
	if p.metrics == nil {
		p.metrics = nopMetrics{}
	}
	if p.deps.Tracer == nil {
		p.deps.Tracer = noop.NewTracerProvider().Tracer("")
	}
	if cfg.RateLimitPerSec > 0 {
		burst := Burst(cfg.RateLimitPerSec)
		if deps.Limiter != nil {
			burst = deps.Limiter.Burst()
		}
		p.chunk = min(p.chunk, burst)
		p.local = rate.NewLimiter(rate.Limit(cfg.RateLimitPerSec), burst)
	}
	return p, nil
}

// Burst is the most jobs a rate limit of perSec admits at once: a tenth of a second's worth (at
// least one job), so that over any few seconds the submissions stay within a few percent of the
// limit. The shared limiter (roles/wire.go) and the process's own are built with it.
func Burst(perSec float64) int { return max(1, int(perSec/10)) }

// Stats returns what the producer did so far.
func (p *Producer) Stats() Stats {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.stats
}

// Run scans and submits until ctx ends (watch mode), or once with producer.once. A stop lets the
// submit call in progress finish, so nothing is half-done; the files not reached are found by the
// next run. In once mode an error (the queue does not exist, the server refuses the credentials,
// a file could not be submitted) is returned; in watch mode a failed pass is logged and retried at
// the next interval, unless the server refuses the producer outright.
func (p *Producer) Run(ctx context.Context) error {
	for {
		err := p.pass(ctx)
		switch {
		case ctx.Err() != nil:
			return nil //nolint:nilerr // stopped: a pass cut short is not a failure
		case p.cfg.Once:
			return err
		case err != nil && fatal(err):
			return err
		case err != nil:
			p.log.Warn("scan pass failed; retrying at the next interval", zap.Error(err),
				zap.Duration("interval", p.cfg.ScanInterval()))
		}
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(p.cfg.ScanInterval()):
		}
	}
}

// pass is one scan and the submission of what it found.
func (p *Producer) pass(ctx context.Context) error {
	start := time.Now()
	files, st, err := scan(ctx, p.cfg.ScanDir, p.match, p.cfg.HashContent, func(path string, err error) {
		p.log.Warn("skipping a file that cannot be read", zap.String("path", path), zap.Error(err))
	})
	if err != nil {
		return err
	}
	p.metrics.Scanned(st.seen)
	p.mu.Lock()
	p.stats.Scanned += st.seen
	p.stats.Skipped += st.skipped
	todo := files[:0:0]
	for _, f := range files {
		if p.known[f.path] != f.key {
			todo = append(todo, f)
		}
	}
	p.mu.Unlock()

	prog := newProgress(p.deps.Progress, p.log, p.cfg.LogEvery, st.seen, len(todo))
	defer prog.finish()
	prog.skipped(st.skipped)
	var firstErr error
	for len(todo) > 0 && ctx.Err() == nil {
		n := min(len(todo), p.chunk)
		batch := todo[:n]
		if err := p.admit(ctx, n); err != nil {
			break // stopping: nothing of this batch was sent
		}
		bctx, span := p.startBatch(ctx, n)
		created, existing, skipped, err := p.submit(bctx, batch)
		endBatch(span, created, existing, skipped, err)
		if err != nil {
			firstErr = err
			break
		}
		p.mu.Lock()
		p.stats.Submitted += created
		p.stats.Existing += existing
		p.stats.Skipped += skipped
		for _, f := range batch {
			p.known[f.path] = f.key
		}
		p.mu.Unlock()
		p.metrics.Produced(p.cfg.Queue, created)
		prog.add(created, existing, skipped)
		todo = todo[n:]
	}
	if firstErr == nil && ctx.Err() == nil {
		p.mu.Lock()
		p.stats.Passes++
		s := p.stats
		p.mu.Unlock()
		p.log.Info("scan pass done", zap.String("dir", p.cfg.ScanDir), zap.Int("files", st.seen),
			zap.Int("new_jobs", prog.created), zap.Int("already_submitted", prog.existing+(len(files)-prog.total)),
			zap.Int("skipped", prog.skippedN), zap.Duration("took", time.Since(start)),
			zap.Int("jobs_submitted_since_start", s.Submitted))
	}
	return firstErr
}

// admit waits until the rate limit admits n more jobs (the shared one, or this process's own while
// Redis fails). The wait is counted in jq_producer_rate_limited_seconds_total.
func (p *Producer) admit(ctx context.Context, n int) error {
	if p.local == nil {
		return nil
	}
	start := time.Now()
	defer func() {
		if d := time.Since(start); d > time.Millisecond {
			p.metrics.RateLimited(d)
		}
	}()
	for p.deps.Limiter != nil {
		wait, err := p.deps.Limiter.Take(ctx, n)
		if err != nil {
			if ctx.Err() != nil {
				return ctx.Err()
			}
			p.sharedLimitDown(err)
			break
		}
		p.sharedLimitUp()
		if wait == 0 {
			return nil
		}
		// Precise sleep until the limit admits the batch, plus a little jitter so producers that
		// were refused together do not all ask again at the same instant.
		wait += time.Duration(rand.Int64N(int64(min(wait/10, 5*time.Millisecond)) + 1))
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(wait):
		}
	}
	return p.local.WaitN(ctx, n)
}

func (p *Producer) sharedLimitDown(err error) {
	p.mu.Lock()
	first := !p.redisBad
	p.redisBad = true
	p.mu.Unlock()
	if first {
		p.log.Warn("shared rate limit unreachable: this producer limits itself to producer.rate_limit_per_sec alone until Redis is back",
			zap.Error(err))
	}
}

func (p *Producer) sharedLimitUp() {
	p.mu.Lock()
	was := p.redisBad
	p.redisBad = false
	p.mu.Unlock()
	if was {
		p.log.Info("shared rate limit reachable again")
	}
}

// payload is what the producer puts in each job: the worker's file handler reads it.
type payload struct {
	Path string `json:"path"`
	Size int64  `json:"size"`
}

func (p *Producer) spec(f file) *jqv1.JobSpec {
	b, _ := json.Marshal(payload{Path: f.path, Size: f.size}) // cannot fail
	return &jqv1.JobSpec{Queue: p.cfg.Queue, Type: p.cfg.JobType, Payload: b, Priority: f.priority,
		IdempotencyKey: f.key, KeepResult: p.cfg.KeepResult}
}

// submit sends one batch. Transient failures (the server unreachable or shedding load) are retried
// until they pass or the producer stops; a stop lets a call in progress finish. A batch refused
// because one of its keys already names a job with another spec (the producer's settings changed
// since that version was submitted) is sent again job by job, and the clashing files are skipped
// with a warning.
func (p *Producer) submit(ctx context.Context, batch []file) (created, existing, skipped int, err error) {
	specs := make([]*jqv1.JobSpec, len(batch))
	for i, f := range batch {
		specs[i] = p.spec(f)
	}
	res, err := retry(ctx, p.log, func(cctx context.Context) (*connect.Response[jqv1.SubmitJobsResponse], error) {
		return p.deps.Jobs.SubmitJobs(cctx, connect.NewRequest(&jqv1.SubmitJobsRequest{Jobs: specs}))
	}, p.deps.SubmitTimeout)
	if connect.CodeOf(err) == connect.CodeFailedPrecondition {
		for i, s := range specs {
			one, err := retry(ctx, p.log, func(cctx context.Context) (*connect.Response[jqv1.SubmitJobResponse], error) {
				return p.deps.Jobs.SubmitJob(cctx, connect.NewRequest(&jqv1.SubmitJobRequest{Job: s}))
			}, p.deps.SubmitTimeout)
			switch {
			case connect.CodeOf(err) == connect.CodeFailedPrecondition:
				p.log.Warn("skipping a file whose version was submitted with other settings (queue, type or priority changed since)",
					zap.String("path", batch[i].path), zap.Error(err))
				skipped++
			case err != nil:
				return created, existing, skipped, fmt.Errorf("submit %s: %w", batch[i].path, err)
			case one.Msg.GetExisting():
				existing++
			default:
				created++
			}
		}
		return created, existing, skipped, nil
	}
	if err != nil {
		return 0, 0, 0, fmt.Errorf("submit %d jobs: %w", len(specs), err)
	}
	for _, r := range res.Msg.GetResults() {
		if r.GetExisting() {
			existing++
		} else {
			created++
		}
	}
	return created, existing, 0, nil
}

// retry calls f until it succeeds, fails for good, or ctx ends; each call runs on a context that a
// stop does not cancel (bounded by timeout), so a submit in progress is finished, never cut.
func retry[T any](ctx context.Context, log *zap.Logger, f func(context.Context) (T, error), timeout time.Duration) (T, error) {
	backoff := 100 * time.Millisecond
	for {
		cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), timeout)
		v, err := f(cctx)
		cancel()
		if err == nil || !transient(err) || ctx.Err() != nil {
			return v, err
		}
		log.Warn("submit failed; retrying", zap.Error(err), zap.Duration("backoff", backoff))
		select {
		case <-ctx.Done():
			return v, err
		case <-time.After(backoff):
		}
		backoff = min(2*backoff, 5*time.Second)
	}
}

// transient errors pass by themselves: the server unreachable, restarting or shedding load.
func transient(err error) bool {
	switch connect.CodeOf(err) {
	case connect.CodeUnavailable, connect.CodeResourceExhausted, connect.CodeDeadlineExceeded, connect.CodeAborted:
		return true
	}
	return false
}

// fatal errors stop a watch-mode producer: retrying at the next interval cannot help.
func fatal(err error) bool {
	switch connect.CodeOf(err) {
	case connect.CodeUnauthenticated, connect.CodePermissionDenied, connect.CodeNotFound, connect.CodeInvalidArgument:
		return true
	}
	return false
}

type nopMetrics struct{}

func (nopMetrics) Produced(string, int)      {}
func (nopMetrics) Scanned(int)               {}
func (nopMetrics) RateLimited(time.Duration) {}

// Attributes of SpanBatch besides jobtrace's.
const (
	attrCreated       = attribute.Key("jq.producer.created")
	attrExistingCount = attribute.Key("jq.producer.existing")
	attrSkipped       = attribute.Key("jq.producer.skipped")
)

// startBatch begins the span of one batch of n jobs.
func (p *Producer) startBatch(ctx context.Context, n int) (context.Context, trace.Span) {
	return p.deps.Tracer.Start(ctx, SpanBatch, trace.WithSpanKind(trace.SpanKindProducer), trace.WithAttributes(
		jobtrace.AttrQueue.String(p.cfg.Queue), jobtrace.AttrJobType.String(p.cfg.JobType), jobtrace.AttrJobCount.Int(n)))
}

// endBatch records what the batch did and ends its span.
func endBatch(span trace.Span, created, existing, skipped int, err error) {
	if span.IsRecording() {
		span.SetAttributes(attrCreated.Int(created), attrExistingCount.Int(existing), attrSkipped.Int(skipped))
		if err != nil {
			jobtrace.Fail(span, "submit failed", err)
		}
	}
	span.End()
}
