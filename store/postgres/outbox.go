package postgres

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/jq-dev/jq/queue"
	"github.com/jq-dev/jq/store"
)

var _ store.OutboxStore = (*Store)(nil)

// The outbox relay's statements (migrations 000001 and 000005). Leases are compared with the
// database's now(), one clock for every replica.
const (
	// candidates walks job_events_unpublished_idx in id order and locks what no live lease and no
	// concurrent claim holds (SKIP LOCKED: replicas never wait for each other). An event is only
	// claimed when every earlier unpublished event of its job is claimed with it: otherwise another
	// relay holds the job's earlier event (or it is locked mid-claim) and publishing this one now
	// could overtake it in the job's partition. The lock lasts this statement only; the lease keeps
	// other claims off afterwards.
	sqlEventsClaim = `-- name: events_claim
WITH candidates AS MATERIALIZED (
    SELECT id, job_id, seq
    FROM job_events
    WHERE published_at IS NULL AND (claimed_until IS NULL OR claimed_until < now())
    ORDER BY id
    LIMIT $1
    FOR UPDATE SKIP LOCKED
),
claimable AS (
    SELECT c.id
    FROM candidates c
    WHERE NOT EXISTS (
        SELECT 1 FROM job_events p
        WHERE p.job_id = c.job_id AND p.seq < c.seq AND p.published_at IS NULL
          AND p.id NOT IN (SELECT id FROM candidates))
)
UPDATE job_events e
SET claimed_until = now() + $2 * interval '1 microsecond'
FROM claimable
WHERE e.id = claimable.id
RETURNING e.id, e.job_id::text, e.seq, e.queue, e.type, coalesce(e.from_state, ''), e.to_state,
          e.reason, e.error, e.worker_id, e.attempt, e.created_at,
          (SELECT j.trace_context FROM jobs j WHERE j.id = e.job_id)`

	sqlEventsMarkPublished = `-- name: events_mark_published
UPDATE job_events SET published_at = now(), claimed_until = NULL
WHERE id = ANY($1) AND published_at IS NULL`

	sqlEventsRelease = `-- name: events_release
UPDATE job_events SET claimed_until = NULL
WHERE id = ANY($1) AND published_at IS NULL AND claimed_until IS NOT NULL`

	// Both parts read job_events_unpublished_idx; the age is that of the first event in id order,
	// which is the next one the relay publishes.
	sqlOutboxBacklog = `-- name: outbox_backlog
SELECT count(*),
       coalesce((SELECT extract(epoch FROM now() - created_at) * 1e6
                 FROM job_events WHERE published_at IS NULL ORDER BY id LIMIT 1), 0)::bigint
FROM job_events WHERE published_at IS NULL`
)

// EventsClaim implements store.OutboxStore.
func (s *Store) EventsClaim(ctx context.Context, p store.EventsClaimParams) ([]store.OutboxEvent, error) {
	if err := p.Validate(); err != nil {
		return nil, err
	}
	rows, err := s.pool.Query(ctx, sqlEventsClaim, p.Limit, p.Lease.Microseconds())
	if err != nil {
		return nil, fmt.Errorf("postgres: events claim: %w", err)
	}
	evs, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (store.OutboxEvent, error) {
		var (
			e        store.OutboxEvent
			from, to string
			trace    map[string]string
		)
		if err := r.Scan(&e.ID, &e.JobID, &e.Seq, &e.Queue, &e.Type, &from, &to, &e.Reason, &e.Error,
			&e.WorkerID, &e.Attempt, &e.At, &trace); err != nil {
			return store.OutboxEvent{}, err
		}
		e.From, e.To, e.At = queue.State(from), queue.State(to), e.At.UTC()
		if len(trace) > 0 {
			e.TraceContext = trace
		}
		return e, nil
	})
	if err != nil {
		return nil, fmt.Errorf("postgres: events claim: %w", err)
	}
	// RETURNING has no order.
	slices.SortFunc(evs, func(a, b store.OutboxEvent) int { return cmp.Compare(a.ID, b.ID) })
	return evs, nil
}

// EventsMarkPublished implements store.OutboxStore.
func (s *Store) EventsMarkPublished(ctx context.Context, ids []int64) error {
	if len(ids) == 0 {
		return nil
	}
	if _, err := s.pool.Exec(ctx, sqlEventsMarkPublished, ids); err != nil {
		return fmt.Errorf("postgres: events mark published: %w", err)
	}
	return nil
}

// EventsRelease implements store.OutboxStore.
func (s *Store) EventsRelease(ctx context.Context, ids []int64) error {
	if len(ids) == 0 {
		return nil
	}
	if _, err := s.pool.Exec(ctx, sqlEventsRelease, ids); err != nil {
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
	if err := s.pool.QueryRow(ctx, sqlOutboxBacklog).Scan(&b.Events, &ageUS); err != nil {
		return store.OutboxBacklog{}, fmt.Errorf("postgres: outbox backlog: %w", err)
	}
	b.OldestAge = max(0, time.Duration(ageUS)*time.Microsecond)
	return b, nil
}
