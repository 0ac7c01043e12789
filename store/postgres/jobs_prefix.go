package postgres

import (
	"context"

	"github.com/jackc/pgx/v5"

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
		return nil, errs.Wrap("job ids by prefix", err)
	}
	ids, err := pgx.CollectRows(rows, pgx.RowTo[string])
	return ids, errs.Wrap("job ids by prefix", err)
}
