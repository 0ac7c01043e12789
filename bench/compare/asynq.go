package main

import (
	"context"
	"encoding/binary"
	"fmt"
	"sync"
	"time"

	"github.com/hibiken/asynq"
	"github.com/redis/go-redis/v9"
)

// asynqSystem is Asynq on a dedicated Redis DB number, its server (the workers) inside this process.
// Asynq keeps no timestamps of a finished task, so the handler records them: the payload carries
// the submit time (UnixNano, taken just before Enqueue), the handler notes its start and end.
type asynqSystem struct {
	cfg    *config
	client *asynq.Client
	server *asynq.Server
	insp   *asynq.Inspector

	mu                  sync.Mutex
	waits               []time.Duration
	doneAt              []time.Time
	firstStart, lastEnd time.Time
}

func newAsynq(cfg *config) *asynqSystem { return &asynqSystem{cfg: cfg} }

func (a *asynqSystem) Name() string              { return "asynq" }
func (a *asynqSystem) UsesPostgres() bool        { return false }
func (a *asynqSystem) Processes() map[string]int { return nil }

func (a *asynqSystem) redisOpt() asynq.RedisClientOpt {
	return asynq.RedisClientOpt{Addr: a.cfg.redisAddr, DB: a.cfg.asynqDB}
}

// Prepare empties the dedicated DB number (FLUSHDB of that number only).
func (a *asynqSystem) Prepare(ctx context.Context) error {
	rc := redis.NewClient(&redis.Options{Addr: a.cfg.redisAddr, DB: a.cfg.asynqDB, ContextTimeoutEnabled: true})
	defer rc.Close()
	if err := rc.FlushDB(ctx).Err(); err != nil {
		return fmt.Errorf("asynq: flushdb %d: %w", a.cfg.asynqDB, err)
	}
	a.mu.Lock()
	a.waits, a.doneAt, a.firstStart, a.lastEnd = nil, nil, time.Time{}, time.Time{}
	a.mu.Unlock()
	return nil
}

func (a *asynqSystem) StartIdle(context.Context) error {
	a.client = asynq.NewClient(a.redisOpt())
	a.insp = asynq.NewInspector(a.redisOpt())
	return a.client.Ping()
}

func (a *asynqSystem) StartWorkers(context.Context) error {
	a.server = asynq.NewServer(a.redisOpt(), asynq.Config{
		Concurrency:       a.cfg.concurrency,
		TaskCheckInterval: a.cfg.asynqTaskCheck,
		LogLevel:          asynq.WarnLevel,
	})
	// Start, not Run: Run would install its own signal handlers.
	if err := a.server.Start(asynq.HandlerFunc(a.handle)); err != nil {
		return fmt.Errorf("asynq: start server: %w", err)
	}
	return nil
}

func (a *asynqSystem) handle(_ context.Context, t *asynq.Task) error {
	start := time.Now()
	var wait time.Duration
	if p := t.Payload(); len(p) >= 8 {
		wait = start.Sub(time.Unix(0, int64(binary.BigEndian.Uint64(p))))
	}
	end := time.Now()
	a.mu.Lock()
	if a.firstStart.IsZero() || start.Before(a.firstStart) {
		a.firstStart = start
	}
	if end.After(a.lastEnd) {
		a.lastEnd = end
	}
	a.waits = append(a.waits, wait)
	a.doneAt = append(a.doneAt, end)
	a.mu.Unlock()
	return nil
}

// payload is 16 bytes like the other systems' jobs: the submit time and padding.
func asynqPayload() []byte {
	p := make([]byte, 16)
	binary.BigEndian.PutUint64(p, uint64(time.Now().UnixNano()))
	return p
}

// BulkInsert: Asynq v0.26.0 has no public batch or pipelined enqueue, so it is Enqueue from
// asynqEnqueuers concurrent goroutines.
func (a *asynqSystem) BulkInsert(ctx context.Context, n int) error {
	return inParallel(ctx, n, 1, a.cfg.asynqEnqueuers, func(ctx context.Context, _ int) error {
		return a.InsertOne(ctx)
	})
}

func (a *asynqSystem) InsertOne(ctx context.Context) error {
	_, err := a.client.EnqueueContext(ctx, asynq.NewTask("noop", asynqPayload()))
	return err
}

func (a *asynqSystem) Completed(context.Context) (int, error) {
	qi, err := a.insp.GetQueueInfo("default")
	if err != nil {
		return 0, err
	}
	return qi.ProcessedTotal - qi.FailedTotal, nil
}

func (a *asynqSystem) Unfinished(context.Context) (int, error) {
	qi, err := a.insp.GetQueueInfo("default")
	if err != nil {
		return 0, err
	}
	return qi.Pending + qi.Active + qi.Scheduled + qi.Retry, nil
}

func (a *asynqSystem) Timings(_ context.Context, from, to time.Time) (timings, error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	t := timings{FirstStart: a.firstStart, LastDone: a.lastEnd, Waits: append([]time.Duration(nil), a.waits...)}
	for _, d := range a.doneAt {
		if !d.Before(from) && !d.After(to) {
			t.DoneInWindow++
		}
	}
	return t, nil
}

func (a *asynqSystem) Stop(context.Context) error {
	if a.server != nil {
		a.server.Shutdown()
		a.server = nil
	}
	var err error
	if a.client != nil {
		err = a.client.Close()
		a.client = nil
	}
	if a.insp != nil {
		_ = a.insp.Close()
		a.insp = nil
	}
	return err
}
