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
// reports.
func (e *Engine) Progress(ctx context.Context, workerID string, updates []store.JobProgressUpdate) ([]store.LeaseOutcome, error) {
	return e.opts.Store.JobProgressSet(ctx, store.JobProgressSetParams{WorkerID: workerID, Updates: updates})
}
