package sqlite

import (
	"database/sql"
	"errors"

	"modernc.org/sqlite"
	sqlite3 "modernc.org/sqlite/lib"

	"github.com/jq-dev/jq/store/internal/sqlstore"
)

// sqliteCode returns the extended result code of a SQLite error inside err, or 0.
func sqliteCode(err error) int {
	var se *sqlite.Error
	if errors.As(err, &se) {
		return se.Code()
	}
	return 0
}

func isUnique(err error) bool {
	c := sqliteCode(err)
	return c == sqlite3.SQLITE_CONSTRAINT_UNIQUE || c == sqlite3.SQLITE_CONSTRAINT_PRIMARYKEY
}

func isCheck(err error) bool {
	return sqliteCode(err) == sqlite3.SQLITE_CONSTRAINT_CHECK
}

// errs words the store's errors ("sqlite: …"; a missing row is sql.ErrNoRows).
var errs = sqlstore.Errors{Backend: "sqlite", NoRows: sql.ErrNoRows}
