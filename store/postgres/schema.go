package postgres

import (
	"context"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"
)

// schemaVersionSQL reads golang-migrate's bookkeeping row (one row, or none before the first
// migration).
const schemaVersionSQL = `-- name: schema_version
SELECT version, dirty FROM schema_migrations LIMIT 1`

// SchemaVersion reports the applied schema version (0 when none) and whether the last migration
// failed half-way, through the pool: cheap enough for every readiness probe.
func (s *Store) SchemaVersion(ctx context.Context) (version uint, dirty bool, err error) {
	var v int64
	err = s.pool.QueryRow(ctx, schemaVersionSQL).Scan(&v, &dirty)
	switch {
	case errors.Is(err, pgx.ErrNoRows):
		return 0, false, nil
	case err != nil:
		return 0, false, errs.Wrap("schema version", err)
	case v < 0:
		return 0, dirty, fmt.Errorf("postgres: schema version %d is negative", v)
	}
	return uint(v), dirty, nil
}
