package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"

	"github.com/jq-dev/jq/queue"
	"github.com/jq-dev/jq/store"
)

var _ store.OutboxStore = (*Store)(nil)

// outboxCursor names the Kafka relay's row in outbox_cursors.
const outboxCursor = "kafka"

// The outbox relay's statements. job_events is append-only and the relay keeps a cursor, as in
// Postgres (migration 000012), but without its horizon: one writer commits transactions one after
// the other and ids are AUTOINCREMENT, so an id a reader sees is final, and so is every smaller one.
// Leases and ages are compared with the store's clock (tx.now in a write).
const (
	// The cursor, whether a live lease holds it, and the newest event id (the end of the primary
	// key): EventsClaim writes nothing while there is nothing to claim.
	sqlOutboxCursor = `-- name: outbox_cursor
SELECT id, coalesce(leased_until > ?2, 0), coalesce((SELECT max(id) FROM job_events), 0)
FROM outbox_cursors WHERE name = ?1`

	// The lease: only when no live lease holds the cursor. It returns the cursor the lease is on.
	sqlOutboxLease = `-- name: outbox_lease
UPDATE outbox_cursors SET lease = lease + 1, leased_until = ?2 + ?3
WHERE name = ?1 AND (leased_until IS NULL OR leased_until < ?2)
RETURNING lease, id`

	// The rows after the cursor in id order, along the primary key; a row with via_at is two
	// transitions (migration 000014), expanded by EventsClaim.
	sqlOutboxRead = `-- name: outbox_read
SELECT e.id, e.job_id, e.seq, e.queue, e.type, coalesce(e.from_state, ''), e.to_state,
       e.reason, e.error, e.worker_id, e.attempt, e.created_at, e.via_at,
       (SELECT j.trace_context FROM jobs j WHERE j.id = e.job_id)
FROM job_events e
WHERE e.id > ?1
ORDER BY e.id
LIMIT ?2`

	// The advance and the release apply while the claim's lease is the cursor's latest and not
	// ended: an expired lease nobody took over still moves the cursor (its events were published).
	sqlOutboxAdvance = `-- name: outbox_advance
UPDATE outbox_cursors SET id = max(id, ?3), leased_until = NULL, updated_at = ?4
WHERE name = ?1 AND lease = ?2 AND leased_until IS NOT NULL`

	sqlOutboxRelease = `-- name: outbox_release
UPDATE outbox_cursors SET leased_until = NULL
WHERE name = ?1 AND lease = ?2`

	// Both parts walk the primary key from the cursor; the age is that of the first event after
	// it, the next one the relay publishes.
	sqlOutboxBacklog = `-- name: outbox_backlog
SELECT (SELECT count(*) + count(via_at) FROM job_events
        WHERE id > (SELECT id FROM outbox_cursors WHERE name = ?1)),
       coalesce((SELECT created_at FROM job_events
                 WHERE id > (SELECT id FROM outbox_cursors WHERE name = ?1) ORDER BY id LIMIT 1), 0)`
)

// EventsClaim implements store.OutboxStore. It reads the cursor; when events exist after it and no
// live lease holds it, it leases the cursor (a write) and reads the events after it. The read runs
// on the read pool after the lease is committed: while the lease is live the cursor cannot move,
// so the writer is not held while up to p.Limit rows are read.
func (s *Store) EventsClaim(ctx context.Context, p store.EventsClaimParams) (store.OutboxClaim, error) {
	var (
		cursor, newest int64
		leased         bool
	)
	err := s.queryRow(ctx, sqlOutboxCursor, outboxCursor, us(s.now())).Scan(&cursor, &leased, &newest)
	if errors.Is(err, sql.ErrNoRows) {
		return store.OutboxClaim{}, errors.New("sqlite: events claim: no outbox cursor")
	}
	if err != nil {
		return store.OutboxClaim{}, errs.Wrap("events claim", err)
	}
	if leased || newest <= cursor {
		return store.OutboxClaim{}, nil
	}
	var c store.OutboxClaim
	err = s.write(ctx, func(tx *wtx) error {
		err := tx.queryRow(sqlOutboxLease, outboxCursor, us(tx.now), p.Lease.Microseconds()).Scan(&c.Lease, &cursor)
		if errors.Is(err, sql.ErrNoRows) {
			c.Lease = 0 // another relay leased the cursor meanwhile
			return nil
		}
		return err
	})
	if err != nil {
		return store.OutboxClaim{}, errs.Wrap("events claim: lease", err)
	}
	if c.Lease == 0 {
		return store.OutboxClaim{}, nil
	}
	if err := s.outboxRead(ctx, &c, cursor, p.Limit); err != nil {
		// The lease is left to expire: a release could fail the same way.
		return store.OutboxClaim{}, err
	}
	if len(c.Events) == 0 {
		// Every row after the cursor went meanwhile (a prune of unpublished events with Kafka off).
		return store.OutboxClaim{}, s.EventsRelease(ctx, c)
	}
	c.Through = c.Events[len(c.Events)-1].ID
	return c, nil
}

// outboxRead reads up to limit rows after cursor into c.Events.
func (s *Store) outboxRead(ctx context.Context, c *store.OutboxClaim, cursor int64, limit int) error {
	rows, err := s.query(ctx, sqlOutboxRead, cursor, limit)
	if err != nil {
		return errs.Wrap("events claim", err)
	}
	defer rows.Close()
	for rows.Next() {
		var (
			e        store.OutboxEvent
			from, to string
			via      time.Time
			trace    map[string]string
		)
		if err := rows.Scan(&e.ID, &e.JobID, &e.Seq, &e.Queue, &e.Type, &from, &to, &e.Reason, &e.Error,
			&e.WorkerID, &e.Attempt, tm{&e.At}, tm{&via}, jsonCol{&trace}); err != nil {
			return errs.Wrap("events claim", err)
		}
		n := 1
		if !via.IsZero() {
			n = 2
		}
		if len(c.Events) > 0 && len(c.Events)+n > limit {
			// A claim never splits a row's transitions, nor carries more than limit events (except
			// a lone row's two when limit is 1).
			break
		}
		e.From, e.To = queue.State(from), queue.State(to)
		if len(trace) > 0 {
			e.TraceContext = trace
		}
		if start, two := splitTransitions(&e.Event, via); two {
			first := e
			first.Event = start
			c.Events = append(c.Events, first)
		}
		c.Events = append(c.Events, e)
	}
	if err := rows.Err(); err != nil {
		return errs.Wrap("events claim", err)
	}
	return nil
}

// EventsMarkPublished implements store.OutboxStore.
func (s *Store) EventsMarkPublished(ctx context.Context, c store.OutboxClaim) error {
	if c.Lease == 0 {
		return nil
	}
	var n int64
	err := s.write(ctx, func(tx *wtx) error {
		res, err := tx.exec(sqlOutboxAdvance, outboxCursor, c.Lease, c.Through, us(tx.now))
		if err != nil {
			return err
		}
		n, err = res.RowsAffected()
		return err
	})
	if err != nil {
		return errs.Wrap("events mark published", err)
	}
	if n == 0 {
		return fmt.Errorf("%w: the outbox lease %d was taken over by another relay", queue.ErrStaleAttempt, c.Lease)
	}
	return nil
}

// EventsRelease implements store.OutboxStore.
func (s *Store) EventsRelease(ctx context.Context, c store.OutboxClaim) error {
	if c.Lease == 0 {
		return nil
	}
	err := s.write(ctx, func(tx *wtx) error {
		_, err := tx.exec(sqlOutboxRelease, outboxCursor, c.Lease)
		return err
	})
	if err != nil {
		return errs.Wrap("events release", err)
	}
	return nil
}

// OutboxBacklog implements store.OutboxStore.
func (s *Store) OutboxBacklog(ctx context.Context) (store.OutboxBacklog, error) {
	var (
		b        store.OutboxBacklog
		oldestUS int64
	)
	if err := s.queryRow(ctx, sqlOutboxBacklog, outboxCursor).Scan(&b.Events, &oldestUS); err != nil {
		return store.OutboxBacklog{}, errs.Wrap("outbox backlog", err)
	}
	if b.Events > 0 && oldestUS > 0 {
		b.OldestAge = max(0, s.now().Sub(fromUS(oldestUS)).Truncate(time.Microsecond))
	}
	return b, nil
}

// splitTransitions reads a job_events row holding two transitions (via set, migration 000014): it
// returns the first — the start, seq n-1, ASSIGNED→RUNNING at via, reason implicit_ack — and turns e
// into the second, the outcome from RUNNING. A row with one transition (via zero) is left as it is
// (false). As store/postgres's, and the job_transitions view's.
func splitTransitions(e *queue.Event, via time.Time) (queue.Event, bool) {
	if via.IsZero() {
		return queue.Event{}, false
	}
	first := *e
	first.Seq, first.To, first.Reason, first.Error, first.At = e.Seq-1, queue.StateRunning, queue.ReasonImplicitAck, "", via
	e.From = queue.StateRunning
	return first, true
}
