package postgres

import (
	"context"
	"fmt"

	"github.com/jq-dev/jq/queue"
	"github.com/jq-dev/jq/store"
)

var _ store.RetentionStore = (*Store)(nil)

// sqlEventsPrune deletes one range of expired published events (migration 000012: published means
// at or below the relay's cursor) of each table, job_events and event_batches. It takes the oldest
// ids up to the cursor ($3: the cursor, or no bound with Kafka off), at most $2 rows of each, and
// deletes that id range as one index range scan of the primary key; within it only events older
// than the retention go (ids and creation times agree but for transactions that overlapped). A
// pass costs the rows it deletes, not the size of the table; it counts the transitions deleted. The retention travels as microseconds and is compared with the database's now(): one clock
// for every replica. Two replicas pruning at once wait for each other's row locks and find the rows
// gone.
const sqlEventsPrune = `-- name: events_prune
WITH r AS (
    SELECT min(id) AS lo, max(id) AS hi
    FROM (SELECT id FROM job_events
          WHERE $3::bigint IS NULL OR id <= $3
          ORDER BY id LIMIT $2) oldest
),
rb AS (
    SELECT min(id) AS lo, max(id) AS hi
    FROM (SELECT id FROM event_batches
          WHERE $3::bigint IS NULL OR id <= $3
          ORDER BY id LIMIT $2) oldest
),
rows AS (
    DELETE FROM job_events e
    USING r
    WHERE e.id BETWEEN r.lo AND r.hi AND e.created_at < now() - $1 * interval '1 microsecond'
    RETURNING e.via_at
),
batches AS (
    DELETE FROM event_batches b
    USING rb
    WHERE b.id BETWEEN rb.lo AND rb.hi AND b.created_at < now() - $1 * interval '1 microsecond'
    RETURNING b.n
)
SELECT (SELECT count(*) + count(via_at) FROM rows) + (SELECT coalesce(sum(n), 0) FROM batches)`

// sqlOutboxPublished is the relay's cursor: every event at or below it is published.
const sqlOutboxPublished = `-- name: outbox_published
SELECT coalesce((SELECT id FROM outbox_cursors WHERE name = $1), 0)`

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
	var through *int64 // nil: no bound (Kafka off, nothing is owed to it)
	if !p.Unpublished {
		var c int64
		if err := s.pool.QueryRow(ctx, sqlOutboxPublished, outboxCursor).Scan(&c); err != nil {
			return 0, errs.Wrap("events prune", err)
		}
		through = &c
	}
	var n int64
	if err := s.pool.QueryRow(ctx, sqlEventsPrune, p.OlderThan.Microseconds(), p.Limit, through).Scan(&n); err != nil {
		return 0, errs.Wrap("events prune", err)
	}
	return n, nil
}
