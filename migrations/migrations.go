// Package migrations embeds jq's SQL schema migrations and applies them with golang-migrate.
//
// The files live in postgres/ as NNNNNN_name.up.sql / .down.sql. The server applies them on start
// (NFR-020). Several servers may start at once: golang-migrate's pgx driver serialises them with a
// Postgres advisory lock, so the first applies the migrations and the others find nothing to do.
package migrations

import (
	"context"
	"embed"
	"errors"
	"fmt"

	"github.com/golang-migrate/migrate/v4"
	pgxmigrate "github.com/golang-migrate/migrate/v4/database/pgx/v5"
	"github.com/golang-migrate/migrate/v4/source/iofs"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/stdlib"
)

// Postgres holds the Postgres migrations, under the directory "postgres".
//
//go:embed postgres/*.sql
var Postgres embed.FS

// Up applies every pending migration to the database at dsn (any form pgx accepts: a postgres:// URL or
// keyword/value pairs). A database that is already current is not an error. Cancelling ctx stops after the migration
// in progress.
func Up(ctx context.Context, dsn string) error {
	m, err := open(ctx, dsn)
	if err != nil {
		return err
	}
	defer closeMigrate(m)
	stop := stopOnCancel(ctx, m)
	defer stop()
	if err := m.Up(); err != nil && !errors.Is(err, migrate.ErrNoChange) {
		return fmt.Errorf("migrations: up: %w", err)
	}
	return ctx.Err()
}

// Version reports the applied schema version (0 when none) and whether the last migration failed
// half-way (dirty), for readiness checks.
func Version(ctx context.Context, dsn string) (version uint, dirty bool, err error) {
	m, err := open(ctx, dsn)
	if err != nil {
		return 0, false, err
	}
	defer closeMigrate(m)
	version, dirty, err = m.Version()
	if errors.Is(err, migrate.ErrNilVersion) {
		return 0, false, nil
	}
	if err != nil {
		return 0, false, fmt.Errorf("migrations: version: %w", err)
	}
	return version, dirty, nil
}

// Latest returns the highest migration version embedded in the binary: a database at this version is
// fully migrated.
func Latest() (uint, error) {
	src, err := iofs.New(Postgres, "postgres")
	if err != nil {
		return 0, fmt.Errorf("migrations: source: %w", err)
	}
	defer src.Close()
	v, err := src.First()
	if err != nil {
		return 0, fmt.Errorf("migrations: first: %w", err)
	}
	for {
		next, err := src.Next(v)
		if err != nil {
			return v, nil // Next fails with os.ErrNotExist after the last version
		}
		v = next
	}
}

// open builds the migrator on a database/sql handle of our own rather than from a pgx5:// URL:
// golang-migrate's URL path leaks the handle (and its goroutine) when the first ping fails, and ignores
// ctx while connecting.
func open(ctx context.Context, dsn string) (*migrate.Migrate, error) {
	cfg, err := pgx.ParseConfig(dsn)
	if err != nil {
		return nil, fmt.Errorf("migrations: database DSN: %w", err)
	}
	db := stdlib.OpenDB(*cfg)
	if err := db.PingContext(ctx); err != nil {
		_ = db.Close()
		return nil, fmt.Errorf("migrations: connect: %w", err)
	}
	driver, err := pgxmigrate.WithInstance(db, &pgxmigrate.Config{})
	if err != nil {
		_ = db.Close()
		return nil, fmt.Errorf("migrations: connect: %w", err)
	}
	src, err := iofs.New(Postgres, "postgres")
	if err != nil {
		_ = driver.Close()
		return nil, fmt.Errorf("migrations: source: %w", err)
	}
	m, err := migrate.NewWithInstance("iofs", src, "pgx5", driver)
	if err != nil {
		_ = src.Close()
		_ = driver.Close()
		return nil, fmt.Errorf("migrations: %w", err)
	}
	return m, nil
}

func closeMigrate(m *migrate.Migrate) {
	// Errors closing an embedded source or a finished connection leave nothing to clean up.
	_, _ = m.Close()
}

// stopOnCancel asks m to stop between migrations when ctx is cancelled. The returned func releases
// the watcher.
func stopOnCancel(ctx context.Context, m *migrate.Migrate) func() {
	done := make(chan struct{})
	exited := make(chan struct{})
	go func() {
		defer close(exited)
		select {
		case <-ctx.Done():
			select {
			case m.GracefulStop <- true:
			default:
			}
		case <-done:
		}
	}()
	return func() {
		close(done)
		<-exited
	}
}

// Down reverts every migration. It exists for tests and for operators rebuilding a development
// database; the server never calls it.
func Down(ctx context.Context, dsn string) error {
	m, err := open(ctx, dsn)
	if err != nil {
		return err
	}
	defer closeMigrate(m)
	stop := stopOnCancel(ctx, m)
	defer stop()
	if err := m.Down(); err != nil && !errors.Is(err, migrate.ErrNoChange) {
		return fmt.Errorf("migrations: down: %w", err)
	}
	return ctx.Err()
}
