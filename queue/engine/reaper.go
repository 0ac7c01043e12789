package engine

import (
	"context"
	"errors"
	"fmt"
	"time"

	"go.uber.org/zap"

	"github.com/jq-dev/jq/internal/jobtrace"
	"github.com/jq-dev/jq/queue"
	"github.com/jq-dev/jq/store"
)

// reaperBatch bounds one statement of a reaper cycle; a cycle repeats a step while it comes back
// full, up to reaperMaxRounds times.
const (
	reaperBatch     = 1000
	reaperMaxRounds = 20
)

// reaperState is what the reaper remembers between cycles.
type reaperState struct {
	// healthySince is the start of the current run of successful cycles (zero after a failed
	// one). Workers are declared lost only after a heartbeat timeout of uninterrupted health: a
	// worker cannot heartbeat while Postgres, Redis or every server is down, so right after a
	// start or an outage silence proves nothing (an outage must not re-run every job).
	healthySince time.Time
	cycles       int
}

// reaperLoop runs a reaper cycle every ReaperInterval, and at once when a failure report needs the
// retry sweep.
func (e *Engine) reaperLoop(ctx context.Context) {
	tick := time.NewTicker(e.opts.ReaperInterval)
	defer tick.Stop()
	var st reaperState
	failing := false
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		case <-e.wakeReaper:
		}
		err := e.reaperCycle(ctx, &st, time.Now())
		switch {
		case ctx.Err() != nil:
			return
		case err != nil && !failing:
			failing = true
			e.log.Warn("reaper cycle failed; retrying every interval (workers are not declared lost until a heartbeat timeout after recovery)",
				zap.Error(err), zap.Duration("interval", e.opts.ReaperInterval))
		case err != nil:
			e.log.Debug("reaper cycle failed", zap.Error(err))
		case failing:
			failing = false
			e.log.Info("reaper cycle succeeded again")
		}
	}
}

// WakeReaper asks for a reaper cycle as soon as possible (a failure waits for the retry sweep).
func (e *Engine) WakeReaper() {
	select {
	case e.wakeReaper <- struct{}{}:
	default:
	}
}

// ReaperCycle runs one reaper cycle now, as if the reaper had been healthy for a whole heartbeat
// timeout (tests and operators); the background loop applies the outage rule instead.
func (e *Engine) ReaperCycle(ctx context.Context) error {
	now := time.Now()
	st := reaperState{healthySince: now.Add(-e.opts.HeartbeatTimeout)}
	return e.reaperCycle(ctx, &st, now)
}

func (e *Engine) reaperCycle(ctx context.Context, st *reaperState, now time.Time) error {
	err := e.reap(ctx, st, now)
	if err != nil {
		st.healthySince = time.Time{}
		return err
	}
	if st.healthySince.IsZero() {
		st.healthySince = now
	}
	return nil
}

func (e *Engine) reap(ctx context.Context, st *reaperState, now time.Time) error {
	st.cycles++
	workersLost := !st.healthySince.IsZero() && now.Sub(st.healthySince) >= e.opts.HeartbeatTimeout
	if workersLost {
		ids, err := e.opts.Store.WorkerMarkLost(ctx, e.opts.HeartbeatTimeout)
		if err != nil {
			return err
		}
		e.recovery.workersLost.Add(int64(len(ids)))
		for _, id := range ids {
			e.log.Warn("worker lost: no heartbeat within the timeout; its jobs will be retried",
				zap.String("worker_id", id), zap.Duration("heartbeat_timeout", e.opts.HeartbeatTimeout))
			e.EndSession(id, ErrWorkerLost)
		}
	}
	if err := e.failOverdue(ctx, workersLost); err != nil {
		return err
	}
	if err := e.retryFailed(ctx); err != nil {
		return err
	}
	for range reaperMaxRounds {
		byQueue, err := e.opts.Store.JobExpireTTL(ctx, reaperBatch)
		if err != nil {
			return err
		}
		n := 0
		for q, k := range byQueue {
			n += k
			e.opts.Observer.DeadLettered(q, k)
		}
		if n > 0 {
			e.recovery.ttlExpired.Add(int64(n))
			e.log.Info("jobs dead-lettered: TTL expired", zap.Int("jobs", n))
		}
		if n < reaperBatch {
			break
		}
	}
	// Orphaned in-flight entries are rare (a failed removal, a crash between two writes): checked
	// every tenth cycle.
	if st.cycles%10 == 1 {
		if err := e.clearOrphans(ctx); err != nil {
			return err
		}
	}
	return nil
}

// failOverdue fails the attempts whose assignment or execution timed out or whose worker is lost.
func (e *Engine) failOverdue(ctx context.Context, workersLost bool) error {
	for range reaperMaxRounds {
		now, dl := e.now(), e.deadlines()
		candidates, err := e.opts.Store.JobOverdue(ctx, store.JobOverdueParams{
			Deadlines: dl, Now: now, WorkersLost: workersLost, Limit: reaperBatch,
		})
		if err != nil || len(candidates) == 0 {
			return err
		}
		overdue := candidates[:0]
		fails := make([]store.JobFailParams, 0, len(candidates))
		for _, o := range candidates {
			j := queue.Job{State: o.State, UpdatedAt: o.UpdatedAt, StartedAt: o.StartedAt, Timeout: o.Timeout}
			reason, ok := dl.Overdue(&j, o.WorkerLost, now)
			if !ok {
				continue
			}
			o.Reason = reason
			overdue = append(overdue, o)
			fails = append(fails, store.JobFailParams{JobLease: o.JobLease, Reason: o.Reason, Error: overdueError(o, e.opts)})
		}
		if len(fails) == 0 {
			return nil
		}
		outs, err := e.opts.Store.JobFailMany(ctx, fails)
		if err != nil {
			return err
		}
		byWorker := map[string][]store.LeaseOutcome{}
		lostWorker := map[string]bool{}
		failed := 0
		failedByQueue := map[string]int{}
		for i, o := range outs {
			if o.Err != nil {
				continue // moved on meanwhile (reported, cancelled, another replica's reaper)
			}
			failed++
			failedByQueue[overdue[i].Queue]++
			e.recovery.addFailed(overdue[i].Reason)
			byWorker[overdue[i].WorkerID] = append(byWorker[overdue[i].WorkerID], o)
			if overdue[i].Reason == queue.ReasonWorkerLost {
				lostWorker[overdue[i].WorkerID] = true
			}
			e.log.Warn("attempt failed by the reaper", zap.String("job_id", o.ID), zap.String("queue", overdue[i].Queue),
				zap.Int("attempt", overdue[i].Attempt), zap.String("worker_id", overdue[i].WorkerID),
				zap.String("reason", overdue[i].Reason), jobtrace.JobLogField(o.Job))
		}
		all := func(store.LeaseOutcome) bool { return true }
		for w, os := range byWorker {
			if lostWorker[w] {
				e.release(ctx, w, os, true, all)
				continue
			}
			// A live worker still holds the slot: its handler may be running past the timeout
			// (ignoring cancellation), or the assignment is still on its way. The slot comes back
			// with the worker's report — refused as stale, it still frees the slot — or with a new
			// stream; freeing it now would send the worker more jobs than its concurrency.
			e.removeInflight(ctx, w, os, all)
		}
		for q, n := range failedByQueue {
			e.opts.Observer.Failed(q, n)
			e.hist.add(q, e.now(), 0, int64(n))
		}
		if failed > 0 {
			e.WakeReaper() // the retry sweep of this very cycle takes them; a wake costs nothing
		}
		if len(candidates) < reaperBatch {
			return nil
		}
	}
	return nil
}

func overdueError(o store.OverdueLease, opts Options) string {
	switch o.Reason {
	case queue.ReasonAssignmentTimeout:
		return fmt.Sprintf("not acknowledged by worker %q within the assignment timeout (%v)", o.WorkerID, opts.AssignmentTimeout)
	case queue.ReasonTimeout:
		return fmt.Sprintf("no report from worker %q within the job's timeout plus %v", o.WorkerID, opts.TimeoutGrace)
	default:
		return fmt.Sprintf("worker %q went OFFLINE (no heartbeat within %v)", o.WorkerID, opts.HeartbeatTimeout)
	}
}

// retryFailed settles FAILED jobs: back to PENDING after their backoff, or dead-lettered.
func (e *Engine) retryFailed(ctx context.Context) error {
	for range reaperMaxRounds {
		sweep, err := e.opts.Store.JobSettleFailed(ctx, reaperBatch, e.settle)
		if err != nil {
			return err
		}
		e.recovery.retried.Add(int64(sweep.Retried))
		e.recovery.deadLettered.Add(int64(sweep.DeadLettered))
		for q, n := range sweep.Queues {
			e.opts.Observer.Requeued(q, n)
		}
		for q, n := range sweep.DeadQueues {
			e.opts.Observer.DeadLettered(q, n)
		}
		if sweep.DeadLettered > 0 {
			e.log.Info("jobs dead-lettered", zap.Int("jobs", sweep.DeadLettered))
		}
		if sweep.Retried > 0 {
			e.notifyNewWork(sweep.Queues)
		}
		if sweep.Retried+sweep.DeadLettered < reaperBatch {
			return nil
		}
	}
	return nil
}

// settle is the retry rule with the engine's clock and jitter.
func (e *Engine) settle(j queue.FailedJob) queue.Decision {
	return queue.SettleFailed(j, e.now(), e.opts.Rand)
}

// clearOrphans removes in-flight entries whose job this worker no longer holds, for the workers
// with a session here (a worker's entries live in the queues it serves).
func (e *Engine) clearOrphans(ctx context.Context) error {
	e.mu.Lock()
	sessions := make([]*Session, 0, len(e.sessions))
	for _, s := range e.sessions {
		sessions = append(sessions, s)
	}
	e.mu.Unlock()
	var errs []error
	for _, s := range sessions {
		// The lists first, then what Postgres says the worker holds: an entry whose assignment
		// commits in between counts as held, not as an orphan.
		lists := map[string][]string{}
		for _, q := range s.queues {
			ids, err := e.opts.Dispatcher.InflightList(ctx, q, s.workerID)
			if err != nil {
				errs = append(errs, err)
				continue
			}
			if len(ids) > 0 {
				lists[q] = ids
			}
		}
		if len(lists) == 0 {
			continue
		}
		held, err := e.opts.Store.JobHeldBy(ctx, s.workerID)
		if err != nil {
			return err
		}
		holds := make(map[string]bool, len(held))
		for _, id := range held {
			holds[id] = true
		}
		for q, ids := range lists {
			var orphans []string
			for _, id := range ids {
				if !holds[id] {
					orphans = append(orphans, id)
				}
			}
			if len(orphans) == 0 {
				continue
			}
			if err := e.opts.Dispatcher.InflightRemove(ctx, store.InflightParams{Queue: q, WorkerID: s.workerID, IDs: orphans}); err != nil {
				errs = append(errs, err)
				continue
			}
			e.recovery.orphans.Add(int64(len(orphans)))
			e.log.Info("orphaned in-flight entries removed", zap.String("queue", q), zap.String("worker_id", s.workerID), zap.Int("entries", len(orphans)))
		}
	}
	return errors.Join(errs...)
}

// EndSession ends the worker's assignment stream on this replica, if it has one, with err: ErrWorkerLost
// (the reaper declared it OFFLINE), ErrWorkerDraining (an operator drained it or asked it to shut
// down). Jobs it holds stay ASSIGNED/RUNNING; its reports are still accepted.
func (e *Engine) EndSession(workerID string, err error) {
	e.mu.Lock()
	s := e.sessions[workerID]
	delete(e.sessions, workerID)
	e.mu.Unlock()
	if s != nil {
		s.close(err)
	}
}

// ErrWorkerDraining ends the session of a drained worker: the stream ends with OK (FR-023).
var ErrWorkerDraining = queue.ErrWorkerDraining

// ErrWorkerLost ends the session of a worker the reaper declared OFFLINE (FAILED_PRECONDITION on the
// wire: the worker must register again). It is queue's sentinel, so the API's error table reaches it
// without the engine.
var ErrWorkerLost = queue.ErrWorkerLost
