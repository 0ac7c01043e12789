package postgres

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/jq-dev/jq/queue"
	"github.com/jq-dev/jq/store"
)

var _ store.EventFeed = (*Store)(nil)

const (
	// The newest event id (one probe of job_events_pkey's end) and the snapshot's xmin and xmax: a
	// horizon taken now is (newest, xmax); one taken earlier is final once xmin has reached its xid
	// (migration 000012 explains why the id default makes that hold).
	sqlFeedPoint = `-- name: events_feed_point
SELECT coalesce((SELECT max(id) FROM job_events), 0),
       pg_snapshot_xmin(s)::text::bigint, pg_snapshot_xmax(s)::text::bigint
FROM pg_current_snapshot() s`

	// The events after the cursor up to a final horizon, in id order along job_events_pkey; the
	// filters drop rows of the range (the range is read whole: a watched queue's events are
	// interleaved with every other queue's). A row with via_at is two transitions.
	sqlFeedRead = `-- name: events_feed_read
SELECT e.id, e.job_id::text, e.seq, e.queue, e.type, coalesce(e.from_state, ''), e.to_state,
       e.reason, e.error, e.worker_id, e.attempt, e.created_at, e.via_at
FROM job_events e
WHERE e.id > $1 AND e.id <= $2
  AND ($3 = '' OR e.queue = $3)
  AND ($4 = '' OR EXISTS (SELECT 1 FROM jobs j WHERE j.id = e.job_id AND j.principal = $4))
ORDER BY e.id
LIMIT $5`
)

// EventsRead implements store.EventFeed.
func (s *Store) EventsRead(ctx context.Context, p store.EventsReadParams) (store.EventsReadResult, error) {
	if err := p.Validate(); err != nil {
		return store.EventsReadResult{}, err
	}
	res := store.EventsReadResult{After: p.After, Horizon: p.Horizon}
	for range 2 { // a second round when the horizon taken in the first is final at once
		var newest, xmin, xmax int64
		if err := s.pool.QueryRow(ctx, sqlFeedPoint).Scan(&newest, &xmin, &xmax); err != nil {
			return store.EventsReadResult{}, fmt.Errorf("postgres: events read: %w", err)
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
	rows, err := s.pool.Query(ctx, sqlFeedRead, res.After, res.Horizon.ID, p.Queue, p.Principal, limit)
	if err != nil {
		return 0, fmt.Errorf("postgres: events read: %w", err)
	}
	var (
		id       int64
		e        queue.Event
		from, to string
		via      *time.Time
		n        int
	)
	_, err = pgx.ForEachRow(rows, []any{&id, &e.JobID, &e.Seq, &e.Queue, &e.Type, &from, &to, &e.Reason, &e.Error,
		&e.WorkerID, &e.Attempt, &e.At, &via}, func() error {
		n++
		e.From, e.To, e.At = queue.State(from), queue.State(to), e.At.UTC()
		if first, two := splitTransitions(&e, via); two {
			res.Events = append(res.Events, first)
		}
		res.Events = append(res.Events, e)
		return nil
	})
	if err != nil {
		return n, fmt.Errorf("postgres: events read: %w", err)
	}
	if n == limit {
		res.After = id // the rest of the range next time
	} else {
		res.After = res.Horizon.ID
	}
	return n, nil
}
