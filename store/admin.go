package store

import (
	"context"
	"time"

	"github.com/jq-dev/jq/queue"
)

// AdminStore holds the reads and the clean-up behind the operator's admin commands (seed 004's
// stats, peek and purge-dlq; FR-035) and the deletion of finished jobs. None of them changes a job's
// state.
type AdminStore interface {
	// JobPeek returns up to p.Limit jobs of one queue without changing or locking them: the due
	// PENDING jobs in strict dispatch order (priority DESC, created_at, id, whether or not the queue
	// is paused; with p.Priority that level's only, FIFO), or with p.Dead the DEAD_LETTERED jobs, most recently
	// dead-lettered first (completed_at DESC, id DESC). Errors: ErrInvalidArgument (queue name,
	// limit), ErrQueueNotFound. p.WithData and p.MaxBytes work as in JobListParams.
	JobPeek(ctx context.Context, p JobPeekParams) (JobPeekResult, error)
	// JobPurgeDeadLetters permanently deletes the DEAD_LETTERED jobs of p.Queue ("" = every queue)
	// that were dead-lettered when the call began, with their results and their published events (an
	// unpublished event stays until the relay has published it and retention removes it), and returns
	// how many jobs it deleted. It works in batches of one transaction each, so a large purge never
	// holds many row locks; a job retried meanwhile (no longer DEAD_LETTERED) is kept. Errors:
	// ErrInvalidArgument (queue name), ErrQueueNotFound.
	JobPurgeDeadLetters(ctx context.Context, p JobPurgeDeadLettersParams) (deleted int64, err error)
	// JobDelete permanently deletes one finished job (DONE or DEAD_LETTERED), with its result and
	// its published events (an unpublished event stays until the relay has published it and
	// retention removes it; with p.Unpublished every event of the job goes), with a compare-and-set
	// on p.State: a job no longer in that state is kept. Errors: ErrIllegalTransition (p.State is not DONE or DEAD_LETTERED; checked before any
	// I/O), ErrInvalidArgument (malformed id), ErrJobNotFound, ErrStaleAttempt (the job exists but
	// is no longer in p.State; nothing was deleted).
	JobDelete(ctx context.Context, p JobDeleteParams) error
	// JobCountDeadLettered counts the DEAD_LETTERED jobs of every queue that has any.
	JobCountDeadLettered(ctx context.Context) (map[string]int64, error)
	// JobCountReady counts, for each of the queues, its due PENDING jobs (what the next claims
	// would hand out, paused or not), up to MaxReadyCount: a count that reaches it means "at least".
	// An unknown queue counts zero.
	JobCountReady(ctx context.Context, queues []string) (map[string]int64, error)
	// JobDueTypeList returns the distinct types, sorted, of the queue's first MaxDueTypesScan due
	// PENDING jobs in dispatch order, leaving out the types in except: what waits for a worker
	// when the queue's workers handle only except (the status's "waiting"). An unknown queue has
	// none.
	JobDueTypeList(ctx context.Context, queueName string, except []string) ([]string, error)
	// WorkerCountLive counts the workers that are not OFFLINE and whose last heartbeat is at most
	// heartbeatTimeout old, by the store's clock.
	WorkerCountLive(ctx context.Context, heartbeatTimeout time.Duration) (int64, error)
}

// MaxReadyCount bounds JobCountReady's count per queue: it walks the dispatch index, and a deep
// backlog is reported as this many.
const MaxReadyCount = 100_000

// MaxDueTypesScan bounds JobDueTypeList' walk of the dispatch index: a type first due behind that
// many jobs of the handled types is not reported.
const MaxDueTypesScan = 10_000

// Peek limits.
const (
	DefaultPeekLimit = 10
	MaxPeekLimit     = 1000
)

// JobPeekParams selects the jobs JobPeek returns.
type JobPeekParams struct {
	Queue string
	Limit int  // 0: DefaultPeekLimit; 1..MaxPeekLimit
	Dead  bool // the dead-letter tail instead of the next PENDING jobs
	// Priority, when set, keeps the due PENDING jobs of that priority only (a weighted queue's
	// order is merged from its levels'; see queue.DispatchOrder). Not with Dead.
	Priority *int
	// WithData returns each job's payload and result; without it they are not read.
	WithData bool
	// MaxBytes ends the list early (Truncated) before its jobs' encoded size (estimated from above) passes it; at
	// least one job is returned. 0: only Limit bounds the list.
	MaxBytes int
}

// JobPeekResult is what JobPeek found.
type JobPeekResult struct {
	Jobs []*queue.Job
	// Truncated: MaxBytes stopped the list before Limit jobs; more may match.
	Truncated bool
}

// JobPurgeDeadLettersParams selects the dead letters to delete.
type JobPurgeDeadLettersParams struct {
	Queue string // "": every queue
}

// JobDeleteParams names the job JobDelete deletes and the state it was decided on.
type JobDeleteParams struct {
	ID    string
	State queue.State // DONE or DEAD_LETTERED: the job is deleted only while it is still in it
	// Unpublished: Kafka is off, so no relay will ever publish the job's unpublished events: they
	// are owed to no one and go with the job.
	Unpublished bool
}

// DispatchCounts are the sizes of one queue's Redis dispatch structures.
type DispatchCounts struct {
	Queue    string
	Ready    int64 // jobs in the queue's ready set
	Inflight int64 // entries over all the queue's per-worker in-flight lists
}
