package main

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

const pad16 = "xxxxxxxxxxxxxxxx" // every system's job carries about 16 bytes

func databaseURL(base, db string) string {
	return strings.TrimRight(base, "/") + "/" + db + "?sslmode=disable"
}

// freshDatabase drops and creates db. Only names starting with cmp_ are accepted, so a wrong flag
// cannot drop anyone else's database.
func freshDatabase(ctx context.Context, base, db string) error {
	if !strings.HasPrefix(db, "cmp_") || strings.ContainsAny(db, `"; `) {
		return fmt.Errorf("refusing database %q: only cmp_* names are dropped and created", db)
	}
	conn, err := pgx.Connect(ctx, databaseURL(base, "postgres"))
	if err != nil {
		return fmt.Errorf("postgres: %w", err)
	}
	defer conn.Close(ctx)
	ident := pgx.Identifier{db}.Sanitize()
	if _, err := conn.Exec(ctx, "DROP DATABASE IF EXISTS "+ident+" WITH (FORCE)"); err != nil {
		return fmt.Errorf("drop %s: %w", db, err)
	}
	if _, err := conn.Exec(ctx, "CREATE DATABASE "+ident); err != nil {
		return fmt.Errorf("create %s: %w", db, err)
	}
	return nil
}

func queryInt(ctx context.Context, pool *pgxpool.Pool, sql string) (int, error) {
	var n int
	err := pool.QueryRow(ctx, sql).Scan(&n)
	return n, err
}

// pgTimings reads rows of (started, completed, created) timestamps.
func pgTimings(ctx context.Context, pool *pgxpool.Pool, sql string, from, to time.Time) (timings, error) {
	rows, err := pool.Query(ctx, sql)
	if err != nil {
		return timings{}, err
	}
	defer rows.Close()
	var t timings
	for rows.Next() {
		var started, completed, created *time.Time
		if err := rows.Scan(&started, &completed, &created); err != nil {
			return timings{}, err
		}
		if started == nil || completed == nil || created == nil {
			continue
		}
		t.add(*started, *completed, *created, from, to)
	}
	return t, rows.Err()
}

// walLSN is the cluster's current WAL position in bytes. It counts every database of the cluster,
// so other users of the same Postgres add to it.
func walLSN(ctx context.Context, base string) (int64, error) {
	conn, err := pgx.Connect(ctx, databaseURL(base, "postgres"))
	if err != nil {
		return 0, err
	}
	defer conn.Close(ctx)
	var n int64
	err = conn.QueryRow(ctx, `SELECT pg_wal_lsn_diff(pg_current_wal_lsn(), '0/0')::bigint`).Scan(&n)
	return n, err
}

// inParallel runs do over total items in chunks of chunk from workers goroutines; the first error
// stops the rest.
func inParallel(ctx context.Context, total, chunk, workers int, do func(ctx context.Context, n int) error) error {
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	var mu sync.Mutex
	next := 0
	take := func() int {
		mu.Lock()
		defer mu.Unlock()
		n := min(chunk, total-next)
		next += n
		return n
	}
	var wg sync.WaitGroup
	for range workers {
		wg.Go(func() {
			for ctx.Err() == nil {
				n := take()
				if n <= 0 {
					return
				}
				if err := do(ctx, n); err != nil {
					cancel(err)
					return
				}
			}
		})
	}
	wg.Wait()
	if err := context.Cause(ctx); err != nil && !errors.Is(err, context.Canceled) {
		return err
	}
	return ctx.Err()
}
