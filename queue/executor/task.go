package executor

import (
	"context"
	"errors"
	"fmt"
	"runtime/debug"
	"slices"
	"sync/atomic"
	"time"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"

	"github.com/jq-dev/jq/internal/jobtrace"
	"github.com/jq-dev/jq/queue"
)

// Causes with which a job's context is cancelled.
var (
	errJobTimeout        = errors.New("job timeout exceeded")
	errCancelledByServer = errors.New("job cancelled by the server")
	errLeaseLost         = errors.New("lease lost: the job is no longer this worker's")
)

// lateAckWindow is how long an ack is retried when the assignment's deadline
// is unknown or already looks past.
const lateAckWindow = 5 * time.Second

// maxErrorBytes bounds a failure message (the server keeps 4 KiB).
const maxErrorBytes = 4 << 10

type taskState int

const (
	stateQueued    taskState = iota // prefetched: waits for a slot, holds none
	stateRunning                    // holds a slot, handler running
	stateReporting                  // slot released, report queued
	stateDone                       // finished or dropped
)

// task is one held lease. Its fields are guarded by Executor.mu.
type task struct {
	job    *queue.Job
	lease  Lease
	state  taskState
	cancel context.CancelCauseFunc // stateRunning
	// cancelCause is a cancellation that arrived while the task waited for a slot.
	cancelCause error
	// fenced: cancelled because the lease went unrenewed (fence.go).
	fenced    bool
	abandoned bool // the outcome must not be reported
	// ackTimer acknowledges the start if the handler is still running after AckDelay; a job that
	// ends sooner is acknowledged by its report (the server records RUNNING and the outcome
	// together). ackQueued: the ack was handed to the ack batcher.
	ackTimer  *time.Timer
	ackQueued bool
	ackBy     time.Time // when the start must be acknowledged by
	// probe: the job is its queue's half-open breaker's probe (set and read by its goroutine).
	probe bool
	// startedAt is when the handler started, as time since Executor.epoch (0: not yet). Atomic:
	// the ack and report batchers read it when they send.
	startedAt atomic.Int64
	// sender and progress: where the handler's queue.Progress goes (progress.go); progress is
	// nil until the handler first reports.
	sender   *progressSender
	progress atomic.Pointer[progressState]
}

// startedAgo is how long ago t's handler started (0: not started).
func (e *Executor) startedAgo(t *task) time.Duration {
	s := t.startedAt.Load()
	if s == 0 {
		return 0
	}
	return max(time.Since(e.epoch)-time.Duration(s), 0)
}

// ReportProgress implements queue.ProgressReporter for the task's handler.
func (t *task) ReportProgress(percent int, message string) { t.sender.report(t, percent, message) }

type reportItem struct {
	t   *task
	rep Report
}

func (e *Executor) jobLog(t *task) jobLogger { return jobLogger{e.log, t} }

// jobLogger writes entries with a job's fields, built only for an entry its level lets through:
// a zap.Logger.With per job (three per job on the hot path) was 14 % of a worker's CPU in a
// drain, for entries that are almost never written.
type jobLogger struct {
	log *zap.Logger
	t   *task
}

func (l jobLogger) Debug(msg string, fields ...zap.Field) { l.write(zapcore.DebugLevel, msg, fields) }
func (l jobLogger) Info(msg string, fields ...zap.Field)  { l.write(zapcore.InfoLevel, msg, fields) }
func (l jobLogger) Warn(msg string, fields ...zap.Field)  { l.write(zapcore.WarnLevel, msg, fields) }
func (l jobLogger) Error(msg string, fields ...zap.Field) { l.write(zapcore.ErrorLevel, msg, fields) }

func (l jobLogger) write(level zapcore.Level, msg string, fields []zap.Field) {
	ce := l.log.Check(level, msg)
	if ce == nil {
		return
	}
	t := l.t
	ce.Write(append([]zap.Field{zap.String("job_id", t.lease.JobID), zap.Int("attempt", t.lease.Attempt),
		zap.String("queue", t.job.Queue), zap.String("type", t.job.Type), jobtrace.JobLogField(t.job)}, fields...)...)
}

// accept takes one assignment off the stream: it claims a slot and starts the
// handler at once. The assignment is already this worker's in Postgres (the
// server committed it before sending it): no commit stands between a slot and
// its handler. The start is acknowledged only if the handler is still running
// after AckDelay (lazyAck); a refused ack cancels it.
func (e *Executor) accept(a *Assignment) {
	e.received.Add(1)
	if a.Job == nil || a.Job.ID == "" {
		e.log.Error("assignment without a job id ignored")
		return
	}
	a.Job.Attempt = a.Attempt
	t := &task{job: a.Job, lease: Lease{JobID: a.Job.ID, Attempt: a.Attempt}, ackBy: a.Deadline, sender: e.progress}
	log := e.jobLog(t)
	// The ack deadline is the server's, on the server's clock; the server
	// judges the ack, and the handler only starts once it accepted it. So a
	// deadline that looks past here (late delivery, or clock skew) bounds the
	// ack's retries but does not stop the ack itself.
	ackBy := a.Deadline
	if now := time.Now(); ackBy.IsZero() || ackBy.Before(now.Add(time.Second)) {
		if !ackBy.IsZero() {
			e.late.Add(1)
			log.Warn("assignment received at or after its ack deadline; acking anyway, the server decides",
				zap.Time("deadline", a.Deadline))
		}
		ackBy = now.Add(lateAckWindow)
	}
	t.ackBy = ackBy

	e.mu.Lock()
	if old := e.tasks[t.lease.JobID]; old != nil {
		if old.lease.Attempt == t.lease.Attempt {
			e.mu.Unlock()
			log.Warn("duplicate assignment ignored")
			return
		}
		// The server moved the job to a newer attempt: ours is stale.
		log.Warn("newer attempt of a held job; abandoning the old one", zap.Int("old_attempt", old.lease.Attempt))
		e.abandonLocked(old, errLeaseLost)
	}
	select {
	case e.slots <- struct{}{}:
	default:
		if len(e.queued) < e.opts.Prefetch {
			// Prefetched: it starts when a slot frees (startQueuedLocked). If that takes half the
			// way to its assignment deadline, its ack keeps the lease (the server then counts it
			// as started).
			t.state = stateQueued
			e.tasks[t.lease.JobID] = t
			e.queued = append(e.queued, t)
			e.active.Add(1)
			t.ackTimer = time.AfterFunc(max(time.Until(ackBy)/2, 0), func() { e.lazyAck(t, ackBy) })
			e.mu.Unlock()
			return
		}
		// The server sent more than our concurrency and prefetch: a protocol error. Report
		// the job failed (retryable) so it is not lost; never run it.
		t.state = stateReporting
		e.tasks[t.lease.JobID] = t
		e.mu.Unlock()
		e.protocolErrors.Add(1)
		msg := fmt.Sprintf("worker %s received an assignment beyond its concurrency of %d", e.opts.WorkerID, e.opts.Concurrency)
		log.Error("assignment beyond concurrency (protocol error); reporting it failed without running it",
			zap.Int("concurrency", e.opts.Concurrency))
		e.failed.Add(1)
		e.queueReport(t, Report{Lease: t.lease, Error: msg, Reason: ReasonError})
		return
	}
	e.tasks[t.lease.JobID] = t
	e.active.Add(1)
	e.startLocked(t)
	e.mu.Unlock()
}

// startLocked runs the handler of a task that holds a slot.
func (e *Executor) startLocked(t *task) {
	ctx, cancel := context.WithCancelCause(e.jobsBase)
	t.state = stateRunning
	t.cancel = cancel
	if t.cancelCause != nil { // cancelled by the server while it waited for a slot
		cancel(t.cancelCause)
	}
	if !t.ackQueued { // a prefetched job may have been acknowledged while it waited
		if t.ackTimer != nil {
			t.ackTimer.Stop()
		}
		// Well inside the deadline: a job still running then has been acknowledged.
		delay := min(e.opts.AckDelay, time.Until(t.ackBy)/2)
		t.ackTimer = time.AfterFunc(max(delay, 0), func() { e.lazyAck(t, t.ackBy) })
	}
	go e.execute(ctx, t)
}

// startQueuedLocked starts prefetched tasks while slots are free.
func (e *Executor) startQueuedLocked() {
	for len(e.queued) > 0 {
		t := e.queued[0]
		if t.state != stateQueued { // abandoned while it waited
			e.queued = e.queued[1:]
			continue
		}
		select {
		case e.slots <- struct{}{}:
		default:
			return
		}
		e.queued = e.queued[1:]
		e.startLocked(t)
	}
}

// lazyAck queues the ack of a job still running after AckDelay.
func (e *Executor) lazyAck(t *task, ackBy time.Time) {
	e.mu.Lock()
	if (t.state != stateRunning && t.state != stateQueued) || t.ackQueued || t.abandoned {
		e.mu.Unlock()
		return
	}
	t.ackQueued = true
	e.mu.Unlock()
	e.acks.add(t, ackBy)
}

func (e *Executor) sendAcks(ctx context.Context, ts []*task) ([]LeaseResult, error) {
	leases := make([]Lease, len(ts))
	for i, t := range ts {
		leases[i] = t.lease
		leases[i].StartedAgo = e.startedAgo(t)
	}
	res, err := e.conn.Ack(ctx, AckParams{WorkerID: e.opts.WorkerID, Leases: leases})
	e.noteCallError(err)
	return res, err
}

// ackDone handles the server's verdict on a running job's ack: a refused ack
// (the attempt is no longer this worker's) cancels the handler, and its outcome
// is not reported. A job that already finished is judged by its report.
func (e *Executor) ackDone(t *task, res LeaseResult, err error) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if (t.state != stateRunning && t.state != stateQueued) || (err == nil && res.OK) {
		return
	}
	e.acksRejected.Add(1)
	reason := res.Error
	if err != nil {
		reason = err.Error()
	}
	e.jobLog(t).Info("start not acknowledged by the server; stopping the job", zap.String("reason", reason))
	e.abandonLocked(t, errLeaseLost)
}

// execute runs the handler with the job's timeout and reports the outcome.
func (e *Executor) execute(ctx context.Context, t *task) {
	defer t.cancel(nil)
	n := e.running.Add(1)
	for m := e.maxRunning.Load(); n > m && !e.maxRunning.CompareAndSwap(m, n); m = e.maxRunning.Load() {
	}
	e.started.Add(1)
	e.breakerStart(t)
	timeout := t.job.Timeout
	if timeout <= 0 {
		timeout = queue.DefaultJobTimeout
	}
	ctx = queue.WithJobInfoReporter(ctx, queue.JobInfo{ID: t.job.ID, Attempt: t.lease.Attempt, Queue: t.job.Queue, Type: t.job.Type}, t)
	ctx, span := e.startSpan(ctx, t)
	ctx, cancel := context.WithTimeoutCause(ctx, timeout, errJobTimeout)
	start := time.Now()
	t.startedAt.Store(max(int64(start.Sub(e.epoch)), 1))
	res, herr := e.invoke(ctx, t)
	runtime := time.Since(start)
	cause := context.Cause(ctx)
	cancel()
	e.running.Add(-1)

	rep, done := e.outcome(t, res, herr, cause, timeout, runtime)
	// Before the report is queued: a breaker that opens tells the server (a heartbeat) as early
	// as it can.
	e.breakerFinish(t, done, rep)
	log := e.jobLog(t)
	e.mu.Lock()
	report := !t.abandoned && done.Outcome != OutcomeAbandoned
	if !report {
		done.Outcome = OutcomeAbandoned
		e.releaseLocked(t)
	} else {
		t.state = stateReporting
		<-e.slots // free the slot before the report can reach the server
		e.startQueuedLocked()
	}
	if t.ackTimer != nil {
		t.ackTimer.Stop() // the report acknowledges the start
	}
	e.mu.Unlock()
	endSpan(span, done)

	switch done.Outcome {
	case OutcomeAbandoned:
		e.abandoned.Add(1)
		// The handler's error text is job data (it may quote the payload or a
		// secret the job used): the report stores it, the log does not.
		log.Info("job outcome not reported", zap.Duration("runtime", runtime), zap.NamedError("cause", cause),
			zap.Bool("handler_error", herr != nil))
	case OutcomeSucceeded:
		e.succeeded.Add(1)
		log.Debug("job succeeded", zap.Duration("runtime", runtime), zap.Int("result_bytes", len(rep.Result)))
	default:
		e.failed.Add(1)
		// Not the error text: it is job data, shown by `jq job status`.
		log.Info("job failed", zap.String("reason", rep.Reason), zap.Bool("permanent", rep.Permanent),
			zap.Duration("runtime", runtime), zap.Int("error_bytes", len(rep.Error)))
	}
	if report {
		e.queueReport(t, rep)
		e.active.Done() // after queueing, so a stop's flush sees the report
	}
	if e.opts.OnJobDone != nil {
		e.opts.OnJobDone(done)
	}
}

// invoke calls the handler, turning a panic into an error.
func (e *Executor) invoke(ctx context.Context, t *task) (res []byte, err error) {
	defer func() {
		if r := recover(); r != nil {
			// The panic value may hold job data: the report carries it; the
			// log gets its type (a runtime error's text holds no data) and the stack.
			fields := []zap.Field{zap.String("panic_type", fmt.Sprintf("%T", r)), zap.ByteString("stack", debug.Stack())}
			if re, ok := r.(interface {
				error
				RuntimeError()
			}); ok { // runtime.Error
				fields = append(fields, zap.String("panic", re.Error()))
			}
			e.jobLog(t).Error("handler panicked", fields...)
			err = fmt.Errorf("handler panicked: %v", r)
		}
	}()
	return e.opts.Handler.Handle(ctx, t.job)
}

// outcome turns what the handler returned into a report.
func (e *Executor) outcome(t *task, res []byte, herr, cause error, timeout, runtime time.Duration) (Report, JobDone) {
	done := JobDone{Job: t.job, Attempt: t.lease.Attempt, Err: herr, Runtime: runtime}
	rep := Report{Lease: t.lease, Runtime: runtime}
	fail := func(reason, msg string, permanent bool) (Report, JobDone) {
		rep.Reason, rep.Error, rep.Permanent = reason, truncate(msg, maxErrorBytes), permanent
		done.Outcome, done.Reason = OutcomeFailed, reason
		return rep, done
	}
	switch {
	case errors.Is(cause, errLeaseLost):
		done.Outcome = OutcomeAbandoned
		return rep, done
	case herr != nil && errors.Is(cause, queue.ErrShutdown):
		// Cancelled after the grace period: the reaper settles it.
		done.Outcome = OutcomeAbandoned
		return rep, done
	case herr == nil && len(res) > e.opts.MaxResultBytes:
		return fail(ReasonOutputTooLarge,
			fmt.Sprintf("result of %d bytes exceeds the limit of %d bytes", len(res), e.opts.MaxResultBytes), true)
	case herr == nil:
		rep.Success, rep.Result = true, res
		done.Outcome = OutcomeSucceeded
		return rep, done
	case errors.Is(cause, errCancelledByServer):
		return fail(ReasonCancelled, "cancelled: "+herr.Error(), true)
	case errors.Is(cause, errFenced) && e.stopping.Load():
		// Stopping, and the server unreachable: a report would only hold up the exit by the
		// flush timeout. Like a job cut off by the grace period, the reaper settles it.
		done.Outcome = OutcomeAbandoned
		return rep, done
	case errors.Is(cause, errFenced):
		// Retryable: if the server still counts the lease as this worker's, the job runs again;
		// if it has moved on, the attempt fences this report off.
		return fail(ReasonLeaseExpired, errFenced.Error(), false)
	case errors.Is(cause, errJobTimeout):
		return fail(ReasonTimeout, fmt.Sprintf("job exceeded its timeout of %s: %v", timeout, herr), false)
	case errors.Is(herr, queue.ErrOutputTooLarge):
		return fail(ReasonOutputTooLarge, herr.Error(), true)
	default:
		rep.RetryAfter = queue.RetryAfterOf(herr) // 0 when permanent
		return fail(ReasonError, herr.Error(), queue.IsPermanent(herr))
	}
}

func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n-len("…")] + "…"
}

func (e *Executor) queueReport(t *task, rep Report) {
	e.reports.add(reportItem{t: t, rep: rep}, time.Now().Add(e.opts.ReportTimeout))
}

func (e *Executor) sendReports(ctx context.Context, items []reportItem) ([]LeaseResult, error) {
	reps := make([]Report, len(items))
	for i, it := range items {
		reps[i] = it.rep
		reps[i].StartedAgo = e.startedAgo(it.t)
	}
	res, err := e.conn.Report(ctx, ReportParams{WorkerID: e.opts.WorkerID, Reports: reps})
	e.noteCallError(err)
	return res, err
}

// reportDone releases the lease once the server has judged the report (or it
// was given up).
func (e *Executor) reportDone(it reportItem, res LeaseResult, err error) {
	e.mu.Lock()
	e.releaseLocked(it.t)
	e.mu.Unlock()
	log := e.jobLog(it.t)
	switch {
	case err != nil:
		e.reportsLost.Add(1)
		log.Error("report not delivered; the server's reaper will settle the job",
			zap.Bool("success", it.rep.Success), zap.Error(err))
	case !res.OK && res.Redelivered:
		// The first delivery's answer was lost, not (most likely) the report: not a rejection.
		e.reportsSettled.Add(1)
		log.Debug("report already settled: an earlier delivery whose answer was lost applied it",
			zap.String("reason", res.Error))
	case !res.OK:
		e.reportsRejected.Add(1)
		log.Info("report rejected by the server; dropping it", zap.String("reason", res.Error))
	}
}

// noteCallError reacts to errors that concern the registration itself.
func (e *Executor) noteCallError(err error) {
	switch {
	case err == nil:
	case errors.Is(err, ErrUnknownWorker):
		e.reregister()
	case errors.Is(err, ErrWorkerInactive):
		signal(e.hbNow)
	}
}

// releaseLocked forgets a task and gives back what it holds.
func (e *Executor) releaseLocked(t *task) {
	switch t.state {
	case stateDone:
		return
	case stateRunning:
		<-e.slots
		e.active.Done()
		defer e.startQueuedLocked()
	case stateQueued:
		e.active.Done()
		if i := slices.Index(e.queued, t); i >= 0 {
			e.queued = slices.Delete(e.queued, i, i+1)
		}
	}
	t.state = stateDone
	if e.tasks[t.lease.JobID] == t {
		delete(e.tasks, t.lease.JobID)
	}
	signal(e.capFreed)
}

// abandonLocked gives up a task whose lease is gone: a queued one is
// dropped, a running one is cancelled and its outcome will not be reported.
func (e *Executor) abandonLocked(t *task, cause error) {
	t.abandoned = true
	switch t.state {
	case stateQueued:
		e.releaseLocked(t)
		e.abandoned.Add(1)
	case stateRunning:
		t.cancel(cause)
	case stateReporting:
		// Its report is queued; the server judges it by attempt alone.
	}
	if e.tasks[t.lease.JobID] == t {
		delete(e.tasks, t.lease.JobID)
		signal(e.capFreed)
	}
}

// heldLeases lists every lease held: queued, running or awaiting its report.
func (e *Executor) heldLeases() []Lease {
	e.mu.Lock()
	defer e.mu.Unlock()
	out := make([]Lease, 0, len(e.tasks))
	for _, t := range e.tasks {
		out = append(out, t.lease)
	}
	return out
}

// cancelByServer cancels the handlers of the given jobs (CancelJob, or a
// lease the server no longer honours); their failure is reported as
// "cancelled" and the server judges it.
func (e *Executor) cancelByServer(ids []string, attempts map[string]int) {
	e.mu.Lock()
	defer e.mu.Unlock()
	for _, id := range ids {
		t := e.tasks[id]
		if t == nil {
			continue
		}
		if a, listed := attempts[id]; listed && a != t.lease.Attempt {
			continue // a newer attempt arrived after the heartbeat listed the old one
		}
		switch t.state {
		case stateQueued:
			t.cancelCause = errCancelledByServer
		case stateRunning:
			t.cancel(errCancelledByServer)
		default: // finished already: its report speaks
			continue
		}
		e.jobLog(t).Info("job cancelled by the server")
	}
}

// loseLeases abandons every queued and running job: the server declared the
// worker offline and failed them already.
func (e *Executor) loseLeases() {
	e.mu.Lock()
	defer e.mu.Unlock()
	for _, t := range e.tasks {
		if t.state == stateRunning || t.state == stateQueued {
			e.abandonLocked(t, errLeaseLost)
		}
	}
}

// dropQueued abandons prefetched jobs still waiting for a slot when the stop's
// grace period ends (the reaper gives them back).
func (e *Executor) dropQueued(cause error) {
	e.mu.Lock()
	defer e.mu.Unlock()
	for _, t := range e.tasks {
		if t.state == stateQueued {
			e.abandonLocked(t, cause)
		}
	}
}

// liveTasks reports which tasks still run holding their lease: only their progress is sent.
func (e *Executor) liveTasks(ts []*task) []bool {
	out := make([]bool, len(ts))
	e.mu.Lock()
	defer e.mu.Unlock()
	for i, t := range ts {
		out[i] = t.state == stateRunning && !t.abandoned && e.tasks[t.lease.JobID] == t
	}
	return out
}
