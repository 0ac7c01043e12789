package store

import (
	"context"

	"github.com/jq-dev/jq/queue"
)

// Store is the system of record: queues, jobs with their event history, and workers. Every
// implementation passes storetest.RunStore.
type Store interface {
	QueueStore
	JobStore
	WorkerStore

	// Ping checks that the backend is reachable (readiness).
	Ping(ctx context.Context) error
	// Close releases the backend's resources. The Store must not be used afterwards.
	Close()
}

// QueueStore manages queues and their defaults.
type QueueStore interface {
	// QueueCreate creates a queue; zero fields of p take the queue defaults.
	// Errors: ErrInvalidArgument, ErrQueueExists.
	QueueCreate(ctx context.Context, p QueueCreateParams) (*queue.Queue, error)
	// QueueEnsure creates the queue unless it exists and reports whether it created it. It is
	// idempotent and safe when several servers call it at once; an existing queue is returned as it
	// is, its settings untouched. Errors: ErrInvalidArgument.
	QueueEnsure(ctx context.Context, p QueueCreateParams) (q *queue.Queue, created bool, err error)
	// QueueGet returns one queue. Errors: ErrQueueNotFound.
	QueueGet(ctx context.Context, name string) (*queue.Queue, error)
	// QueueList returns every queue ordered by name.
	QueueList(ctx context.Context) ([]*queue.Queue, error)
	// QueueDelete deletes a queue. A queue holding any job — terminal ones included — is refused with
	// ErrQueueNotEmpty unless p.Force, which deletes its jobs and their events too; deletedJobs
	// counts them. Errors: ErrQueueNotFound, ErrQueueNotEmpty.
	QueueDelete(ctx context.Context, p QueueDeleteParams) (deletedJobs int64, err error)
	// QueueSetPaused pauses or resumes dispatch from a queue; submits are accepted either way.
	// Errors: ErrQueueNotFound.
	QueueSetPaused(ctx context.Context, p QueueSetPausedParams) (*queue.Queue, error)
	// QueueUpdate changes a queue's settings (QueueUpdateParams.Apply decides the result), atomically
	// with respect to concurrent updates, and sets its updated_at. Jobs already submitted keep the
	// values they were given; dispatch, retries and retention use the new ones from then on.
	// Errors: ErrQueueNotFound, ErrInvalidArgument (nothing changed).
	QueueUpdate(ctx context.Context, p QueueUpdateParams) (*queue.Queue, error)
	// QueueStats counts the queue's jobs by state and summarises the recent finished attempts
	// (FR-028), as queue.QueueStats documents each figure: the live states exactly, DONE exactly up
	// to queue.ExactDoneLimit and estimated beyond, the recent figures over queue.RecentWindow read
	// from at most queue.RecentEventsLimit events. Its cost must not grow with the history the
	// queue keeps. Errors: ErrQueueNotFound.
	QueueStats(ctx context.Context, name string) (*queue.QueueStats, error)
}

// JobStore records jobs and every change of their state.
type JobStore interface {
	// JobInsertMany inserts a batch of jobs, each with its first event (none → PENDING, reason
	// "submitted"), atomically: on any error nothing of the batch is stored. Results are in the
	// order of ps. A job whose (queue, idempotency key) is taken by a job of the same spec yields
	// that job with Existing set. Errors: ErrInvalidArgument, ErrQueueNotFound (naming the queue),
	// ErrIdempotencyConflict.
	JobInsertMany(ctx context.Context, ps []JobInsertParams) ([]JobInsertResult, error)
	// JobGet returns one job. Errors: ErrJobNotFound; ErrInvalidArgument for a malformed id.
	JobGet(ctx context.Context, id string) (*queue.Job, error)
	// JobPrefixList returns the ids of at most limit (1..MaxIDPrefixMatches) jobs whose id starts
	// with prefix (ValidateJobPrefixList), in id order: a range read of the primary key. Errors:
	// ErrInvalidArgument (prefix, limit).
	JobPrefixList(ctx context.Context, prefix string, limit int) ([]string, error)
	// JobList returns a page of jobs, newest first (created_at DESC, id DESC) or, with p.Ascending,
	// oldest first (created_at ASC, id ASC), and the cursor of the next page ("" after the last).
	// Errors: ErrInvalidArgument (bad filter or cursor), ErrQueueNotFound (p.Queue names no queue).
	JobList(ctx context.Context, p JobListParams) (JobListResult, error)
	// JobTransition moves a job from p.From to p.To with a compare-and-set on its state (and attempt,
	// unless p.Attempt is AnyAttempt) and records the event in the same transaction. Errors:
	// ErrIllegalTransition (checked before any I/O), ErrInvalidArgument, ErrJobNotFound,
	// ErrStaleAttempt (the job exists but is no longer in p.From / p.Attempt; nothing changed).
	JobTransition(ctx context.Context, p JobTransitionParams) (*queue.Job, error)
	// JobEvents returns a job's events ordered by Seq (1..n). Errors: ErrJobNotFound,
	// ErrInvalidArgument for a malformed id.
	JobEvents(ctx context.Context, id string) ([]queue.Event, error)
}

// WorkerStore records worker registrations and liveness.
type WorkerStore interface {
	// WorkerRegister creates or replaces a worker's registration and marks it ONLINE with a fresh
	// heartbeat; re-registering a known id (a restarted worker) brings it back ONLINE.
	// Errors: ErrInvalidArgument.
	WorkerRegister(ctx context.Context, p WorkerRegisterParams) (*queue.Worker, error)
	// WorkerHeartbeat records a heartbeat at the store's clock, and replaces the worker's circuit
	// breakers with p.Breakers. It never changes the status: an OFFLINE worker stays OFFLINE (it
	// must register again). Errors: ErrInvalidArgument, ErrWorkerNotFound.
	WorkerHeartbeat(ctx context.Context, p WorkerHeartbeatParams) (*queue.Worker, error)
	// WorkerGet returns one worker. Errors: ErrWorkerNotFound.
	WorkerGet(ctx context.Context, id string) (*queue.Worker, error)
	// WorkerList returns every worker, OFFLINE ones included, ordered by id.
	WorkerList(ctx context.Context) ([]*queue.Worker, error)
	// WorkerListPage returns at most limit workers whose id sorts after after, ordered by id.
	WorkerListPage(ctx context.Context, after string, limit int) ([]*queue.Worker, error)
	// WorkerSetStatus sets a worker's status (drain: DRAINING). An OFFLINE worker only changes by
	// registering again. Errors: ErrInvalidArgument, ErrWorkerNotFound, ErrIllegalTransition (OFFLINE).
	WorkerSetStatus(ctx context.Context, p WorkerSetStatusParams) (*queue.Worker, error)
	// WorkerDeregister marks a worker OFFLINE; the row is kept for history. Errors: ErrWorkerNotFound.
	WorkerDeregister(ctx context.Context, id string) error
	// WorkerCounts counts the live workers, in all and of one principal, leaving out worker id
	// except (the one registering again).
	WorkerCounts(ctx context.Context, principal, except string) (WorkerCounts, error)
}
