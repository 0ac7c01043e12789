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

// outboxCursor names the Kafka relay's row in outbox_cursors.
const outboxCursor = "kafka"

// The outbox relay's statements (migration 000012): job_events is append-only and the relay keeps a
// cursor. Leases and ages are compared with the database's now(), one clock for every replica.
const (
	// The cursor, whether the horizon is final (no transaction older than horizon_xid runs), whether
	// a live lease holds the cursor, and the newest event id (one probe of job_events_pkey's end).
	sqlOutboxCursor = `-- name: outbox_cursor
SELECT id, horizon_id, pg_snapshot_xmin(pg_current_snapshot()) >= horizon_xid,
       coalesce(leased_until > now(), false),
       coalesce((SELECT max(id) FROM job_events), 0)
FROM outbox_cursors WHERE name = $1`

	// A new horizon, taken when the cursor has reached the old one: the newest visible id and the
	// xmax of the same snapshot. Every id up to it was drawn by a transaction with an xid below that
	// xmax (the id default takes the xid first), so once the oldest running xid passes it, nothing
	// at or below horizon_id can still appear.
	sqlOutboxHorizon = `-- name: outbox_horizon
UPDATE outbox_cursors
SET horizon_id = coalesce((SELECT max(id) FROM job_events), 0),
    horizon_xid = pg_snapshot_xmax(pg_current_snapshot())
WHERE name = $1 AND id = horizon_id AND (leased_until IS NULL OR leased_until < now())`

	// The lease: only if the cursor is still where the caller read it and no live lease holds it.
	sqlOutboxLease = `-- name: outbox_lease
UPDATE outbox_cursors
SET lease = lease + 1, leased_until = now() + $3 * interval '1 microsecond'
WHERE name = $1 AND id = $2 AND (leased_until IS NULL OR leased_until < now())
RETURNING lease, horizon_id`

	// The rows after the cursor, up to the horizon, in id order (job_events_pkey); a row with via_at
	// is two transitions (migration 000014), expanded by EventsClaim.
	sqlOutboxRead = `-- name: outbox_read
SELECT e.id, e.job_id::text, e.seq, e.queue, e.type, coalesce(e.from_state, ''), e.to_state,
       e.reason, e.error, e.worker_id, e.attempt, e.created_at, e.via_at,
       CASE WHEN e.trace_context = 'null'::jsonb
            THEN (SELECT j.trace_context FROM jobs j WHERE j.id = e.job_id) -- written without the column
            ELSE e.trace_context END
FROM job_events e
WHERE e.id > $1 AND e.id <= $2
ORDER BY e.id
LIMIT $3`

	sqlOutboxAdvance = `-- name: outbox_advance
UPDATE outbox_cursors SET id = greatest(id, $3), leased_until = NULL, updated_at = now()
WHERE name = $1 AND lease = $2 AND leased_until IS NOT NULL`

	sqlOutboxRelease = `-- name: outbox_release
UPDATE outbox_cursors SET leased_until = NULL
WHERE name = $1 AND lease = $2`

	// The advance and the release apply while the claim's lease is the cursor's latest and not
	// ended: an expired lease nobody took over still moves the cursor (its events were published).

	// Both parts walk job_events_pkey from the cursor; the age is that of the first event after it,
	// which is the next one the relay publishes.
	sqlOutboxBacklog = `-- name: outbox_backlog
WITH c AS (SELECT coalesce((SELECT id FROM outbox_cursors WHERE name = $1), 0) AS id)
SELECT (SELECT count(*) + count(via_at) FROM job_events, c WHERE job_events.id > c.id),
       coalesce((SELECT extract(epoch FROM now() - e.created_at) * 1e6
                 FROM job_events e, c WHERE e.id > c.id ORDER BY e.id LIMIT 1), 0)::bigint`
)

// EventsClaim implements store.OutboxStore. It reads the cursor; takes a new horizon when the cursor
// has reached the old one and newer events exist (and reads again: with no older transaction
// running, the new horizon is final at once); and, with a final horizon ahead of the cursor, leases
// the cursor and reads the events up to the horizon. Nothing is written while there is nothing to
// publish.
func (s *Store) EventsClaim(ctx context.Context, p store.EventsClaimParams) (store.OutboxClaim, error) {
	if err := p.Validate(); err != nil {
		return store.OutboxClaim{}, err
	}
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
			return store.OutboxClaim{}, fmt.Errorf("postgres: events claim: %w", err)
		}
		switch {
		case leased:
			return store.OutboxClaim{}, nil
		case cursor >= horizon:
			if newest <= horizon {
				return store.OutboxClaim{}, nil // nothing new
			}
			if _, err := s.pool.Exec(ctx, sqlOutboxHorizon, outboxCursor); err != nil {
				return store.OutboxClaim{}, fmt.Errorf("postgres: events claim: horizon: %w", err)
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
		return store.OutboxClaim{}, fmt.Errorf("postgres: events claim: lease: %w", err)
	}
	rows, err := s.pool.Query(ctx, sqlOutboxRead, cursor, horizon, p.Limit)
	if err != nil {
		return c, fmt.Errorf("postgres: events claim: %w", err)
	}
	var (
		e        store.OutboxEvent
		from, to string
		via      *time.Time
		trace    map[string]string
		read     int
		full     bool // the events reached p.Limit before the rows ran out
	)
	_, err = pgx.ForEachRow(rows, []any{&e.ID, &e.JobID, &e.Seq, &e.Queue, &e.Type, &from, &to, &e.Reason, &e.Error,
		&e.WorkerID, &e.Attempt, &e.At, &via, &trace}, func() error {
		n := 1
		if via != nil {
			n = 2
		}
		if full || (len(c.Events) > 0 && len(c.Events)+n > p.Limit) {
			// A claim never splits a row's transitions, nor carries more than p.Limit events
			// (except a lone row's two when p.Limit is 1).
			full = true
			return nil
		}
		read++
		e.From, e.To, e.At, e.TraceContext = queue.State(from), queue.State(to), e.At.UTC(), nil
		if len(trace) > 0 {
			e.TraceContext = trace
		}
		if start, two := splitTransitions(&e.Event, via); two {
			first := e
			first.Event = start
			c.Events = append(c.Events, first)
		}
		c.Events = append(c.Events, e)
		trace = nil
		return nil
	})
	if err != nil {
		return c, fmt.Errorf("postgres: events claim: %w", err)
	}
	// A short read reached the horizon: the ids between the last row and it were never
	// committed, and marking the claim moves the cursor over them.
	c.Through = horizon
	if read == p.Limit || full {
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
		return fmt.Errorf("postgres: events mark published: %w", err)
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
		return fmt.Errorf("postgres: events release: %w", err)
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
		return store.OutboxBacklog{}, fmt.Errorf("postgres: outbox backlog: %w", err)
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
	first.Seq, first.To, first.Reason, first.Error, first.At = e.Seq-1, queue.StateRunning, store.ReasonImplicitAck, "", via.UTC()
	e.From = queue.StateRunning
	return first, true
}
