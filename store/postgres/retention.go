package postgres

import (
	"context"
	"fmt"

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
