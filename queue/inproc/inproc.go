// Package inproc is the worker protocol without a transport: an executor.Conn that calls the
// engine of the same process. `jq --role=all` runs its worker on it when worker.server_addr is
// left at its default, so a job costs no HTTP/2 frames, protobuf encoding or loopback round trips
// between the executor and the engine — the same engine commands the API's WorkerService calls,
// with the same checks of what a worker sends, minus authentication: the caller is the process
// itself.
package inproc

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"sync"

	"github.com/jq-dev/jq/queue"
	"github.com/jq-dev/jq/queue/engine"
	"github.com/jq-dev/jq/queue/executor"
	"github.com/jq-dev/jq/store"
)

// Workers reads a worker's registration (store.Store has it).
type Workers interface {
	WorkerGet(ctx context.Context, id string) (*queue.Worker, error)
}

// Options configure a Conn.
type Options struct {
	Engine *engine.Engine
	// Workers answers the stream's check of the worker's status.
	Workers Workers
	// Registration is what a registration is told, as the API tells remote workers: the
	// heartbeat interval and the server's heartbeat timeout (the worker fences itself before it).
	Registration executor.Registration
}

// Conn is an executor.Conn over an engine in the same process.
type Conn struct {
	eng     *engine.Engine
	workers Workers
	reg     executor.Registration
}

var (
	_ executor.Conn         = (*Conn)(nil)
	_ executor.ProgressConn = (*Conn)(nil)
)

// New returns a Conn over o.Engine.
func New(o Options) *Conn {
	return &Conn{eng: o.Engine, workers: o.Workers, reg: o.Registration}
}

// Register registers the worker (RegisterWorker without a principal: authentication is off for
// the process itself).
func (c *Conn) Register(ctx context.Context, p executor.RegisterParams) (executor.Registration, error) {
	rp := store.WorkerRegisterParams{
		ID: p.WorkerID, Hostname: p.Hostname, Concurrency: min(p.Concurrency, executor.MaxConcurrency),
		Queues: p.Queues, Version: p.Version, Types: p.Types,
	}
	if err := rp.Validate(); err != nil {
		return executor.Registration{}, connErr("register worker", err)
	}
	if err := store.ValidateLabels("labels", p.Labels); err != nil {
		return executor.Registration{}, connErr("register worker", err)
	}
	if _, err := c.eng.WorkerRegister(ctx, rp); err != nil {
		return executor.Registration{}, connErr("register worker", err)
	}
	return c.reg, nil
}

// Stream opens an engine session for the worker, as StreamJobs does: refused for an OFFLINE or
// DRAINING worker, or a capacity or prefetch outside the registered concurrency.
func (c *Conn) Stream(ctx context.Context, p executor.StreamParams) (executor.Stream, error) {
	if err := store.ValidateWorkerID(p.WorkerID); err != nil {
		return nil, connErr("stream jobs", err)
	}
	w, err := c.workers.WorkerGet(ctx, p.WorkerID)
	if err != nil {
		return nil, connErr("stream jobs", err)
	}
	switch {
	case p.Prefetch < 0 || p.Prefetch > w.Concurrency:
		return nil, connErr("stream jobs", fmt.Errorf("%w: prefetch %d: want 0..%d (the registered concurrency)",
			queue.ErrInvalidArgument, p.Prefetch, w.Concurrency))
	case p.Capacity < 0 || p.Capacity > w.Concurrency+p.Prefetch:
		return nil, connErr("stream jobs", fmt.Errorf("%w: capacity %d: want 0..%d", queue.ErrInvalidArgument,
			p.Capacity, w.Concurrency+p.Prefetch))
	case w.Status == queue.WorkerOffline:
		return nil, connErr("stream jobs", fmt.Errorf("%w: worker %q is OFFLINE: register again", queue.ErrIllegalTransition, w.ID))
	case w.Status == queue.WorkerDraining:
		return nil, connErr("stream jobs", fmt.Errorf("%w: worker %q is DRAINING: it gets no new jobs", queue.ErrIllegalTransition, w.ID))
	}
	sctx, cancel := context.WithCancel(ctx)
	return &stream{ctx: sctx, cancel: cancel, eng: c.eng, sess: c.eng.OpenSessionPrefetch(w, p.Capacity, p.Prefetch)}, nil
}

// stream hands out what its session claims, one assignment per Recv.
type stream struct {
	ctx    context.Context
	cancel context.CancelFunc
	eng    *engine.Engine
	sess   *engine.Session

	mu      sync.Mutex // Recv is called from one goroutine; Close from another
	pending []*executor.Assignment
	closed  bool
}

func (s *stream) Recv() (*executor.Assignment, error) {
	s.mu.Lock()
	if len(s.pending) > 0 {
		a := s.pending[0]
		s.pending[0] = nil
		s.pending = s.pending[1:]
		s.mu.Unlock()
		return a, nil
	}
	s.mu.Unlock()
	jobs, err := s.sess.Next(s.ctx)
	if err != nil {
		if errors.Is(err, engine.ErrWorkerDraining) || (s.ctx.Err() != nil && s.isClosed()) {
			return nil, io.EOF // drained (FR-023), or closed by the worker
		}
		return nil, connErr("stream jobs", err)
	}
	deadline := s.eng.AssignmentDeadline()
	out := make([]*executor.Assignment, len(jobs))
	for i, j := range jobs {
		out[i] = &executor.Assignment{Job: j, Attempt: j.Attempt, Deadline: deadline}
	}
	s.mu.Lock()
	s.pending = append(s.pending, out[1:]...)
	s.mu.Unlock()
	return out[0], nil
}

func (s *stream) isClosed() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.closed
}

// Close ends the session: its claims stop, and the jobs it handed out stay with the worker (their
// reports settle them, the reaper recovers what is never reported).
func (s *stream) Close() error {
	s.mu.Lock()
	s.closed = true
	s.mu.Unlock()
	s.cancel()
	s.sess.Close()
	return nil
}

// Ack moves assigned jobs to RUNNING.
func (c *Conn) Ack(ctx context.Context, p executor.AckParams) ([]executor.LeaseResult, error) {
	ls, err := leases(p.WorkerID, len(p.Leases), func(i int) executor.Lease { return p.Leases[i] })
	if err != nil {
		return nil, connErr("ack jobs", err)
	}
	outs, err := c.eng.Ack(ctx, p.WorkerID, ls)
	if err != nil {
		return nil, connErr("ack jobs", err)
	}
	return leaseResults(outs), nil
}

// Report records outcomes, each checked as ReportJobs checks it (the store bounds the rest).
func (c *Conn) Report(ctx context.Context, p executor.ReportParams) ([]executor.LeaseResult, error) {
	ls, err := leases(p.WorkerID, len(p.Reports), func(i int) executor.Lease { return p.Reports[i].Lease })
	if err != nil {
		return nil, connErr("report jobs", err)
	}
	reports := make([]store.JobReportParams, len(p.Reports))
	for i, r := range p.Reports {
		if !r.Success && !store.ValidFailureReason(r.Reason) {
			return nil, connErr("report jobs", fmt.Errorf("%w: reports[%d]: failure reason %s: at most %d characters of a-z, 0-9 and _ (or empty)",
				queue.ErrInvalidArgument, i, queue.Excerpt(r.Reason), store.MaxFailureReasonLen))
		}
		reports[i] = store.JobReportParams{JobLease: ls[i], Success: r.Success, Result: r.Result, Error: r.Error,
			Reason: r.Reason, Permanent: r.Permanent, RetryAfter: r.RetryAfter, Runtime: r.Runtime}
	}
	outs, err := c.eng.Report(ctx, p.WorkerID, reports)
	if err != nil {
		return nil, connErr("report jobs", err)
	}
	return leaseResults(outs), nil
}

// Progress records how far running attempts got, checked as ReportProgress checks it; an update
// for a lease the worker no longer holds is only OK false in its result.
func (c *Conn) Progress(ctx context.Context, p executor.ProgressParams) ([]executor.LeaseResult, error) {
	ls, err := leases(p.WorkerID, len(p.Updates), func(i int) executor.Lease { return p.Updates[i].Lease })
	if err != nil {
		return nil, connErr("report progress", err)
	}
	updates := make([]store.JobProgressUpdate, len(ls))
	for i, u := range p.Updates {
		if err := queue.ValidateProgress(u.Percent, u.Message); err != nil {
			return nil, connErr("report progress", fmt.Errorf("updates[%d]: %w", i, err))
		}
		updates[i] = store.JobProgressUpdate{ID: ls[i].ID, Attempt: ls[i].Attempt, Percent: u.Percent, Message: u.Message}
	}
	outs, err := c.eng.Progress(ctx, p.WorkerID, updates)
	if err != nil {
		return nil, connErr("report progress", err)
	}
	return leaseResults(outs), nil
}

// Heartbeat records liveness and answers with the operator's command and the leases to stop.
func (c *Conn) Heartbeat(ctx context.Context, p executor.HeartbeatParams) (executor.HeartbeatReply, error) {
	if err := store.ValidateWorkerID(p.WorkerID); err != nil {
		return executor.HeartbeatReply{}, connErr("heartbeat", err)
	}
	if len(p.Running) > store.MaxDispatchBatch {
		return executor.HeartbeatReply{}, connErr("heartbeat", fmt.Errorf("%w: running: at most %d leases, got %d",
			queue.ErrInvalidArgument, store.MaxDispatchBatch, len(p.Running)))
	}
	held := make([]store.JobLease, len(p.Running))
	for i, l := range p.Running {
		held[i] = store.JobLease{ID: l.JobID, Attempt: l.Attempt, WorkerID: p.WorkerID}
	}
	a, err := c.eng.WorkerHeartbeat(ctx, store.WorkerHeartbeatParams{ID: p.WorkerID, Breakers: p.Breakers}, held)
	if err != nil {
		return executor.HeartbeatReply{}, connErr("heartbeat", err)
	}
	out := executor.HeartbeatReply{CancelJobIDs: a.Cancel}
	switch {
	case a.Shutdown:
		out.Command = executor.CommandShutdown
	case a.Drain:
		out.Command = executor.CommandDrain
	}
	return out, nil
}

// Deregister marks the worker OFFLINE.
func (c *Conn) Deregister(ctx context.Context, p executor.DeregisterParams) error {
	if err := store.ValidateWorkerID(p.WorkerID); err != nil {
		return connErr("deregister worker", err)
	}
	if err := c.eng.WorkerDeregister(ctx, p.WorkerID); err != nil {
		return connErr("deregister worker", err)
	}
	return nil
}

// leases converts n leases of one worker (an ack's, or a report's items).
func leases(workerID string, n int, at func(int) executor.Lease) ([]store.JobLease, error) {
	if err := store.ValidateWorkerID(workerID); err != nil {
		return nil, err
	}
	if n == 0 || n > executor.MaxBatch {
		return nil, fmt.Errorf("%w: want 1..%d items, got %d", queue.ErrInvalidArgument, executor.MaxBatch, n)
	}
	out := make([]store.JobLease, n)
	for i := range n {
		l := at(i)
		out[i] = store.JobLease{ID: l.JobID, Attempt: l.Attempt, WorkerID: workerID, StartedAgo: l.StartedAgo}
	}
	return out, nil
}

func leaseResults(outs []store.LeaseOutcome) []executor.LeaseResult {
	res := make([]executor.LeaseResult, len(outs))
	for i, o := range outs {
		res[i] = executor.LeaseResult{JobID: o.ID, OK: o.Err == nil}
		if o.Err != nil {
			res[i].Error, _, _ = strings.Cut(o.Err.Error(), "\n")
		}
	}
	return res
}

// connErr maps the engine's errors to the protocol errors of executor.Conn, as the API's status
// codes map to them in api/workerconn (INVALID_ARGUMENT, PERMISSION_DENIED, NOT_FOUND,
// FAILED_PRECONDITION, UNAVAILABLE), keeping the original error in the chain.
func connErr(op string, err error) error {
	var kind error
	switch {
	case errors.Is(err, queue.ErrInvalidArgument):
		kind = executor.ErrInvalid
	case errors.Is(err, queue.ErrPermissionDenied), errors.Is(err, queue.ErrUnauthenticated):
		kind = executor.ErrNotAllowed
	case errors.Is(err, queue.ErrWorkerNotFound), errors.Is(err, queue.ErrQueueNotFound), errors.Is(err, queue.ErrJobNotFound):
		kind = executor.ErrUnknownWorker
	case errors.Is(err, queue.ErrIllegalTransition), errors.Is(err, queue.ErrStaleAttempt), errors.Is(err, engine.ErrWorkerLost):
		kind = executor.ErrWorkerInactive
	case errors.Is(err, queue.ErrShutdown), errors.Is(err, context.DeadlineExceeded):
		kind = executor.ErrUnreachable
	default:
		return fmt.Errorf("%s: %w", op, err)
	}
	return fmt.Errorf("%s: %w: %w", op, kind, err)
}
