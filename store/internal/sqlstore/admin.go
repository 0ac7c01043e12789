package sqlstore

import (
	"github.com/jq-dev/jq/queue"
	"github.com/jq-dev/jq/store"
)

// PeekStatements are a store's statements of JobPeek: a queue's due jobs in dispatch order, those
// of one priority level, and its dead letters, newest first. They take the same arguments, the
// level's statement also the priority, after the others.
type PeekStatements struct{ Pending, Level, Dead string }

// For is the statement that reads p's page, and its arguments: args, then the priority of a level.
func (st PeekStatements) For(p store.JobPeekParams, args ...any) (string, []any) {
	switch {
	case p.Dead:
		return st.Dead, args
	case p.Priority != nil:
		return st.Level, append(args, *p.Priority)
	}
	return st.Pending, args
}

// PeekResult is JobPeek's result from the page read (jobs, cut by the byte budget or not). Only
// an empty page asks queueMustExist, so that a missing queue is not shown as an empty one.
func PeekResult(jobs []*queue.Job, cut bool, queueMustExist func() error) (store.JobPeekResult, error) {
	if len(jobs) == 0 {
		if err := queueMustExist(); err != nil {
			return store.JobPeekResult{}, err
		}
	}
	return store.JobPeekResult{Jobs: jobs, Truncated: cut}, nil
}
