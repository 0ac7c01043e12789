package main

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/riverqueue/river"
	"github.com/riverqueue/river/riverdriver/riverpgxv5"
	"github.com/riverqueue/river/rivermigrate"
)

// noopArgs is River's no-op job; Pad makes its args about as large as the 16-byte payload the
// other systems carry.
type noopArgs struct {
	Pad string `json:"pad"`
}

func (noopArgs) Kind() string { return "noop" }

type noopWorker struct {
	river.WorkerDefaults[noopArgs]
}

func (noopWorker) Work(context.Context, *river.Job[noopArgs]) error { return nil }

// riverSystem is River with riverpgxv5 on its own database, its workers inside this process.
type riverSystem struct {
	cfg     *config
	pool    *pgxpool.Pool
	client  *river.Client[pgx.Tx]
	started bool
}

func newRiver(cfg *config) *riverSystem { return &riverSystem{cfg: cfg} }

func (r *riverSystem) Name() string       { return "river" }
func (r *riverSystem) UsesPostgres() bool { return true }
func (r *riverSystem) Processes() map[string]int {
	return nil // the workers run inside the compare process
}

func (r *riverSystem) Prepare(ctx context.Context) error {
	if err := freshDatabase(ctx, r.cfg.pgBase, r.cfg.riverDB); err != nil {
		return err
	}
	pc, err := pgxpool.ParseConfig(databaseURL(r.cfg.pgBase, r.cfg.riverDB))
	if err != nil {
		return err
	}
	pc.MaxConns = int32(r.cfg.poolSize)
	pool, err := pgxpool.NewWithConfig(ctx, pc)
	if err != nil {
		return fmt.Errorf("river: pool: %w", err)
	}
	r.pool = pool
	migrator, err := rivermigrate.New(riverpgxv5.New(pool), nil)
	if err != nil {
		return fmt.Errorf("river: migrator: %w", err)
	}
	if _, err := migrator.Migrate(ctx, rivermigrate.DirectionUp, nil); err != nil {
		return fmt.Errorf("river: migrate: %w", err)
	}
	return nil
}

// StartIdle builds the client without starting it: an unstarted client inserts, and nothing works
// the jobs until Start.
func (r *riverSystem) StartIdle(context.Context) error {
	workers := river.NewWorkers()
	river.AddWorker(workers, &noopWorker{})
	client, err := river.NewClient(riverpgxv5.New(r.pool), &river.Config{
		Logger:            slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn})),
		Queues:            map[string]river.QueueConfig{river.QueueDefault: {MaxWorkers: r.cfg.concurrency}},
		Workers:           workers,
		FetchCooldown:     r.cfg.riverFetchCooldown,
		FetchPollInterval: r.cfg.riverFetchPoll,
	})
	if err != nil {
		return fmt.Errorf("river: client: %w", err)
	}
	r.client = client
	return nil
}

func (r *riverSystem) StartWorkers(ctx context.Context) error {
	if err := r.client.Start(ctx); err != nil {
		return fmt.Errorf("river: start: %w", err)
	}
	r.started = true
	return nil
}

func (r *riverSystem) BulkInsert(ctx context.Context, n int) error {
	return inParallel(ctx, n, r.cfg.batchSize, r.cfg.batchInserters, func(ctx context.Context, k int) error {
		params := make([]river.InsertManyParams, k)
		for i := range params {
			params[i] = river.InsertManyParams{Args: noopArgs{Pad: pad16}}
		}
		_, err := r.client.InsertManyFast(ctx, params)
		return err
	})
}

func (r *riverSystem) InsertOne(ctx context.Context) error {
	_, err := r.client.Insert(ctx, noopArgs{Pad: pad16}, nil)
	return err
}

func (r *riverSystem) Completed(ctx context.Context) (int, error) {
	return queryInt(ctx, r.pool, `SELECT count(*) FROM river_job WHERE state = 'completed'`)
}

func (r *riverSystem) Unfinished(ctx context.Context) (int, error) {
	return queryInt(ctx, r.pool, `SELECT count(*) FROM river_job WHERE finalized_at IS NULL`)
}

// Timings reads River's own stamps: attempted_at (set by the fetch, Postgres now()) minus
// created_at (Postgres now() at insert), and finalized_at for completion.
func (r *riverSystem) Timings(ctx context.Context, from, to time.Time) (timings, error) {
	return pgTimings(ctx, r.pool, `SELECT attempted_at, finalized_at, created_at FROM river_job WHERE state = 'completed'`, from, to)
}

func (r *riverSystem) Stop(ctx context.Context) error {
	var err error
	if r.started {
		stopCtx, cancel := context.WithTimeout(ctx, 30*time.Second)
		defer cancel()
		err = r.client.Stop(stopCtx)
		r.started = false
	}
	r.client = nil
	if r.pool != nil {
		r.pool.Close()
		r.pool = nil
	}
	return err
}
