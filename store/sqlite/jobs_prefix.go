package sqlite

import (
	"context"
	"fmt"

	"github.com/jq-dev/jq/store/internal/sqlstore"
)

// sqlJobPrefixList reads a range of the unique index on id: ids are canonical lower-case text,
// which sorts as the UUIDs do, so the ids that start with the prefix lie between its first and
// last UUID.
const sqlJobPrefixList = `SELECT id FROM jobs WHERE id BETWEEN ?1 AND ?2 ORDER BY id LIMIT ?3`

// JobPrefixList implements store.JobStore.
func (s *Store) JobPrefixList(ctx context.Context, prefix string, limit int) ([]string, error) {
	lo, hi, err := sqlstore.JobIDPrefixRange(prefix, limit)
	if err != nil {
		return nil, err
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
