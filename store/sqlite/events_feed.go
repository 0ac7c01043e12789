package sqlite

import (
	"context"
	"time"

	"github.com/jq-dev/jq/queue"
	"github.com/jq-dev/jq/store"
)

var _ store.EventFeed = (*Store)(nil)

// The feed needs no horizon (see the outbox's statements): every id up to the newest one a reader
// sees is final. EventsRead takes the newest id first and reads up to it, so that the cursor can move
// past the rows the filters drop, and no later commit slips under it.
const (
	sqlFeedNewest = `-- name: events_feed_newest
SELECT coalesce((SELECT max(id) FROM job_events), 0)`

	// The events after the cursor up to the newest id, in id order along the primary key; the
	// filters drop rows of the range (a watched queue's events are interleaved with every other
	// queue's). A row with via_at is two transitions.
	sqlFeedRead = `-- name: events_feed_read
SELECT e.id, e.job_id, e.seq, e.queue, e.type, coalesce(e.from_state, ''), e.to_state,
       e.reason, e.error, e.worker_id, e.attempt, e.created_at, e.via_at
FROM job_events e
WHERE e.id > ?1 AND e.id <= ?2
  AND (?3 = '' OR e.queue = ?3)
  AND (?4 = '' OR EXISTS (SELECT 1 FROM jobs j WHERE j.id = e.job_id AND j.principal = ?4))
ORDER BY e.id
LIMIT ?5`
)

// EventsRead implements store.EventFeed. The result's Horizon carries the newest id read up to (its
// XID is unused here); a read cut by the limit is Pending.
func (s *Store) EventsRead(ctx context.Context, p store.EventsReadParams) (store.EventsReadResult, error) {
	var newest int64
	if err := s.queryRow(ctx, sqlFeedNewest).Scan(&newest); err != nil {
		return store.EventsReadResult{}, errs.Wrap("events read", err)
	}
	if p.FromNow {
		return store.EventsReadResult{After: newest}, nil
	}
	res := store.EventsReadResult{After: p.After, Horizon: store.EventsHorizon{ID: newest}}
	if newest <= p.After {
		return res, nil
	}
	rows, err := s.query(ctx, sqlFeedRead, p.After, newest, p.Queue, p.Principal, p.Limit)
	if err != nil {
		return store.EventsReadResult{}, errs.Wrap("events read", err)
	}
	defer rows.Close()
	var (
		id int64
		n  int
	)
	for rows.Next() {
		var (
			e        queue.Event
			from, to string
			via      time.Time
		)
		if err := rows.Scan(&id, &e.JobID, &e.Seq, &e.Queue, &e.Type, &from, &to, &e.Reason, &e.Error,
			&e.WorkerID, &e.Attempt, tm{&e.At}, tm{&via}); err != nil {
			return store.EventsReadResult{}, errs.Wrap("events read", err)
		}
		n++
		e.From, e.To = queue.State(from), queue.State(to)
		if first, two := splitTransitions(&e, via); two {
			res.Events = append(res.Events, first)
		}
		res.Events = append(res.Events, e)
	}
	if err := rows.Err(); err != nil {
		return store.EventsReadResult{}, errs.Wrap("events read", err)
	}
	if n == p.Limit {
		res.After, res.Pending = id, true // full: the rest of the range at once
	} else {
		res.After = newest
	}
	return res, nil
}
