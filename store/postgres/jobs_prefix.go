package postgres

import (
	"context"
	"fmt"

	"github.com/jq-dev/jq/store/internal/sqlstore"
)

// sqlJobPrefixList reads a range of the primary key (jobs_pkey): the ids that start with the
// prefix lie between its first and last UUID.
const sqlJobPrefixList = `-- name: job_prefix_list
SELECT id::text FROM jobs WHERE id BETWEEN $1::uuid AND $2::uuid ORDER BY id LIMIT $3`

// JobPrefixList implements store.JobStore.
func (s *Store) JobPrefixList(ctx context.Context, prefix string, limit int) ([]string, error) {
	lo, hi, err := sqlstore.JobIDPrefixRange(prefix, limit)
	if err != nil {
		return nil, err
	}
	rows, err := s.pool.Query(ctx, sqlJobPrefixList, lo, hi, limit)
	if err != nil {
		return nil, fmt.Errorf("postgres: job ids by prefix: %w", err)
	}
	defer rows.Close()
	var ids []string
	for rows.Next() {
		var id string
		if err := rows.Scan(&id); err != nil {
			return nil, fmt.Errorf("postgres: job ids by prefix: %w", err)
		}
		ids = append(ids, id)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("postgres: job ids by prefix: %w", err)
	}
	return ids, nil
}
