package postgres

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/jq-dev/jq/queue"
	"github.com/jq-dev/jq/store"
)

var _ store.OutboxStore = (*Store)(nil)

// outboxCursor names the Kafka relay's row in outbox_cursors (renamed with the batch events of
// migration 000022, so that an older relay cannot move it past batches it does not read).
const outboxCursor = "kafka.batches"

// sqlOutboxRead reads the events after the cursor, up to the horizon, in id order: job_events rows
// and batches (eventRangeSQL), with their trace contexts.
var sqlOutboxRead = eventRangeSQL("outbox_read", "")

// The outbox relay's statements (migration 000012): events are append-only and the relay keeps a
// cursor. Ids are one order over job_events and event_batches (migration 000022). Leases and ages
// are compared with the database's now(), one clock for every replica.
const (
	// The cursor, whether the horizon is final (no transaction older than horizon_xid runs), whether
	// a live lease holds the cursor, and the newest event id (one probe of each primary key's end).
	sqlOutboxCursor = `-- name: outbox_cursor
SELECT id, horizon_id, pg_snapshot_xmin(pg_current_snapshot()) >= horizon_xid,
       coalesce(leased_until > now(), false),
       ` + sqlNewestEvent + `
FROM outbox_cursors WHERE name = $1`

	// A new horizon, taken when the cursor has reached the old one: the newest visible id and the
	// xmax of the same snapshot. Every id up to it was drawn by a transaction with an xid below that
	// xmax (the id default takes the xid first), so once the oldest running xid passes it, nothing
	// at or below horizon_id can still appear.
	sqlOutboxHorizon = `-- name: outbox_horizon
UPDATE outbox_cursors
SET horizon_id = ` + sqlNewestEvent + `,
    horizon_xid = pg_snapshot_xmax(pg_current_snapshot())
WHERE name = $1 AND id = horizon_id AND (leased_until IS NULL OR leased_until < now())`

	// The lease: only if the cursor is still where the caller read it and no live lease holds it.
	sqlOutboxLease = `-- name: outbox_lease
UPDATE outbox_cursors
SET lease = lease + 1, leased_until = now() + $3 * interval '1 microsecond'
WHERE name = $1 AND id = $2 AND (leased_until IS NULL OR leased_until < now())
RETURNING lease, horizon_id`

	sqlOutboxAdvance = `-- name: outbox_advance
UPDATE outbox_cursors SET id = greatest(id, $3), leased_until = NULL, updated_at = now()
WHERE name = $1 AND lease = $2 AND leased_until IS NOT NULL`

	sqlOutboxRelease = `-- name: outbox_release
UPDATE outbox_cursors SET leased_until = NULL
WHERE name = $1 AND lease = $2`

	// The advance and the release apply while the claim's lease is the cursor's latest and not
	// ended: an expired lease nobody took over still moves the cursor (its events were published).

	// Every part walks a primary key from the cursor; the age is that of the first event after it,
	// which is the next one the relay publishes.
	sqlOutboxBacklog = `-- name: outbox_backlog
WITH c AS (SELECT coalesce((SELECT id FROM outbox_cursors WHERE name = $1), 0) AS id)
SELECT (SELECT count(*) + count(via_at) FROM job_events, c WHERE job_events.id > c.id)
       + (SELECT coalesce(sum(n), 0) FROM event_batches, c WHERE event_batches.id > c.id),
       coalesce((SELECT extract(epoch FROM now() - f.created_at) * 1e6
                 FROM (SELECT e.id, e.created_at FROM job_events e, c WHERE e.id > c.id
                       UNION ALL
                       SELECT b.id, b.created_at FROM event_batches b, c WHERE b.id > c.id) f
                 ORDER BY f.id LIMIT 1), 0)::bigint`
)

// sqlNewestEvent is the newest event id of both tables.
const sqlNewestEvent = `greatest(coalesce((SELECT max(id) FROM job_events), 0),
                coalesce((SELECT max(id) FROM event_batches), 0))`

// EventsClaim implements store.OutboxStore. It reads the cursor; takes a new horizon when the cursor
// has reached the old one and newer events exist (and reads again: with no older transaction
// running, the new horizon is final at once); and, with a final horizon ahead of the cursor, leases
// the cursor and reads the events up to the horizon. Nothing is written while there is nothing to
// publish.
func (s *Store) EventsClaim(ctx context.Context, p store.EventsClaimParams) (store.OutboxClaim, error) {
	for range 3 {
		var (
			cursor, horizon, newest int64
			final, leased           bool
		)
		err := s.pool.QueryRow(ctx, sqlOutboxCursor, outboxCursor).Scan(&cursor, &horizon, &final, &leased, &newest)
		if errors.Is(err, pgx.ErrNoRows) {
			return store.OutboxClaim{}, errors.New("postgres: events claim: no outbox cursor (migration 000012 missing)")
		}
		if err != nil {
			return store.OutboxClaim{}, errs.Wrap("events claim", err)
		}
		switch {
		case leased:
			return store.OutboxClaim{}, nil
		case cursor >= horizon:
			if newest <= horizon {
				return store.OutboxClaim{}, nil // nothing new
			}
			if _, err := s.pool.Exec(ctx, sqlOutboxHorizon, outboxCursor); err != nil {
				return store.OutboxClaim{}, errs.Wrap("events claim: horizon", err)
			}
			continue
		case !final:
			return store.OutboxClaim{}, nil // a transaction that may still commit an event below the horizon runs
		}
		c, err := s.claimTo(ctx, p, cursor)
		if err != nil || len(c.Events) > 0 {
			return c, err
		}
		// Only ids that were never committed lay between the cursor and the horizon: move past them.
		if err := s.EventsMarkPublished(ctx, c); err != nil && !errors.Is(err, queue.ErrStaleAttempt) {
			return store.OutboxClaim{}, err
		}
	}
	return store.OutboxClaim{}, nil
}

// claimTo leases the cursor (still at cursor) and reads the events after it up to the horizon.
func (s *Store) claimTo(ctx context.Context, p store.EventsClaimParams, cursor int64) (store.OutboxClaim, error) {
	var c store.OutboxClaim
	var horizon int64
	err := s.pool.QueryRow(ctx, sqlOutboxLease, outboxCursor, cursor, p.Lease.Microseconds()).Scan(&c.Lease, &horizon)
	if errors.Is(err, pgx.ErrNoRows) {
		return store.OutboxClaim{}, nil // another relay moved or leased the cursor meanwhile
	}
	if err != nil {
		return store.OutboxClaim{}, errs.Wrap("events claim: lease", err)
	}
	rows, err := s.pool.Query(ctx, sqlOutboxRead, cursor, horizon, p.Limit)
	if err != nil {
		return c, errs.Wrap("events claim", err)
	}
	var (
		r      eventRow
		lastID int64 = -1
		ids    int   // ids read
		full   bool  // the events reached p.Limit before the rows ran out
	)
	err = forEachEventRow(rows, &r, nil, func() error {
		if r.id != lastID {
			if full || (len(c.Events) > 0 && len(c.Events) >= p.Limit) {
				// A claim never splits a batch or a row's transitions, and stops at p.Limit
				// events at the first id boundary past it.
				full = true
				return nil
			}
			ids++
			lastID = r.id
		}
		trace := r.trace
		if len(trace) == 0 {
			trace = nil
		}
		id := r.id
		for _, e := range r.events() {
			c.Events = append(c.Events, store.OutboxEvent{ID: id, Event: e, TraceContext: trace})
		}
		return nil
	})
	if err != nil {
		return c, errs.Wrap("events claim", err)
	}
	// A short read reached the horizon: the ids between the last row and it were never
	// committed, and marking the claim moves the cursor over them.
	c.Through = horizon
	if ids == p.Limit || full {
		c.Through = c.Events[len(c.Events)-1].ID
	}
	return c, nil
}

// EventsMarkPublished implements store.OutboxStore.
func (s *Store) EventsMarkPublished(ctx context.Context, c store.OutboxClaim) error {
	if c.Lease == 0 {
		return nil
	}
	tag, err := s.pool.Exec(ctx, sqlOutboxAdvance, outboxCursor, c.Lease, c.Through)
	if err != nil {
		return errs.Wrap("events mark published", err)
	}
	if tag.RowsAffected() == 0 {
		return fmt.Errorf("%w: the outbox lease %d was taken over by another relay", queue.ErrStaleAttempt, c.Lease)
	}
	return nil
}

// EventsRelease implements store.OutboxStore.
func (s *Store) EventsRelease(ctx context.Context, c store.OutboxClaim) error {
	if c.Lease == 0 {
		return nil
	}
	if _, err := s.pool.Exec(ctx, sqlOutboxRelease, outboxCursor, c.Lease); err != nil {
		return errs.Wrap("events release", err)
	}
	return nil
}

// OutboxBacklog implements store.OutboxStore.
func (s *Store) OutboxBacklog(ctx context.Context) (store.OutboxBacklog, error) {
	var (
		b     store.OutboxBacklog
		ageUS int64
	)
	if err := s.pool.QueryRow(ctx, sqlOutboxBacklog, outboxCursor).Scan(&b.Events, &ageUS); err != nil {
		return store.OutboxBacklog{}, errs.Wrap("outbox backlog", err)
	}
	b.OldestAge = max(0, time.Duration(ageUS)*time.Microsecond)
	return b, nil
}

// splitTransitions reads a job_events row holding two transitions (via_at set, migration 000014):
// it returns the first — the start, seq n-1, ASSIGNED→RUNNING at via, reason implicit_ack — and
// turns e into the second, the outcome from RUNNING. A row with one transition (via nil) is left
// as it is (false).
func splitTransitions(e *queue.Event, via *time.Time) (queue.Event, bool) {
	if via == nil {
		return queue.Event{}, false
	}
	first := *e
	first.Seq, first.To, first.Reason, first.Error, first.At = e.Seq-1, queue.StateRunning, queue.ReasonImplicitAck, "", via.UTC()
	e.From = queue.StateRunning
	return first, true
}
