package sqlite

import (
	"context"
	"fmt"

	"github.com/jq-dev/jq/queue"
	"github.com/jq-dev/jq/store"
)

// sqlJobPrefixList reads a range of the unique index on id: ids are canonical lower-case text,
// which sorts as the UUIDs do, so the ids that start with the prefix lie between its first and
// last UUID.
const sqlJobPrefixList = `SELECT id FROM jobs WHERE id BETWEEN ?1 AND ?2 ORDER BY id LIMIT ?3`

// JobPrefixList implements store.JobStore.
func (s *Store) JobPrefixList(ctx context.Context, prefix string, limit int) ([]string, error) {
	lo, hi, err := store.JobIDPrefixRange(prefix)
	if err != nil {
		return nil, err
	}
	if limit < 1 || limit > store.MaxIDPrefixMatches {
		return nil, fmt.Errorf("%w: limit %d: want 1..%d", queue.ErrInvalidArgument, limit, store.MaxIDPrefixMatches)
	}
	rows, err := s.query(ctx, sqlJobPrefixList, lo, hi, limit)
	if err != nil {
		return nil, fmt.Errorf("sqlite: job ids by prefix: %w", err)
	}
	defer rows.Close()
	var ids []string
	for rows.Next() {
		var id string
		if err := rows.Scan(&id); err != nil {
			return nil, fmt.Errorf("sqlite: job ids by prefix: %w", err)
		}
		ids = append(ids, id)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("sqlite: job ids by prefix: %w", err)
	}
	return ids, nil
}
