package main

import (
	"context"
	"database/sql"
	"net/url"
	"path/filepath"
	"time"

	_ "modernc.org/sqlite" // the embedded store's file, read-only
)

// liteDB opens the embedded jq's database read-only (WAL: beside its writer, in another process).
func (j *jqSystem) liteDB() (*sql.DB, error) {
	if j.lite != nil {
		return j.lite, nil
	}
	path := filepath.Join(j.dataDir, "jq.db")
	db, err := sql.Open("sqlite", "file:"+(&url.URL{Path: path}).EscapedPath()+"?mode=ro&_pragma=busy_timeout(10000)")
	if err != nil {
		return nil, err
	}
	db.SetMaxOpenConns(2)
	j.lite = db
	return db, nil
}

func (j *jqSystem) liteInt(ctx context.Context, q string) (int, error) {
	db, err := j.liteDB()
	if err != nil {
		return 0, err
	}
	var n int
	err = db.QueryRowContext(ctx, q).Scan(&n)
	return n, err
}

// liteTimings is pgTimings over the embedded store: times are microseconds since the epoch.
func (j *jqSystem) liteTimings(ctx context.Context, from, to time.Time) (timings, error) {
	db, err := j.liteDB()
	if err != nil {
		return timings{}, err
	}
	rows, err := db.QueryContext(ctx, `SELECT started_at, completed_at, created_at FROM jobs WHERE state = 'DONE'`)
	if err != nil {
		return timings{}, err
	}
	defer rows.Close()
	var t timings
	for rows.Next() {
		var s, c, cr sql.NullInt64
		if err := rows.Scan(&s, &c, &cr); err != nil {
			return timings{}, err
		}
		if !s.Valid || !c.Valid || !cr.Valid {
			continue
		}
		t.add(time.UnixMicro(s.Int64), time.UnixMicro(c.Int64), time.UnixMicro(cr.Int64), from, to)
	}
	return t, rows.Err()
}
