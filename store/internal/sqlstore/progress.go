package sqlstore

import (
	"fmt"

	"github.com/jq-dev/jq/queue"
	"github.com/jq-dev/jq/store"
)

// ProgressBatch is the bookkeeping both SQL stores do for JobProgressSet: one outcome per update,
// a malformed update refused on its own, and of several updates of one job only the last written.
type ProgressBatch struct {
	Outcomes []store.LeaseOutcome
	// IDs are the jobs to write, in the order of their first update; Last maps each to the index
	// of its last valid update.
	IDs  []string
	Last map[string]int
}

// NewProgressBatch checks the updates of p.
func NewProgressBatch(p store.JobProgressSetParams) *ProgressBatch {
	b := &ProgressBatch{Outcomes: make([]store.LeaseOutcome, len(p.Updates)), Last: make(map[string]int, len(p.Updates))}
	for i, u := range p.Updates {
		id, err := store.ParseJobID(u.ID)
		b.Outcomes[i].ID = id
		if err != nil {
			b.Outcomes[i].ID, b.Outcomes[i].Err = u.ID, err
			continue
		}
		if err := u.ValidateUpdate(); err != nil {
			b.Outcomes[i].Err = err
			continue
		}
		if _, ok := b.Last[id]; !ok {
			b.IDs = append(b.IDs, id)
		}
		b.Last[id] = i
	}
	return b
}

// Finish returns the outcomes, given the jobs whose update the store wrote (applied): the valid
// update of any other job is stale, its job not held by the worker at that attempt.
func (b *ProgressBatch) Finish(p store.JobProgressSetParams, applied map[string]bool) []store.LeaseOutcome {
	for i := range b.Outcomes {
		if b.Outcomes[i].Err == nil && !applied[b.Outcomes[i].ID] {
			b.Outcomes[i].Err = fmt.Errorf("%w: job %s is not held by worker %s at attempt %d",
				queue.ErrStaleAttempt, b.Outcomes[i].ID, p.WorkerID, p.Updates[i].Attempt)
		}
	}
	return b.Outcomes
}
