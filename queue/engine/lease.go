package engine

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"go.uber.org/zap"

	"github.com/jq-dev/jq/queue"
	"github.com/jq-dev/jq/store"
)

// Ack moves the worker's leases ASSIGNED→RUNNING; concurrent acks of all
// workers are written together. One outcome per lease, in order;
// queue.ErrWorkerNotFound when the worker is not registered.
func (e *Engine) Ack(ctx context.Context, workerID string, leases []store.JobLease) ([]store.LeaseOutcome, error) {
	for i := range leases {
		leases[i].WorkerID = workerID
	}
	outs, err := e.acks.do(ctx, leases)
	if err != nil {
		return nil, err
	}
	if err := e.knownWorker(ctx, workerID, outs); err != nil {
		return nil, err
	}
	e.observeLeases(outs, false)
	// A refused ack is never followed by a report (the worker drops the
	// lease), so its slot and in-flight entry are released here.
	e.release(ctx, workerID, outs, false, func(o store.LeaseOutcome) bool { return isStale(o.Err) })
	return outs, nil
}

// Report records finished attempts (DONE or FAILED); concurrent reports of
// all workers are written together. An oversized success result fails the
// attempt with reason output_too_large. The attempts' slots are freed and
// their in-flight entries removed. queue.ErrWorkerNotFound when the worker is
// not registered.
func (e *Engine) Report(ctx context.Context, workerID string, reports []store.JobReportParams) ([]store.LeaseOutcome, error) {
	for i := range reports {
		r := &reports[i]
		r.WorkerID = workerID
		if r.Success && len(r.Result) > e.opts.MaxResultBytes {
			*r = store.JobReportParams{
				JobLease: r.JobLease,
				Error:    fmt.Sprintf("result of %d bytes exceeds the limit of %d", len(r.Result), e.opts.MaxResultBytes),
				Reason:   "output_too_large",
			}
		}
	}
	out, err := e.reports.do(ctx, reports)
	if err != nil {
		return nil, err
	}
	if err := e.knownWorker(ctx, workerID, out); err != nil {
		return nil, err
	}
	e.observeLeases(out, true)
	// An applied report ends the attempt; a stale one names an attempt that
	// is no longer this worker's. Either way the slot is free again.
	e.release(ctx, workerID, out, true, func(o store.LeaseOutcome) bool { return o.Err == nil || isStale(o.Err) })
	e.constrainedSlotsFreed(out)
	for i, o := range out {
		if o.Err == nil && !reports[i].Success {
			e.WakeReaper() // the retry sweep decides: PENDING after backoff, or dead-lettered
			break
		}
	}
	return out, nil
}

// knownWorker returns ErrWorkerNotFound when a batch of an unknown worker
// applied nothing. A job is only ever held by a registered worker, so an
// unknown worker's leases never apply: the check is needed only when none
// did, and then costs one read; a worker with a stream open here is known
// without it. Any other outcome of the read leaves the batch's outcomes to
// speak.
func (e *Engine) knownWorker(ctx context.Context, workerID string, outs []store.LeaseOutcome) error {
	for _, o := range outs {
		if o.Err == nil {
			return nil
		}
	}
	e.mu.Lock()
	s := e.sessions[workerID]
	e.mu.Unlock()
	if s != nil {
		return nil
	}
	if _, err := e.opts.Store.WorkerGet(ctx, workerID); errors.Is(err, queue.ErrWorkerNotFound) {
		return err
	}
	return nil
}

func (e *Engine) flushAcks(ctx context.Context, reqs [][]store.JobLease) ([][]store.LeaseOutcome, error) {
	return flushConcat(ctx, reqs, func(l store.JobLease) string { return l.ID }, e.opts.Store.JobAckMany)
}

func (e *Engine) flushReports(ctx context.Context, reqs [][]store.JobReportParams) ([][]store.LeaseOutcome, error) {
	return flushConcat(ctx, reqs, func(r store.JobReportParams) string { return r.ID }, e.opts.Store.JobReportMany)
}

// flushConcat writes many callers' items with one call and splits the
// outcomes back per caller. A batch judges only the first item of a job id
// (store.DispatchStore), so items repeating an id — two attempts of one job
// reported together, a retried report merged with its original — go into a
// further call after the first.
func flushConcat[T any](ctx context.Context, reqs [][]T, id func(T) string, write func(context.Context, []T) ([]store.LeaseOutcome, error)) ([][]store.LeaseOutcome, error) {
	var all []T
	for _, r := range reqs {
		all = append(all, r...)
	}
	outs := make([]store.LeaseOutcome, len(all))
	pending := make([]int, len(all)) // positions in all still to write
	for i := range pending {
		pending[i] = i
	}
	for len(pending) > 0 {
		var round, later []int
		seen := make(map[string]bool, len(pending))
		for _, i := range pending {
			k := strings.ToLower(id(all[i]))
			if seen[k] {
				later = append(later, i)
				continue
			}
			seen[k] = true
			round = append(round, i)
		}
		items := make([]T, len(round))
		for j, i := range round {
			items[j] = all[i]
		}
		got, err := write(ctx, items)
		if err != nil {
			return nil, err
		}
		if len(got) != len(items) {
			return nil, fmt.Errorf("engine: store returned %d outcomes for %d items", len(got), len(items))
		}
		for j, i := range round {
			outs[i] = got[j]
		}
		pending = later
	}
	res := make([][]store.LeaseOutcome, len(reqs))
	off := 0
	for i, r := range reqs {
		res[i] = outs[off : off+len(r)]
		off += len(r)
	}
	return res, nil
}

// release frees the session slots and the in-flight entries (with their
// locks) of the outcomes ended says are over for this worker.
func (e *Engine) release(ctx context.Context, workerID string, outs []store.LeaseOutcome, reported bool, ended func(store.LeaseOutcome) bool) {
	over := e.removeInflight(ctx, workerID, outs, ended)
	e.mu.Lock()
	s := e.sessions[workerID]
	e.mu.Unlock()
	if s != nil && len(over) > 0 {
		s.released(over, reported)
	}
}

// removeInflight removes the in-flight entries (with their locks) of the
// outcomes ended selects and returns their job ids. The session slots stay
// taken.
func (e *Engine) removeInflight(ctx context.Context, workerID string, outs []store.LeaseOutcome, ended func(store.LeaseOutcome) bool) []string {
	e.mu.Lock()
	s := e.sessions[workerID]
	e.mu.Unlock()

	byQueue := map[string][]string{}
	var over []string
	for _, o := range outs {
		if !ended(o) {
			continue
		}
		over = append(over, o.ID)
		q := ""
		if o.Job != nil {
			q = o.Job.Queue
		} else if s != nil {
			q, _ = s.queueOf(o.ID)
		}
		if q != "" {
			byQueue[q] = append(byQueue[q], o.ID)
		}
	}
	for q, ids := range byQueue {
		if err := e.opts.Dispatcher.InflightRemove(ctx, store.InflightParams{Queue: q, WorkerID: workerID, IDs: ids}); err != nil {
			// The reaper clears orphaned in-flight entries. During an outage already logged
			// (redisDown) every finished job would repeat the warning.
			lvl := zap.WarnLevel
			if e.redisKnownDown() {
				lvl = zap.DebugLevel
			}
			e.log.Log(lvl, "remove in-flight entries failed", zap.String("queue", q), zap.String("worker_id", workerID), zap.Error(err))
		}
	}
	return over
}

func isStale(err error) bool {
	return err != nil && (errors.Is(err, queue.ErrStaleAttempt) || errors.Is(err, queue.ErrJobNotFound))
}
