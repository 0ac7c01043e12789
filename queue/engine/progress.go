package engine

import (
	"context"

	"github.com/jq-dev/jq/store"
)

// Progress records progress of the worker's running attempts (a handler's queue.Progress). Each
// update is fenced by its lease like a report — applied only while the job is ASSIGNED or
// RUNNING at that attempt on this worker — and a stale one is only an outcome (queue.ErrStaleAttempt),
// never an error of the call. Progress is not job state: it writes neither the jobs row nor an
// event nor Redis (store.ProgressStore says why), and a worker sends at most one update per job
// per second, so it is written directly, one statement per call, not group-committed with the
// reports. Each applied update is announced to OnJobProgress, so this replica's WatchJob streams
// carry it at once.
func (e *Engine) Progress(ctx context.Context, workerID string, updates []store.JobProgressUpdate) ([]store.LeaseOutcome, error) {
	outs, err := e.opts.Store.JobProgressSet(ctx, store.JobProgressSetParams{WorkerID: workerID, Updates: updates})
	if err != nil {
		return nil, err
	}
	for _, o := range outs {
		if o.Err == nil {
			e.jobProgressed(o.ID)
		}
	}
	return outs, nil
}

// Alone reports whether this replica knows that no other replica runs beside it: it listens for
// their announcements and heard none recently. A change another replica makes (progress, which
// records no event) can then only come from this one, and its watchers need not poll for it.
func (e *Engine) Alone() bool {
	return !e.othersListen()
}
