package sqlstore

import (
	"fmt"
	"strings"
	"time"

	"github.com/jq-dev/jq/queue"
	"github.com/jq-dev/jq/store"
)

// ListDialect is what a SQL store writes its own way in a job listing: parameter markers, how a
// time and a job id are bound, the label match and the store's now. The filters themselves, their
// order and the keyset comparison are JobListQuery's, written once for both stores.
type ListDialect struct {
	// Param is the marker of the n-th parameter (from 1): "$n" or "?n".
	Param func(n int) string
	// Queue is the predicate on the job's queue, bound with arg. It is asked first, so a store
	// that runs the statement once per queue can reserve the first parameter for the queue.
	Queue func(queueName string, arg func(any) string) string
	// Time is a time as the store binds it, and TimeCast the cast after its marker.
	Time     func(time.Time) any
	TimeCast string
	// IDCast is the cast after the marker of a job id (the cursor's).
	IDCast string
	// Labels is the predicates that keep the jobs carrying every one of labels (at least one).
	Labels func(labels map[string]string, arg func(any) string) []string
	// Now is the store's current time in a predicate.
	Now func(arg func(any) string) string
}

// JobListQuery is a job listing's SQL, less the statement around it, which each store writes for
// its own way of walking the queues.
type JobListQuery struct {
	// Where is the predicates of the filters and the cursor, joined with AND.
	Where string
	// Dir is the direction of the walk, DESC (newest first) or ASC; OrderBy orders jobs by it.
	Dir, OrderBy string
	// Limit is the marker of the page size plus one: the extra row tells whether another page
	// exists.
	Limit string
	Args  []any
	// Unindexed: a filter no index serves (labels, type, completion time) is checked job after job
	// along the walk, which the store bounds in time (ErrListScanBound).
	Unindexed bool
}

// BuildJobList writes the query of one page of store.JobStore.JobList, for p as validated (the
// limit and cursor its Validate returned). Only the filters in use become predicates.
func BuildJobList(d ListDialect, p store.JobListParams, limit int, cursor *store.JobCursor) JobListQuery {
	var (
		q     JobListQuery
		where []string
	)
	arg := func(v any) string {
		q.Args = append(q.Args, v)
		return d.Param(len(q.Args))
	}
	at := func(t time.Time) string { return arg(d.Time(t)) + d.TimeCast }
	where = append(where, d.Queue(p.Queue, arg))
	if len(p.States) > 0 {
		where = append(where, StateFilterSQL(p.States))
	}
	if len(p.Labels) > 0 {
		where = append(where, d.Labels(p.Labels, arg)...)
	}
	if p.Principal != "" {
		// No index of its own (it would be one more write per job): a producer's list walks the
		// newest-first index and filters, as a label filter does.
		where = append(where, "principal = "+arg(p.Principal))
	}
	if p.Type != "" {
		where = append(where, "type = "+arg(p.Type))
	}
	if !p.CreatedAfter.IsZero() {
		where = append(where, "created_at >= "+at(p.CreatedAfter))
	}
	if !p.CreatedBefore.IsZero() {
		where = append(where, "created_at < "+at(p.CreatedBefore))
	}
	if !p.CompletedAfter.IsZero() {
		where = append(where, "completed_at >= "+at(p.CompletedAfter))
	}
	if !p.CompletedBefore.IsZero() {
		// A job completes after it was created: the bound also limits the index walk.
		b := at(p.CompletedBefore)
		where = append(where, "completed_at < "+b, "created_at < "+b)
	}
	if p.Scheduled {
		// Through the dispatch index (PENDING only) or the newest-first walk.
		where = append(where, "state = 'PENDING'", "not_before > "+d.Now(arg))
	}
	// The cancelled filter tests each named state's jobs, leaving the other states' alone.
	for _, st := range queue.States() {
		if c, ok := p.CancelledIn[st]; ok {
			where = append(where, "(state <> '"+string(st)+"' OR (cancel_requested OR failure_reason = '"+
				queue.ReasonCancelled+"') = "+arg(c)+")")
		}
	}
	// Oldest first walks the same index forwards: the order and the keyset comparison flip together.
	cmp := "<"
	q.Dir = "DESC"
	if p.Ascending {
		cmp, q.Dir = ">", "ASC"
	}
	if cursor != nil {
		where = append(where, "(jobs.created_at, jobs.id) "+cmp+" ("+at(cursor.CreatedAt)+", "+arg(cursor.ID)+d.IDCast+")")
	}
	// The columns are qualified: a bare "id" could bind to a selected id::text and sort text, not
	// the id the cursor compares (and the index holds).
	q.OrderBy = "jobs.created_at " + q.Dir + ", jobs.id " + q.Dir
	q.Limit = arg(limit + 1)
	q.Where = strings.Join(where, " AND ")
	q.Unindexed = len(p.Labels) > 0 || p.Type != "" || !p.CompletedAfter.IsZero() || !p.CompletedBefore.IsZero()
	return q
}

// ErrListScanBound is the refusal of a listing whose unindexed filters (JobListQuery.Unindexed)
// found no full page within bound.
func ErrListScanBound(bound time.Duration) error {
	return fmt.Errorf("%w: the labels, type or completion time filter found no full page "+
		"within %v (these filters have no index: the server checks job after job, newest first); narrow the "+
		"listing by queue, state or creation time", queue.ErrLimitReached, bound)
}

// JobListPage is the page of store.JobStore.JobList from the jobs its query read (up to limit+1)
// and whether a byte budget cut them (PageCut): at most limit jobs, and the cursor after the last
// of them when more may follow.
func JobListPage(p store.JobListParams, jobs []*queue.Job, cut bool, limit int) store.JobListResult {
	var res store.JobListResult
	if cut || len(jobs) > limit {
		jobs = jobs[:min(len(jobs), limit)]
		res.NextCursor = p.CursorAfter(jobs[len(jobs)-1])
	}
	res.Jobs = jobs
	return res
}
