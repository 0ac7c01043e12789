package sqlite

import (
	"cmp"
	"context"
	"errors"
	"strconv"
	"time"

	"github.com/jq-dev/jq/queue"
	"github.com/jq-dev/jq/store"
	"github.com/jq-dev/jq/store/internal/sqlstore"
)

// JobList implements store.JobStore. Only the filters in use become SQL predicates. With a queue
// the page walks jobs_queue_created_idx; without one each queue's page is read from that index and
// the pages are merged (there is no index by creation time across queues, as in Postgres).
func (s *Store) JobList(ctx context.Context, p store.JobListParams) (store.JobListResult, error) {
	limit, cursor, err := p.Validate()
	if err != nil {
		return store.JobListResult{}, err
	}
	d := listDialect
	d.Now = func(arg func(any) string) string { return arg(us(s.now())) }
	l := sqlstore.BuildJobList(d, p, limit, cursor)
	q := "SELECT " + jobPageColumns + " FROM jobs WHERE " + l.Where + " ORDER BY " + l.OrderBy + " LIMIT " + l.Limit

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
		a := append([]any{}, l.Args...)
		a[0] = name // listDialect.Queue's parameter
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
	var bound time.Duration
	if l.Unindexed {
		bound = s.listScanBound
	}
	jobs, cut, err := s.jobPages(ctx, bound, limit, p.WithData, p.MaxBytes, less, qs...)
	if errors.Is(err, errPageBound) {
		return store.JobListResult{}, sqlstore.ErrListScanBound(bound)
	}
	if err != nil {
		return store.JobListResult{}, errs.Wrap("list jobs", err)
	}
	if len(jobs) == 0 && p.Queue != "" {
		if _, err := s.QueueGet(ctx, p.Queue); err != nil {
			return store.JobListResult{}, err
		}
	}
	return sqlstore.JobListPage(p, jobs, cut, limit), nil
}

// listDialect is how JobList's filters are written in SQLite. The statement runs once per queue,
// its first parameter set to each queue in turn; Now is the store's clock, set per call.
var listDialect = sqlstore.ListDialect{
	Param: func(n int) string { return "?" + strconv.Itoa(n) },
	Queue: func(_ string, arg func(any) string) string { return "queue = " + arg("") },
	Time:  func(t time.Time) any { return us(t) },
	Labels: func(labels map[string]string, arg func(any) string) []string {
		var where []string
		for k, v := range labels {
			where = append(where, "EXISTS (SELECT 1 FROM json_each(labels) WHERE key = "+arg(k)+" AND value = "+arg(v)+")")
		}
		return where
	},
}
