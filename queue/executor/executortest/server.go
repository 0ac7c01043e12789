// Package executortest provides an in-memory fake of the server's side of
// the worker protocol, an executor.Conn for tests of the worker runtime and of
// components built on it. It follows the contract of
// api/proto/jq/v1/worker_service.proto closely enough for that: capacity
// accounting per stream, attempts as fencing tokens, stale-attempt
// rejections, one stream per worker, heartbeat commands and cancellations.
// It is not a server: there are no priorities or timeouts; queues matter only
// to the worker's circuit breakers, which it honours as the server does (no
// job of an open queue, one at a time of a half-open queue).
package executortest

import (
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"sync"
	"time"

	"github.com/jq-dev/jq/queue"
	"github.com/jq-dev/jq/queue/executor"
)

// Method names a Conn method, for fault injection and call counts.
type Method string

// Methods.
const (
	MethodRegister   Method = "Register"
	MethodStream     Method = "Stream"
	MethodAck        Method = "Ack"
	MethodReport     Method = "Report"
	MethodHeartbeat  Method = "Heartbeat"
	MethodDeregister Method = "Deregister"
	MethodProgress   Method = "Progress"
)

// Options configure a Server.
type Options struct {
	// HeartbeatInterval is returned by Register (default 1s).
	HeartbeatInterval time.Duration
	// AckDeadline is the assignment deadline (default 1 minute).
	AckDeadline time.Duration
	// Latency is added to every Ack and Report call, as a network round trip
	// would.
	Latency time.Duration
	// IgnoreCapacity makes the stream send every pending job at once,
	// violating the capacity contract.
	IgnoreCapacity bool
}

// State of a job in the fake.
type State string

// States.
const (
	Pending  State = "PENDING"
	Assigned State = "ASSIGNED"
	Running  State = "RUNNING"
	Done     State = "DONE"
	Failed   State = "FAILED"
)

type job struct {
	j       *queue.Job
	state   State
	attempt int
	reports int
}

// Server is the fake. The zero value is not usable; call NewServer.
type Server struct {
	opts Options

	mu           sync.Mutex
	changed      chan struct{} // closed and replaced on every change
	jobs         map[string]*job
	pending      []string
	registered   bool
	workerID     string
	concurrency  int
	stream       *stream // the current stream, if any
	outstanding  int     // this worker's attempts sent and not yet reported
	limit        int     // the most outstanding: concurrency plus the stream's prefetch
	reports      []executor.Report
	acks         []executor.Lease
	heartbeats   [][]executor.Lease
	calls        map[Method]int
	faults       map[Method][]error
	lostReports  int // report calls still to process and then answer as unreachable
	command      executor.Command
	cancelIDs    []string
	reportHook   func(executor.Report) (ok bool, reason string)
	capacities   []int
	ackHook      func(executor.Lease) (ok bool, reason string)
	breakers     []queue.QueueBreaker // from the last heartbeat
	progress     []executor.ProgressUpdate
	progressOK   []bool // the verdict of each update in progress
	progressHook func(executor.ProgressUpdate) bool
}

var (
	_ executor.Conn         = (*Server)(nil)
	_ executor.ProgressConn = (*Server)(nil)
)

// NewServer returns an empty fake server.
func NewServer(opts Options) *Server {
	if opts.HeartbeatInterval <= 0 {
		opts.HeartbeatInterval = time.Second
	}
	if opts.AckDeadline <= 0 {
		opts.AckDeadline = time.Minute
	}
	return &Server{
		opts:    opts,
		changed: make(chan struct{}),
		jobs:    map[string]*job{},
		calls:   map[Method]int{},
		faults:  map[Method][]error{},
	}
}

func (s *Server) notifyLocked() {
	close(s.changed)
	s.changed = make(chan struct{})
}

// Submit queues jobs for assignment. Jobs need an ID; Attempt is ignored.
func (s *Server) Submit(jobs ...*queue.Job) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, j := range jobs {
		s.jobs[j.ID] = &job{j: j, state: Pending}
		s.pending = append(s.pending, j.ID)
	}
	s.notifyLocked()
}

// Fail makes the next len(errs) calls of m return those errors (a nil entry
// lets that call through).
func (s *Server) Fail(m Method, errs ...error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.faults[m] = append(s.faults[m], errs...)
}

// LoseReportAnswers makes the next n Report calls apply their reports and then fail as if the
// answer was lost on the way back (executor.ErrUnreachable): the worker cannot tell them from calls
// that never arrived, and sends the reports again.
func (s *Server) LoseReportAnswers(n int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.lostReports += n
}

// OnReport decides the verdict of each report (default: the contract's).
func (s *Server) OnReport(f func(executor.Report) (ok bool, reason string)) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.reportHook = f
}

// OnProgress decides whether each progress update of a live lease applies (default: it does);
// false answers it as stale.
func (s *Server) OnProgress(f func(executor.ProgressUpdate) bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.progressHook = f
}

// ProgressUpdates returns every progress update received, in order, and whether each was
// applied (the job ASSIGNED or RUNNING at that attempt).
func (s *Server) ProgressUpdates() ([]executor.ProgressUpdate, []bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.progress), slices.Clone(s.progressOK)
}

// Progress implements executor.ProgressConn: an update applies while its job is ASSIGNED or
// RUNNING at that attempt; any other is answered ok = false ("stale attempt"), never an error.
func (s *Server) Progress(ctx context.Context, p executor.ProgressParams) ([]executor.LeaseResult, error) {
	if err := s.latency(ctx); err != nil {
		return nil, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.enterLocked(MethodProgress); err != nil {
		return nil, err
	}
	if len(p.Updates) == 0 || len(p.Updates) > executor.MaxBatch {
		return nil, fmt.Errorf("%w: %d progress updates", executor.ErrInvalid, len(p.Updates))
	}
	out := make([]executor.LeaseResult, len(p.Updates))
	for i, u := range p.Updates {
		j := s.jobs[u.JobID]
		ok := j != nil && j.attempt == u.Attempt && (j.state == Assigned || j.state == Running)
		if ok && s.progressHook != nil {
			ok = s.progressHook(u)
		}
		out[i] = executor.LeaseResult{JobID: u.JobID, OK: ok}
		if !ok {
			out[i].Error = "stale attempt"
		}
		s.progress = append(s.progress, u)
		s.progressOK = append(s.progressOK, ok)
	}
	s.notifyLocked()
	return out, nil
}

// OnAck decides the verdict of each ack (default: the contract's).
func (s *Server) OnAck(f func(executor.Lease) (ok bool, reason string)) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.ackHook = f
}

// SetCommand makes every following heartbeat return cmd.
func (s *Server) SetCommand(cmd executor.Command) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.command = cmd
}

// CancelJobs makes the next heartbeat ask the worker to cancel these jobs.
func (s *Server) CancelJobs(ids ...string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.cancelIDs = append(s.cancelIDs, ids...)
}

// BreakStream ends the current stream with err (as a network cut or a
// server restart would).
func (s *Server) BreakStream(err error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.stream != nil {
		s.stream.err = err
		s.stream = nil
		s.notifyLocked()
	}
}

// Reports returns every report received, in order.
func (s *Server) Reports() []executor.Report {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.reports)
}

// ReportsFor returns the reports received for one job.
func (s *Server) ReportsFor(id string) []executor.Report {
	var out []executor.Report
	for _, r := range s.Reports() {
		if r.JobID == id {
			out = append(out, r)
		}
	}
	return out
}

// Acks returns every lease acked, in order.
func (s *Server) Acks() []executor.Lease {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.acks)
}

// Heartbeats returns the leases each heartbeat carried.
func (s *Server) Heartbeats() [][]executor.Lease {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.heartbeats)
}

// StreamCapacities returns the capacity each successful Stream call asked for.
func (s *Server) StreamCapacities() []int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.capacities)
}

// Calls returns how many times m was called (failed calls included).
func (s *Server) Calls(m Method) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.calls[m]
}

// JobState returns the fake's state of a job.
func (s *Server) JobState(id string) State {
	s.mu.Lock()
	defer s.mu.Unlock()
	if j := s.jobs[id]; j != nil {
		return j.state
	}
	return ""
}

// Outstanding is the number of this worker's attempts sent and not yet
// reported, as the server counts them.
func (s *Server) Outstanding() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.outstanding
}

// Registered reports whether the worker is registered.
func (s *Server) Registered() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.registered
}

// enter counts a call and returns an injected fault, if any.
func (s *Server) enterLocked(m Method) error {
	s.calls[m]++
	if f := s.faults[m]; len(f) > 0 {
		s.faults[m] = f[1:]
		return f[0]
	}
	return nil
}

func (s *Server) latency(ctx context.Context) error {
	if s.opts.Latency <= 0 {
		return nil
	}
	t := time.NewTimer(s.opts.Latency)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return fmt.Errorf("%w: %w", executor.ErrUnreachable, ctx.Err())
	case <-t.C:
		return nil
	}
}

// Register implements executor.Conn.
func (s *Server) Register(_ context.Context, p executor.RegisterParams) (executor.Registration, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.enterLocked(MethodRegister); err != nil {
		return executor.Registration{}, err
	}
	if p.WorkerID == "" || p.Concurrency < 1 || len(p.Queues) == 0 {
		return executor.Registration{}, fmt.Errorf("%w: bad registration %+v", executor.ErrInvalid, p)
	}
	s.registered, s.workerID, s.concurrency = true, p.WorkerID, p.Concurrency
	return executor.Registration{HeartbeatInterval: s.opts.HeartbeatInterval, HeartbeatTimeout: 6 * s.opts.HeartbeatInterval}, nil
}

// Stream implements executor.Conn: one stream per worker; a new one ends the
// previous one.
func (s *Server) Stream(ctx context.Context, p executor.StreamParams) (executor.Stream, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.enterLocked(MethodStream); err != nil {
		return nil, err
	}
	if !s.registered || p.WorkerID != s.workerID {
		return nil, fmt.Errorf("%w: %s", executor.ErrUnknownWorker, p.WorkerID)
	}
	if p.Prefetch < 0 || p.Prefetch > s.concurrency {
		return nil, fmt.Errorf("%w: prefetch %d", executor.ErrInvalid, p.Prefetch)
	}
	s.limit = s.concurrency + p.Prefetch
	if p.Capacity < 0 || p.Capacity > s.limit {
		return nil, fmt.Errorf("%w: capacity %d", executor.ErrInvalid, p.Capacity)
	}
	s.capacities = append(s.capacities, p.Capacity)
	capacity := p.Capacity
	if capacity == 0 {
		capacity = s.limit
	}
	if s.stream != nil {
		s.stream.err = errors.New("stream replaced by a newer one (ABORTED)")
	}
	// Slots the worker says are taken count as outstanding; reports of those
	// jobs free them on this stream.
	s.outstanding = s.limit - capacity
	st := &stream{s: s, ctx: ctx}
	s.stream = st
	s.notifyLocked()
	return st, nil
}

type stream struct {
	s      *Server
	ctx    context.Context
	err    error
	closed bool
}

func (st *stream) Recv() (*executor.Assignment, error) {
	s := st.s
	for {
		s.mu.Lock()
		if st.err != nil {
			err := st.err
			s.mu.Unlock()
			return nil, err
		}
		if st.closed {
			s.mu.Unlock()
			return nil, errors.New("stream closed")
		}
		if i := s.nextPendingLocked(); i >= 0 && (s.opts.IgnoreCapacity || s.outstanding < s.limit) {
			id := s.pending[i]
			s.pending = slices.Delete(s.pending, i, i+1)
			j := s.jobs[id]
			j.attempt++
			j.state = Assigned
			s.outstanding++
			cp := *j.j
			cp.Attempt = j.attempt
			a := &executor.Assignment{Job: &cp, Attempt: j.attempt, Deadline: time.Now().Add(s.opts.AckDeadline)}
			s.mu.Unlock()
			return a, nil
		}
		ch := s.changed
		s.mu.Unlock()
		select {
		case <-st.ctx.Done():
			return nil, fmt.Errorf("stream: %w", st.ctx.Err())
		case <-ch:
		}
	}
}

// nextPendingLocked is the index of the oldest pending job the worker's breakers let through,
// or -1.
func (s *Server) nextPendingLocked() int {
	for i, id := range s.pending {
		q := s.jobs[id].j.Queue
		limit := queue.Intake(s.breakers, q)
		if limit < 0 {
			return i
		}
		for _, j := range s.jobs {
			if j.j.Queue == q && (j.state == Assigned || j.state == Running) {
				limit--
			}
		}
		if limit > 0 {
			return i
		}
	}
	return -1
}

// Breakers returns the breakers the worker's last heartbeat reported.
func (s *Server) Breakers() []queue.QueueBreaker {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.breakers)
}

func (st *stream) Close() error {
	s := st.s
	s.mu.Lock()
	defer s.mu.Unlock()
	st.closed = true
	if s.stream == st {
		s.stream = nil
	}
	s.notifyLocked()
	return nil
}

// Ack implements executor.Conn.
func (s *Server) Ack(ctx context.Context, p executor.AckParams) ([]executor.LeaseResult, error) {
	if err := s.latency(ctx); err != nil {
		return nil, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.enterLocked(MethodAck); err != nil {
		return nil, err
	}
	if len(p.Leases) == 0 || len(p.Leases) > executor.MaxBatch {
		return nil, fmt.Errorf("%w: %d leases", executor.ErrInvalid, len(p.Leases))
	}
	out := make([]executor.LeaseResult, len(p.Leases))
	for i, l := range p.Leases {
		s.acks = append(s.acks, l)
		out[i] = executor.LeaseResult{JobID: l.JobID, OK: true}
		j := s.jobs[l.JobID]
		switch {
		case j == nil:
			out[i].OK, out[i].Error = false, "job not found"
		case j.attempt != l.Attempt || (j.state != Assigned && j.state != Running):
			out[i].OK, out[i].Error = false, "stale attempt"
		case s.ackHook != nil:
			if ok, reason := s.ackHook(l); !ok {
				// The server failed the job instead: its slot is free again.
				out[i].OK, out[i].Error = false, reason
				j.state = Failed
				s.outstanding--
			}
		}
		if out[i].OK {
			j.state = Running
		}
	}
	s.notifyLocked()
	return out, nil
}

// Report implements executor.Conn. Every report received frees one slot of
// the worker's, whatever the verdict.
func (s *Server) Report(ctx context.Context, p executor.ReportParams) ([]executor.LeaseResult, error) {
	if err := s.latency(ctx); err != nil {
		return nil, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.enterLocked(MethodReport); err != nil {
		return nil, err
	}
	if len(p.Reports) == 0 || len(p.Reports) > executor.MaxBatch {
		return nil, fmt.Errorf("%w: %d reports", executor.ErrInvalid, len(p.Reports))
	}
	out := make([]executor.LeaseResult, len(p.Reports))
	for i, r := range p.Reports {
		s.reports = append(s.reports, r)
		out[i] = executor.LeaseResult{JobID: r.JobID, OK: true}
		j := s.jobs[r.JobID]
		switch {
		case j == nil:
			out[i].OK, out[i].Error = false, "job not found"
		case j.attempt != r.Attempt || (j.state != Assigned && j.state != Running):
			out[i].OK, out[i].Error = false, "stale attempt"
		case s.reportHook != nil:
			out[i].OK, out[i].Error = s.reportHook(r)
		}
		if j != nil && j.attempt == r.Attempt && (j.state == Assigned || j.state == Running) {
			s.outstanding--
		}
		if out[i].OK {
			j.reports++
			j.state = Done
			if !r.Success {
				j.state = Failed
			}
		}
	}
	s.notifyLocked()
	if s.lostReports > 0 {
		s.lostReports--
		return nil, fmt.Errorf("%w: the answer was lost", executor.ErrUnreachable)
	}
	return out, nil
}

// Heartbeat implements executor.Conn.
func (s *Server) Heartbeat(_ context.Context, p executor.HeartbeatParams) (executor.HeartbeatReply, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.enterLocked(MethodHeartbeat); err != nil {
		return executor.HeartbeatReply{}, err
	}
	if !s.registered || p.WorkerID != s.workerID {
		return executor.HeartbeatReply{}, fmt.Errorf("%w: %s", executor.ErrUnknownWorker, p.WorkerID)
	}
	s.heartbeats = append(s.heartbeats, slices.Clone(p.Running))
	s.breakers = slices.Clone(p.Breakers)
	s.notifyLocked() // a queue may have reopened
	r := executor.HeartbeatReply{Command: s.command, CancelJobIDs: s.cancelIDs}
	s.cancelIDs = nil
	if s.command != executor.CommandNone && s.stream != nil {
		s.stream.err = io.EOF
		s.stream = nil
		s.notifyLocked()
	}
	return r, nil
}

// Deregister implements executor.Conn.
func (s *Server) Deregister(_ context.Context, p executor.DeregisterParams) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.enterLocked(MethodDeregister); err != nil {
		return err
	}
	if p.WorkerID != s.workerID {
		return fmt.Errorf("%w: %s", executor.ErrUnknownWorker, p.WorkerID)
	}
	s.registered = false
	return nil
}
