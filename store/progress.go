package store

import (
	"context"
	"math"

	"github.com/jq-dev/jq/queue"
)

// ProgressStore keeps the progress handlers report while their attempt runs.
// Progress is not a column of the job: an update must never add a row version to jobs, so short
// jobs that report nothing pay nothing and a long one reporting every second does not churn the
// widest, most indexed table. The Postgres store keeps one small row per job in job_progress
// (upserted, heap-only updates), fenced against the job's lease in the same statement, read only
// by a single job's read and pruned once the attempt is over. Every implementation passes
// storetest.RunProgressStore.
type ProgressStore interface {
	// JobProgressSet records each update whose job is ASSIGNED or RUNNING at that attempt on
	// p.WorkerID (the lease the worker holds; the same fence as a report) and replaces the
	// job's previous progress. One statement per batch; one outcome per update, in order:
	// queue.ErrStaleAttempt for an update that names no live lease of the worker (nothing is
	// written), ErrInvalidArgument for a malformed one. Within a batch the last update of a job
	// wins; the earlier ones get the same outcome. Outcomes carry no Job.
	// Errors: ErrInvalidArgument (worker id, batch longer than MaxDispatchBatch).
	JobProgressSet(ctx context.Context, p JobProgressSetParams) ([]LeaseOutcome, error)
	// JobProgressGet returns the progress of the job's current attempt while the job is
	// ASSIGNED or RUNNING, or nil (no progress reported, a finished job, an older attempt's
	// progress). Errors: ErrInvalidArgument for a malformed id; an unknown job has none (nil).
	JobProgressGet(ctx context.Context, id string) (*queue.JobProgress, error)
	// JobProgressPrune deletes up to limit progress records whose attempt is over (the job
	// moved on, finished or was deleted) and returns how many it deleted. Concurrent calls skip
	// each other's rows. Errors: ErrInvalidArgument (limit out of 1..MaxEventsPruneBatch).
	JobProgressPrune(ctx context.Context, limit int) (int64, error)
}

// JobProgressSetParams are progress updates of one worker's leases.
type JobProgressSetParams struct {
	WorkerID string
	Updates  []JobProgressUpdate
}

// JobProgressUpdate is one attempt's progress.
type JobProgressUpdate struct {
	ID      string // job id
	Attempt int
	Percent int    // 0..100
	Message string // at most queue.MaxProgressMessage bytes of UTF-8
}

// Validate checks the batch as a whole; each update is checked by ValidateUpdate.
func (p JobProgressSetParams) Validate() error {
	if err := ValidateWorkerID(p.WorkerID); err != nil {
		return err
	}
	if len(p.Updates) > MaxDispatchBatch {
		return invalid("progress batch of %d updates exceeds %d", len(p.Updates), MaxDispatchBatch)
	}
	return nil
}

// ValidateUpdate checks one update.
func (u JobProgressUpdate) ValidateUpdate() error {
	if u.Attempt < 1 || u.Attempt > math.MaxInt32 {
		return invalid("progress of job %s: attempt must be 1..%d, got %d", queue.Excerpt(u.ID), math.MaxInt32, u.Attempt)
	}
	return queue.ValidateProgress(u.Percent, u.Message)
}
