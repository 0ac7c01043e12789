package sqlstore

import (
	"errors"
	"fmt"

	"github.com/jq-dev/jq/queue"
	"github.com/jq-dev/jq/store"
)

// Errors words a SQL store's errors the way both stores do: a driver error is wrapped with the
// store's name and the operation ("postgres: get queue: …"), and a read of one row that finds
// none is the domain's not-found error. The probes that tell why a compare-and-set matched
// nothing are here too, each over the Scan of the store's own read.
type Errors struct {
	Backend string // the prefix of every wrapped error: "postgres", "sqlite"
	NoRows  error  // the driver's error for a row that is not there
}

// Wrap is err as op's error; nil stays nil.
func (e Errors) Wrap(op string, err error) error {
	if err == nil {
		return nil
	}
	return fmt.Errorf("%s: %s: %w", e.Backend, op, err)
}

// WrapExcept is Wrap, but leaves alone an error that is one of keep (a domain error the
// operation returns as it is).
func (e Errors) WrapExcept(op string, err error, keep ...error) error {
	for _, k := range keep {
		if errors.Is(err, k) {
			return err
		}
	}
	return e.Wrap(op, err)
}

// Row is the error of a read or write of the one row named name: notFound when there is no such
// row, otherwise op's.
func (e Errors) Row(op string, err, notFound error, name string) error {
	if errors.Is(err, e.NoRows) {
		return fmt.Errorf("%w: %q", notFound, name)
	}
	return e.Wrap(op, err)
}

// TransitionMiss says why JobTransition's compare-and-set of job id matched nothing, from scan,
// the read of the job's state and attempt: no job, or one in another state or attempt.
func (e Errors) TransitionMiss(op string, p store.JobTransitionParams, id string, scan func(dest ...any) error) error {
	var (
		state   string
		attempt int
	)
	err := scan(&state, &attempt)
	switch {
	case errors.Is(err, e.NoRows):
		return fmt.Errorf("%w: %s", queue.ErrJobNotFound, id)
	case err != nil:
		return e.Wrap(op, err)
	}
	return ErrStaleTransition(p, id, state, attempt)
}

// ErrStaleDelete is JobDelete's refusal when the job id is in state, not in the state expected.
func ErrStaleDelete(id, state string, expected queue.State) error {
	return fmt.Errorf("%w: job %s is %s, expected %s", queue.ErrStaleAttempt, id, state, expected)
}

// ScheduleNotOwned says why a write of the schedule name that only its owner may change matched
// nothing, from scan, the read of its owner: no such schedule, or another owner's.
func (e Errors) ScheduleNotOwned(op, name string, scan func(dest ...any) error) error {
	var owner string
	err := scan(&owner)
	switch {
	case errors.Is(err, e.NoRows):
		return fmt.Errorf("%w: %q", queue.ErrScheduleNotFound, name)
	case err != nil:
		return e.Wrap(op, err)
	}
	return fmt.Errorf("%w: %q is owned by %s", queue.ErrScheduleOwnedByConfig, name, owner)
}

// QueueDeletable refuses the delete of a queue that holds jobs, unless p.Force: scan reads
// whether it holds any (it is not run with p.Force).
func (e Errors) QueueDeletable(p store.QueueDeleteParams, scan func(dest ...any) error) error {
	if p.Force {
		return nil
	}
	var hasJobs bool
	if err := scan(&hasJobs); err != nil {
		return e.Wrap("delete queue", err)
	}
	if hasJobs {
		return fmt.Errorf("%w: %q holds jobs; force deletes them", queue.ErrQueueNotEmpty, p.Name)
	}
	return nil
}
