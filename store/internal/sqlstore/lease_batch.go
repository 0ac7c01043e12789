package sqlstore

import (
	"errors"
	"fmt"

	"github.com/jq-dev/jq/queue"
	"github.com/jq-dev/jq/store"
)

// LeaseBatch is the bookkeeping both SQL stores do for a batch of acks, reports or fails (the
// contract of DispatchStore and RecoveryStore): one outcome per lease, a malformed lease refused on
// its own, and only the first occurrence of a job id applied — later ones are settled by Finish.
// A backend applies the leases Sent lists (their indexes, in batch order) and fills their Outcomes.
type LeaseBatch struct {
	Outcomes []store.LeaseOutcome
	Sent     []int          // the indexes of the leases to apply, in batch order
	first    map[string]int // job id → index of its first valid lease
	repeats  map[int]int    // index of a repeated lease → index of the first
}

// NewLeaseBatch returns the bookkeeping of a batch of n leases.
func NewLeaseBatch(n int) *LeaseBatch {
	return &LeaseBatch{
		Outcomes: make([]store.LeaseOutcome, n),
		Sent:     make([]int, 0, n),
		first:    make(map[string]int, n),
	}
}

// Add records lease i and reports whether it is to be applied: false for a malformed lease (its
// outcome holds the error) and for a repeated job id.
func (b *LeaseBatch) Add(i int, l store.JobLease) bool {
	b.Outcomes[i].ID = l.ID
	id, err := l.Validate()
	if err != nil {
		b.Outcomes[i].Err = err
		return false
	}
	b.Outcomes[i].ID = id
	if f, dup := b.first[id]; dup {
		if b.repeats == nil {
			b.repeats = map[int]int{}
		}
		b.repeats[i] = f
		return false
	}
	b.first[id] = i
	b.Sent = append(b.Sent, i)
	return true
}

// Finish settles the repeated leases and returns the outcomes. With idempotent (acks), a repeat of
// the same attempt by the same worker (a worker's retried ack merged into one batch with the call
// it retries) gets the first occurrence's outcome, so a retry never turns a success into a refusal.
// Any other repeat, and every repeated report (which may say something different), is stale (or
// not found, like the first).
func (b *LeaseBatch) Finish(leases []store.JobLease, idempotent bool) []store.LeaseOutcome {
	for i, f := range b.repeats {
		if idempotent && leases[i].Attempt == leases[f].Attempt && leases[i].WorkerID == leases[f].WorkerID {
			// Started stays false: the first occurrence carries the start.
			b.Outcomes[i].Job, b.Outcomes[i].Err = b.Outcomes[f].Job, b.Outcomes[f].Err
			continue
		}
		if errors.Is(b.Outcomes[f].Err, queue.ErrJobNotFound) {
			b.Outcomes[i].Err = b.Outcomes[f].Err
			continue
		}
		b.Outcomes[i].Err = fmt.Errorf("%w: job %s repeats item %d of the batch", queue.ErrStaleAttempt,
			b.Outcomes[i].ID, f)
	}
	return b.Outcomes
}

// NewReportBatch is the bookkeeping of a batch of reports, with each report bounded
// (JobReportParams.Bounded) and its lease.
func NewReportBatch(reports []store.JobReportParams) (b *LeaseBatch, leases []store.JobLease, bounded []store.JobReportParams) {
	b = NewLeaseBatch(len(reports))
	leases = make([]store.JobLease, len(reports))
	bounded = make([]store.JobReportParams, len(reports))
	for i, r := range reports {
		bounded[i] = r.Bounded()
		leases[i] = bounded[i].JobLease
		b.Add(i, leases[i])
	}
	return b, leases, bounded
}

// NewFailBatch is the bookkeeping of a batch of fails, with their leases: a fail without a reason
// is refused on its own.
func NewFailBatch(fails []store.JobFailParams) (*LeaseBatch, []store.JobLease) {
	b := NewLeaseBatch(len(fails))
	leases := make([]store.JobLease, len(fails))
	for i, f := range fails {
		leases[i] = f.JobLease
		if f.Reason == "" {
			b.Outcomes[i] = store.LeaseOutcome{ID: f.ID, Err: fmt.Errorf("%w: fail %s: a reason is required",
				queue.ErrInvalidArgument, f.ID)}
			continue
		}
		b.Add(i, f.JobLease)
	}
	return b, leases
}
