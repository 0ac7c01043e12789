package sqlite

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/jq-dev/jq/queue"
	"github.com/jq-dev/jq/store"
)

// JobList implements store.JobStore. Only the filters in use become SQL predicates. With a queue
// the page walks jobs_queue_created_idx; without one each queue's page is read from that index and
// the pages are merged (there is no index by creation time across queues, as in Postgres).
func (s *Store) JobList(ctx context.Context, p store.JobListParams) (store.JobListResult, error) {
	limit, cursor, err := p.Validate()
	if err != nil {
		return store.JobListResult{}, err
	}
	var (
		where []string
		args  = []any{""} // ?1: the queue, set per statement
	)
	arg := func(v any) string {
		args = append(args, v)
		return "?" + strconv.Itoa(len(args))
	}
	where = append(where, "queue = ?1")
	if len(p.States) > 0 {
		where = append(where, store.StateFilterSQL(p.States))
	}
	for k, v := range p.Labels {
		where = append(where, "EXISTS (SELECT 1 FROM json_each(labels) WHERE key = "+arg(k)+" AND value = "+arg(v)+")")
	}
	if p.Principal != "" {
		where = append(where, "principal = "+arg(p.Principal))
	}
	if p.Type != "" {
		where = append(where, "type = "+arg(p.Type))
	}
	if !p.CreatedAfter.IsZero() {
		where = append(where, "created_at >= "+arg(us(p.CreatedAfter)))
	}
	if !p.CreatedBefore.IsZero() {
		where = append(where, "created_at < "+arg(us(p.CreatedBefore)))
	}
	if !p.CompletedAfter.IsZero() {
		where = append(where, "completed_at >= "+arg(us(p.CompletedAfter)))
	}
	if !p.CompletedBefore.IsZero() {
		b := arg(us(p.CompletedBefore))
		where = append(where, "completed_at < "+b, "created_at < "+b)
	}
	if p.Scheduled {
		where = append(where, "state = 'PENDING'", "not_before > "+arg(us(s.now())))
	}
	for _, st := range queue.States() {
		if c, ok := p.CancelledIn[st]; ok {
			where = append(where, "(state <> '"+string(st)+"' OR (cancel_requested OR failure_reason = '"+
				queue.ReasonCancelled+"') = "+arg(c)+")")
		}
	}
	cmpOp, dir := "<", "DESC"
	if p.Ascending {
		cmpOp, dir = ">", "ASC"
	}
	if cursor != nil {
		where = append(where, "(created_at, id) "+cmpOp+" ("+arg(us(cursor.CreatedAt))+", "+arg(cursor.ID)+")")
	}
	q := "SELECT " + jobPageColumns + " FROM jobs WHERE " + strings.Join(where, " AND ") +
		" ORDER BY created_at " + dir + ", id " + dir + " LIMIT " + arg(limit+1)

	queues := []string{p.Queue}
	if p.Queue == "" {
		all, err := s.QueueList(ctx)
		if err != nil {
			return store.JobListResult{}, err
		}
		queues = queues[:0]
		for _, qu := range all {
			queues = append(queues, qu.Name)
		}
	}
	qs := make([]pageQuery, len(queues))
	for i, name := range queues {
		a := append([]any{}, args...)
		a[0] = name
		qs[i] = pageQuery{q, a}
	}
	less := func(a, b *queue.Job) int {
		c := a.CreatedAt.Compare(b.CreatedAt)
		if c == 0 {
			c = cmp.Compare(a.ID, b.ID)
		}
		if !p.Ascending {
			c = -c
		}
		return c
	}
	var bound = s.listScanBound
	if len(p.Labels) == 0 && p.Type == "" && p.CompletedAfter.IsZero() && p.CompletedBefore.IsZero() {
		bound = 0
	}
	jobs, cut, err := s.jobPages(ctx, bound, limit, p.WithData, p.MaxBytes, less, qs...)
	if errors.Is(err, errPageBound) {
		return store.JobListResult{}, fmt.Errorf("%w: the labels, type or completion time filter found no full page "+
			"within %v (these filters have no index: the server checks job after job, newest first); narrow the "+
			"listing by queue, state or creation time", queue.ErrLimitReached, bound)
	}
	if err != nil {
		return store.JobListResult{}, fmt.Errorf("sqlite: list jobs: %w", err)
	}
	if len(jobs) == 0 && p.Queue != "" {
		if _, err := s.QueueGet(ctx, p.Queue); err != nil {
			return store.JobListResult{}, err
		}
	}
	var res store.JobListResult
	if cut || len(jobs) > limit {
		jobs = jobs[:min(len(jobs), limit)]
		res.NextCursor = p.CursorAfter(jobs[len(jobs)-1])
	}
	res.Jobs = jobs
	return res, nil
}
