package sqlite

import (
	"context"
	"fmt"
	"math"

	"github.com/jq-dev/jq/queue"
	"github.com/jq-dev/jq/store"
)

var _ store.RetentionStore = (*Store)(nil)

const (
	// sqlEventsPrune deletes one range of expired published events (published: at or below the
	// relay's cursor). It takes the oldest ids up to ?1 (the cursor, or no bound with Kafka off), at
	// most ?2 of them, and deletes that id range along the primary key; within it only events created
	// before ?3 go. A batch costs the rows it deletes, not the size of the table.
	sqlEventsPrune = `-- name: events_prune
WITH oldest AS (SELECT id FROM job_events WHERE id <= ?1 ORDER BY id LIMIT ?2)
DELETE FROM job_events
WHERE id BETWEEN (SELECT min(id) FROM oldest) AND (SELECT max(id) FROM oldest) AND created_at < ?3`

	// sqlOutboxPublished is the relay's cursor: every event at or below it is published.
	sqlOutboxPublished = `-- name: outbox_published
SELECT coalesce((SELECT id FROM outbox_cursors WHERE name = ?1), 0)`

	// sqlJobResultsDrop drops one batch of expired results. The candidates come from
	// jobs_result_kept_idx (queue, completed_at), which holds only the rows that still have result
	// bytes: queue after queue, each from its oldest completed_at up to its cutoff (?1, now, minus
	// its result_retention), until the batch is full — the walk's order; an ORDER BY would make
	// SQLite sort every expired result of a queue first. updated_at is left alone: dropping a result is
	// housekeeping, not a change of the job (and the job retention keys on it).
	sqlJobResultsDrop = `-- name: job_results_drop
UPDATE jobs SET result = NULL
WHERE id IN (
    SELECT j.id FROM queues q CROSS JOIN jobs j INDEXED BY jobs_result_kept_idx
    WHERE j.queue = q.name AND j.result IS NOT NULL AND j.state = 'DONE'
      AND j.completed_at < ?1 - q.result_retention_ms * 1000
    LIMIT ?2
)
RETURNING queue`
)

// EventsPrune implements store.RetentionStore. Passes are writes, one after the other: concurrent
// ones never see the same rows.
func (s *Store) EventsPrune(ctx context.Context, p store.EventsPruneParams) (int64, error) {
	var n int64
	err := s.write(ctx, func(tx *wtx) error {
		through := int64(math.MaxInt64) // no bound: Kafka is off, nothing is owed to it
		if !p.Unpublished {
			if err := tx.queryRow(sqlOutboxPublished, outboxCursor).Scan(&through); err != nil {
				return err
			}
		}
		res, err := tx.exec(sqlEventsPrune, through, p.Limit, us(tx.now.Add(-p.OlderThan)))
		if err != nil {
			return err
		}
		n, err = res.RowsAffected()
		return err
	})
	if err != nil {
		return 0, errs.Wrap("events prune", err)
	}
	return n, nil
}

// JobResultsDrop implements store.RetentionStore.
func (s *Store) JobResultsDrop(ctx context.Context, limit int) (map[string]int, error) {
	if limit < 1 || limit > store.MaxResultsDropBatch {
		return nil, fmt.Errorf("%w: results drop limit must be 1..%d, got %d", queue.ErrInvalidArgument,
			store.MaxResultsDropBatch, limit)
	}
	var out map[string]int
	err := s.write(ctx, func(tx *wtx) error {
		out = map[string]int{}
		rows, err := tx.query(sqlJobResultsDrop, us(tx.now), limit)
		if err != nil {
			return err
		}
		defer rows.Close()
		var q string
		for rows.Next() {
			if err := rows.Scan(&q); err != nil {
				return err
			}
			out[q]++
		}
		return rows.Err()
	})
	if err != nil {
		return nil, errs.Wrap("drop expired results", err)
	}
	return out, nil
}
