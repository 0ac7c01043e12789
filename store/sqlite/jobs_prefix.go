package sqlite

import (
	"context"

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
	ids, err := s.strings(ctx, sqlJobPrefixList, lo, hi, limit)
	return ids, errs.Wrap("job ids by prefix", err)
}
