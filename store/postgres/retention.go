package postgres

import (
	"context"
	"fmt"

	"github.com/jq-dev/jq/queue"
	"github.com/jq-dev/jq/store"
)

var _ store.RetentionStore = (*Store)(nil)

// sqlEventsPrune deletes one batch of expired published events (migration 000006). The inner
// select walks job_events_published_created_idx from the oldest published event and stops at the
// cutoff or the limit; the delete then finds each row by primary key. A batch costs the rows it
// deletes, not the size of the table. SKIP LOCKED:
// two servers' passes take disjoint batches, and neither waits on the other. The retention travels
// as microseconds and is compared with the database's now(): one clock for every replica.
const sqlEventsPrune = `-- name: events_prune
DELETE FROM job_events
WHERE id = ANY(ARRAY(
    SELECT id FROM job_events
    WHERE published_at IS NOT NULL AND created_at < now() - $1 * interval '1 microsecond'
    ORDER BY created_at
    LIMIT $2
    FOR UPDATE SKIP LOCKED))`

// sqlEventsPruneUnpublished deletes, with Kafka off, the expired events among the oldest
// unpublished ones: the inner select walks job_events_unpublished_idx in id order and stops at the
// limit, so a batch costs at most that many rows however many unpublished events are newer.
const sqlEventsPruneUnpublished = `-- name: events_prune_unpublished
DELETE FROM job_events
WHERE id = ANY(ARRAY(
    SELECT id FROM (
        SELECT id, created_at FROM job_events
        WHERE published_at IS NULL
        ORDER BY id
        LIMIT $2
        FOR UPDATE SKIP LOCKED) oldest
    WHERE created_at < now() - $1 * interval '1 microsecond'))`

// sqlJobResultsDrop drops one batch of expired results (migration 000010). Each queue's candidates
// come from jobs_result_kept_idx, which holds only the rows that still have result bytes: the
// lateral walks that queue's range from the oldest completed_at and stops at its cutoff (now()
// minus the queue's result_retention) or the limit, and the outer limit stops the walk over the
// queues once the batch is full. A batch costs the rows it drops plus one index probe per queue,
// however many jobs the table holds. SKIP LOCKED: replicas share the work, and a result being
// consumed right now is left to its consumer. updated_at is left alone: dropping a result is
// housekeeping, not a change of the job (and the job retention keys on it).
const sqlJobResultsDrop = `-- name: job_results_drop
WITH c AS MATERIALIZED (
    SELECT e.id AS c_id
    FROM queues q
    CROSS JOIN LATERAL (
        SELECT id FROM jobs
        WHERE queue = q.name AND result IS NOT NULL AND state = 'DONE'
          AND completed_at < now() - q.result_retention_ms * interval '1 millisecond'
        ORDER BY completed_at
        LIMIT $1
        FOR NO KEY UPDATE SKIP LOCKED
    ) e
    LIMIT $1
),
dropped AS (
    UPDATE jobs SET result = NULL
    FROM c
    WHERE id = c_id
    RETURNING queue
)
SELECT queue, count(*)::int FROM dropped GROUP BY queue`

// JobResultsDrop implements store.RetentionStore.
func (s *Store) JobResultsDrop(ctx context.Context, limit int) (map[string]int, error) {
	if limit < 1 || limit > store.MaxResultsDropBatch {
		return nil, fmt.Errorf("%w: results drop limit must be 1..%d, got %d", queue.ErrInvalidArgument,
			store.MaxResultsDropBatch, limit)
	}
	return countByQueue(ctx, s.pool, sqlJobResultsDrop, limit, "drop expired results")
}

// EventsPrune implements store.RetentionStore.
func (s *Store) EventsPrune(ctx context.Context, p store.EventsPruneParams) (int64, error) {
	if err := p.Validate(); err != nil {
		return 0, err
	}
	tag, err := s.pool.Exec(ctx, sqlEventsPrune, p.OlderThan.Microseconds(), p.Limit)
	if err != nil {
		return 0, fmt.Errorf("postgres: events prune: %w", err)
	}
	n := tag.RowsAffected()
	if !p.Unpublished || n >= int64(p.Limit) {
		return n, nil
	}
	tag, err = s.pool.Exec(ctx, sqlEventsPruneUnpublished, p.OlderThan.Microseconds(), int64(p.Limit)-n)
	if err != nil {
		return n, fmt.Errorf("postgres: events prune (unpublished): %w", err)
	}
	return n + tag.RowsAffected(), nil
}
