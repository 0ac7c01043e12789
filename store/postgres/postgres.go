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
	"maps"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/jq-dev/jq/store"
)

// Config configures a Store.
type Config struct {
	DSN      string // postgres:// URL or keyword/value string
	MaxConns int32  // pool size; 0: pgx's default (max(4, NumCPU))
	// DispatchConns sizes the second pool that runs the core loop's batch updates (see dispatchParams);
	// 0: max(2, MaxConns/2).
	DispatchConns  int32
	ConnectTimeout time.Duration // per new connection; 0: the DSN's connect_timeout, else none
	// ObserveQuery, when set, receives every statement's duration by name (querytrace.go).
	ObserveQuery QueryObserver
}

// Store is a store.Store over a pgx connection pool.
type Store struct {
	pool *pgxpool.Pool
	// dispatch runs JobClaim, JobAssignMany, JobAckMany and JobReportMany (dispatchParams).
	dispatch *pgxpool.Pool
	// listScanBound bounds a job list with filters that have no index (jobListScanBound).
	listScanBound time.Duration
}

var _ store.Store = (*Store)(nil)
var _ store.DepthStore = (*Store)(nil)

// New builds the pool and pings the database, so a wrong DSN or an unreachable server fails here
// rather than on first use.
func New(ctx context.Context, cfg Config) (*Store, error) {
	if cfg.DSN == "" {
		return nil, errors.New("postgres: DSN is empty")
	}
	pcfg, err := pgxpool.ParseConfig(cfg.DSN)
	if err != nil {
		return nil, errs.Wrap("parse DSN", err)
	}
	if cfg.MaxConns > 0 {
		pcfg.MaxConns = cfg.MaxConns
	}
	if cfg.ConnectTimeout > 0 {
		pcfg.ConnConfig.ConnectTimeout = cfg.ConnectTimeout
	}
	// JIT compiles a plan whose estimated cost passes jit_above_cost: for jq's short statements that
	// costs more than it saves (the depth snapshot at 10M rows: 467 ms with JIT, 238 ms without;
	// docs/evaluation.md, NFR-012).
	if pcfg.ConnConfig.RuntimeParams == nil {
		pcfg.ConnConfig.RuntimeParams = map[string]string{}
	}
	pcfg.ConnConfig.RuntimeParams["jit"] = "off"
	if cfg.ObserveQuery != nil {
		pcfg.ConnConfig.Tracer = queryTracer{observe: cfg.ObserveQuery}
	}
	dcfg := pcfg.Copy()
	dcfg.MaxConns = cfg.DispatchConns
	if dcfg.MaxConns <= 0 {
		dcfg.MaxConns = max(2, pcfg.MaxConns/2)
	}
	if dcfg.ConnConfig.RuntimeParams == nil {
		dcfg.ConnConfig.RuntimeParams = map[string]string{}
	}
	maps.Copy(dcfg.ConnConfig.RuntimeParams, dispatchParams)
	pool, err := pgxpool.NewWithConfig(ctx, pcfg)
	if err != nil {
		return nil, errs.Wrap("create pool", err)
	}
	dispatch, err := pgxpool.NewWithConfig(ctx, dcfg)
	if err != nil {
		pool.Close()
		return nil, errs.Wrap("create dispatch pool", err)
	}
	s := &Store{pool: pool, dispatch: dispatch, listScanBound: jobListScanBound}
	if err := pool.Ping(ctx); err != nil {
		s.Close()
		return nil, errs.Wrap("ping", err)
	}
	return s, nil
}

// dispatchParams are the session settings of the dispatch pool, whose statements update jobs by id
// from arrays of ids (assign, ack, report: the core loop's batch writes). Their plans are made once
// per connection and cached (generic plans), and they are right on any table: nested loops over the
// input arrays into jobs_pkey, whatever the statistics say. Left to the planner, a plan made while
// the jobs table was empty or never analyzed (every fresh install) joins by hashing a sequential
// scan of jobs, and a cached one keeps doing so as the table grows; planning every execution
// instead avoids that but costs ~0.8 ms per batch of 100. With sequential scans, hash and merge
// joins priced out, the cheapest plan is the index plan on an empty table as on a 10M-row one
// (TestHotPlansOnEmptyTable). JIT is off: the price of a forbidden node would otherwise trigger it.
var dispatchParams = map[string]string{
	"plan_cache_mode":   "force_generic_plan",
	"enable_seqscan":    "off",
	"enable_hashjoin":   "off",
	"enable_mergejoin":  "off",
	"enable_bitmapscan": "off",
	"jit":               "off",
}

// Pool exposes the connection pool to components that run their own SQL on the same database
// (scheduler, reaper, outbox relay).
func (s *Store) Pool() *pgxpool.Pool { return s.pool }

// Ping checks that a connection to the database works.
func (s *Store) Ping(ctx context.Context) error {
	if err := s.pool.Ping(ctx); err != nil {
		return errs.Wrap("ping", err)
	}
	return nil
}

// Close closes the pool, waiting for connections in use to be returned.
func (s *Store) Close() {
	s.dispatch.Close()
	s.pool.Close()
}
