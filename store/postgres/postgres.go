// Package postgres is the Postgres implementation of store.Store, on pgx v5. The schema is in
// migrations/postgres; callers apply it (migrations.Up) before using a Store.
//
// Every state change is a single compare-and-set statement that also writes the job's event, so the
// jobs table and its history (the Kafka outbox) can never disagree. Driver errors are translated to
// the queue package's sentinels.
package postgres

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/jq-dev/jq/store"
)

// Config configures a Store.
type Config struct {
	DSN            string        // postgres:// URL or keyword/value string
	MaxConns       int32         // pool size; 0: pgx's default (max(4, NumCPU))
	ConnectTimeout time.Duration // per new connection; 0: the DSN's connect_timeout, else none
	// ObserveQuery, when set, receives every statement's duration by name (querytrace.go).
	ObserveQuery QueryObserver
}

// Store is a store.Store over a pgx connection pool.
type Store struct {
	pool *pgxpool.Pool
}

var _ store.Store = (*Store)(nil)

// New builds the pool and pings the database, so a wrong DSN or an unreachable server fails here
// rather than on first use.
func New(ctx context.Context, cfg Config) (*Store, error) {
	if cfg.DSN == "" {
		return nil, errors.New("postgres: DSN is empty")
	}
	pcfg, err := pgxpool.ParseConfig(cfg.DSN)
	if err != nil {
		return nil, fmt.Errorf("postgres: parse DSN: %w", err)
	}
	if cfg.MaxConns > 0 {
		pcfg.MaxConns = cfg.MaxConns
	}
	if cfg.ConnectTimeout > 0 {
		pcfg.ConnConfig.ConnectTimeout = cfg.ConnectTimeout
	}
	if cfg.ObserveQuery != nil {
		pcfg.ConnConfig.Tracer = queryTracer{observe: cfg.ObserveQuery}
	}
	pool, err := pgxpool.NewWithConfig(ctx, pcfg)
	if err != nil {
		return nil, fmt.Errorf("postgres: create pool: %w", err)
	}
	if err := pool.Ping(ctx); err != nil {
		pool.Close()
		return nil, fmt.Errorf("postgres: ping: %w", err)
	}
	return &Store{pool: pool}, nil
}

// customPlan, passed as the first argument of a query, runs the statement as an unnamed prepared
// statement whose description pgx caches: PostgreSQL plans it at every execution with the actual
// arrays and table size. The batch statements that update jobs by id use it. A named (cached)
// statement may settle on a generic plan, and one made while the jobs table was empty or never
// analyzed (every fresh install) scans the whole table and stays in use as the table grows
// (TestHotPlansOnEmptyTable). Statements whose generic plan is right (the submit's insert, JobDue)
// keep pgx's statement cache: planning them anew costs ~0.25 ms a call.
const customPlan = pgx.QueryExecModeCacheDescribe

// Pool exposes the connection pool to components that run their own SQL on the same database
// (scheduler, reaper, outbox relay).
func (s *Store) Pool() *pgxpool.Pool { return s.pool }

// Ping checks that a connection to the database works.
func (s *Store) Ping(ctx context.Context) error {
	if err := s.pool.Ping(ctx); err != nil {
		return fmt.Errorf("postgres: ping: %w", err)
	}
	return nil
}

// Close closes the pool, waiting for connections in use to be returned.
func (s *Store) Close() { s.pool.Close() }
