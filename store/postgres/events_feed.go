package postgres

import (
	"context"

	"github.com/jq-dev/jq/store"
)

var _ store.EventFeed = (*Store)(nil)

const (
	// The newest event id (one probe of each primary key's end) and the snapshot's xmin and xmax: a
	// horizon taken now is (newest, xmax); one taken earlier is final once xmin has reached its xid
	// (migration 000012 explains why the id default makes that hold).
	sqlFeedPoint = `-- name: events_feed_point
SELECT ` + sqlNewestEvent + `,
       pg_snapshot_xmin(s)::text::bigint, pg_snapshot_xmax(s)::text::bigint
FROM pg_current_snapshot() s`

	// The events after the cursor up to a final horizon, in id order, both tables (migration
	// 000022): eventRangeSQL, each event with whether the filters keep it ($4: a queue, $5: a
	// principal; '' for any). The range is read whole: a watched queue's events are interleaved with
	// every other queue's.
	sqlFeedVisible = `($4 = '' OR e.queue = $4)
       AND ($5 = '' OR EXISTS (SELECT 1 FROM jobs j WHERE j.id = e.job_id AND j.principal = $5))`
)

var sqlFeedRead = eventRangeSQL("events_feed_read", sqlFeedVisible)

// EventsRead implements store.EventFeed.
func (s *Store) EventsRead(ctx context.Context, p store.EventsReadParams) (store.EventsReadResult, error) {
	res := store.EventsReadResult{After: p.After, Horizon: p.Horizon}
	for range 2 { // a second round when the horizon taken in the first is final at once
		var newest, xmin, xmax int64
		if err := s.pool.QueryRow(ctx, sqlFeedPoint).Scan(&newest, &xmin, &xmax); err != nil {
			return store.EventsReadResult{}, errs.Wrap("events read", err)
		}
		if p.FromNow {
			return store.EventsReadResult{After: newest}, nil
		}
		if res.Horizon.ID > res.After && xmin >= res.Horizon.XID {
			n, err := s.feedRead(ctx, &res, p, p.Limit-len(res.Events))
			if err != nil {
				return store.EventsReadResult{}, err
			}
			if n == p.Limit-len(res.Events) || len(res.Events) >= p.Limit {
				res.Pending = true // full: the rest up to the horizon at once
				return res, nil
			}
		}
		if res.Horizon.ID <= res.After && newest > res.After {
			res.Horizon = store.EventsHorizon{ID: newest, XID: xmax}
		}
		if res.Horizon.ID <= res.After || xmin < res.Horizon.XID {
			break
		}
	}
	res.Pending = res.Horizon.ID > res.After
	return res, nil
}

// feedRead reads up to limit rows after res.After up to res.Horizon.ID into res, and moves the
// cursor to the horizon, or to the last row read when the limit cut the range. It returns the rows
// read.
func (s *Store) feedRead(ctx context.Context, res *store.EventsReadResult, p store.EventsReadParams, limit int) (int, error) {
	rows, err := s.pool.Query(ctx, sqlFeedRead, res.After, res.Horizon.ID, limit, p.Queue, p.Principal)
	if err != nil {
		return 0, errs.Wrap("events read", err)
	}
	var (
		r       eventRow
		visible bool
		last    int64 = -1
		n       int
	)
	err = forEachEventRow(rows, &r, []any{&visible}, func() error {
		if r.id != last {
			n++
			last = r.id
		}
		evs := r.events()
		if visible {
			res.Events = append(res.Events, evs...)
		}
		return nil
	})
	if err != nil {
		return n, errs.Wrap("events read", err)
	}
	if n == limit {
		res.After = last // the rest of the range next time
	} else {
		res.After = res.Horizon.ID
	}
	return n, nil
}
