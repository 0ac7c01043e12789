package executor

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"time"

	"go.uber.org/zap"

	"github.com/jq-dev/jq/queue"
)

// ProgressConn is the optional part of [Conn] that carries handlers' progress
// (queue.Progress) to the server: api/workerconn implements it with
// WorkerService.ReportProgress. With a Conn that does not implement it,
// progress updates are dropped.
type ProgressConn interface {
	// Progress records progress of running attempts; one result per update,
	// in order. A result with OK false (a stale attempt) means the update was
	// ignored.
	Progress(ctx context.Context, p ProgressParams) ([]LeaseResult, error)
}

// ErrUnsupported is a Conn's error for a call the server does not implement
// (UNIMPLEMENTED: an older server); the worker stops making it.
var ErrUnsupported = errors.New("not supported by the server")

// ProgressParams carry progress updates of one worker.
type ProgressParams struct {
	WorkerID string
	Updates  []ProgressUpdate
}

// ProgressUpdate is one attempt's latest progress.
type ProgressUpdate struct {
	Lease
	Percent int
	Message string
}

// progressState is a task's progress; allocated by its first queue.Progress call, so a job that
// reports none costs nothing.
type progressState struct {
	mu       sync.Mutex
	percent  int
	message  string
	dirty    bool      // holds a value not sent yet
	queued   bool      // in the sender's ready list, or a timer will put it there
	lastSent time.Time // when the last update of this task went out
}

// progressSender coalesces and sends progress: at most one update per task per interval, the
// latest value. A task's first update goes out at once; later ones wait until interval after the
// previous send, and whatever arrived meanwhile is replaced by the newest. An update of a task
// that is no longer running when its turn comes is dropped (the report says the rest). One
// goroutine sends; handlers never wait for it.
type progressSender struct {
	log      *zap.Logger
	interval time.Duration
	now      func() time.Time
	// after runs f after d (time.AfterFunc; a fake clock in tests).
	after func(d time.Duration, f func())
	// send makes one call; nil: progress is dropped (a Conn without ProgressConn).
	send func(ctx context.Context, p ProgressParams) ([]LeaseResult, error)
	// live reports which of the tasks still run (holding their lease); they alone are sent.
	live        func(ts []*task) []bool
	callTimeout time.Duration

	wake        chan struct{}
	mu          sync.Mutex
	ready       []*task
	unsupported atomic.Bool
	sent        atomic.Int64 // updates sent (for tests and Stats)
	failing     bool         // the last call failed (logged once per outage); run's goroutine only
}

func newProgressSender(log *zap.Logger, callTimeout time.Duration, conn Conn, live func([]*task) []bool) *progressSender {
	s := &progressSender{
		log: log, interval: queue.ProgressInterval, now: time.Now,
		after:       func(d time.Duration, f func()) { time.AfterFunc(d, f) },
		live:        live,
		callTimeout: callTimeout,
		wake:        make(chan struct{}, 1),
	}
	if pc, ok := conn.(ProgressConn); ok {
		s.send = pc.Progress
	}
	return s
}

// report records a task's latest progress and schedules its sending. It never blocks on I/O.
func (s *progressSender) report(t *task, percent int, message string) {
	if s.send == nil || s.unsupported.Load() {
		return
	}
	ps := t.progress.Load()
	if ps == nil {
		ps = &progressState{}
		if !t.progress.CompareAndSwap(nil, ps) {
			ps = t.progress.Load()
		}
	}
	ps.mu.Lock()
	ps.percent, ps.message, ps.dirty = percent, message, true
	if ps.queued {
		ps.mu.Unlock()
		return // already due or scheduled: it will send this value
	}
	ps.queued = true
	wait := time.Duration(0)
	if !ps.lastSent.IsZero() {
		wait = ps.lastSent.Add(s.interval).Sub(s.now())
	}
	ps.mu.Unlock()
	s.schedule(t, wait)
}

// schedule puts the task in the ready list after wait (at once when wait <= 0).
func (s *progressSender) schedule(t *task, wait time.Duration) {
	if wait > 0 {
		s.after(wait, func() { s.enqueue(t) })
		return
	}
	s.enqueue(t)
}

func (s *progressSender) enqueue(t *task) {
	s.mu.Lock()
	s.ready = append(s.ready, t)
	s.mu.Unlock()
	select {
	case s.wake <- struct{}{}:
	default:
	}
}

// run sends until ctx ends; what is pending then is dropped.
func (s *progressSender) run(ctx context.Context, workerID string) {
	for {
		select {
		case <-ctx.Done():
			return
		case <-s.wake:
		}
		for s.flush(ctx, workerID) {
		}
	}
}

// flush sends one batch of the ready tasks' latest values and reports whether any were ready.
func (s *progressSender) flush(ctx context.Context, workerID string) bool {
	s.mu.Lock()
	ts := s.ready
	if len(ts) > MaxBatch {
		ts = ts[:MaxBatch]
	}
	s.ready = s.ready[len(ts):]
	s.mu.Unlock()
	if len(ts) == 0 {
		return false
	}
	alive := s.live(ts)
	now := s.now()
	us := make([]ProgressUpdate, 0, len(ts))
	sentTasks := make([]*task, 0, len(ts))
	for i, t := range ts {
		ps := t.progress.Load()
		ps.mu.Lock()
		ps.queued = false
		if !alive[i] || !ps.dirty {
			ps.dirty = ps.dirty && alive[i]
			ps.mu.Unlock()
			continue
		}
		us = append(us, ProgressUpdate{Lease: t.lease, Percent: ps.percent, Message: ps.message})
		ps.dirty, ps.lastSent = false, now
		ps.mu.Unlock()
		sentTasks = append(sentTasks, t)
	}
	if len(us) == 0 {
		return true
	}
	cctx, cancel := context.WithTimeout(ctx, s.callTimeout)
	res, err := s.send(cctx, ProgressParams{WorkerID: workerID, Updates: us})
	cancel()
	s.sent.Add(int64(len(us)))
	switch {
	case err == nil:
		if s.failing {
			s.failing = false
			s.log.Info("progress reaches the server again")
		}
		for _, r := range res {
			if !r.OK {
				// A stale lease: the report or the heartbeat settles the job, not progress.
				s.log.Debug("progress ignored by the server", zap.String("job_id", r.JobID), zap.String("reason", r.Error))
			}
		}
	case errors.Is(err, ErrUnsupported):
		s.unsupported.Store(true)
		s.log.Warn("the server does not accept progress (an older version); dropping progress updates", zap.Error(err))
	case errors.Is(err, ErrInvalid), errors.Is(err, ErrNotAllowed), ctx.Err() != nil:
		s.log.Debug("progress not delivered; dropped", zap.Int("updates", len(us)), zap.Error(err))
	default:
		// Transient: try the latest value again after the interval, unless a newer one is due.
		if !s.failing {
			s.failing = true
			s.log.Warn("progress not delivered; retrying with the latest values", zap.Error(err))
		}
		for _, t := range sentTasks {
			ps := t.progress.Load()
			ps.mu.Lock()
			ps.dirty = true
			requeue := !ps.queued
			ps.queued = true
			ps.mu.Unlock()
			if requeue {
				s.schedule(t, s.interval)
			}
		}
	}
	return true
}
