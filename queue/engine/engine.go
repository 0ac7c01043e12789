// Package engine is the core loop of jq, the only place that combines the
// store (the system of record: Postgres, or the embedded SQLite file) and the
// dispatcher (Redis, or the in-process one: the in-flight records recovery reads):
//
//	Submit ──group commit──► jobs PENDING + event ──► wake the sessions (+ NOTIFY other replicas)
//	session (one per connected worker stream): claim = one statement that takes due PENDING jobs
//	           in dispatch order (priority DESC, created_at, id), FOR NO KEY UPDATE SKIP LOCKED,
//	           and sets them ASSIGNED with attempt+1 (the fencing token), never more than the
//	           worker's free slots (I7); then one dispatcher call records them in flight; then
//	           the stream sends them to the worker
//	Ack / Report (group commit across workers): ASSIGNED→RUNNING, RUNNING→DONE|FAILED, each
//	           conditional on (job, attempt, worker); then the in-flight entry and lock are dropped
//
// Exclusivity (I3) does not depend on Redis: the claim is the store's, under
// row locks, and every later write names the attempt it belongs to. The
// dispatcher only records what was handed out, so the reaper can find it.
package engine

import (
	"context"
	"errors"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"time"

	"github.com/google/uuid"
	"go.opentelemetry.io/otel/trace"
	"go.uber.org/zap"

	"github.com/jq-dev/jq/queue"
	"github.com/jq-dev/jq/store"
)

// Store is what the engine needs from the system of record.
type Store interface {
	store.Store
	store.DispatchStore
	store.RecoveryStore
	store.OperatorStore
	store.AdminStore
	store.ProgressStore
	store.ConstraintStore
}

// Options configure an Engine. Zero values take the documented defaults.
type Options struct {
	Store      Store
	Dispatcher store.Dispatcher
	// Notifier wakes the schedulers of other replicas; nil: this replica only.
	Notifier store.Notifier
	Log      *zap.Logger

	// SchedulerInterval is how often a session with free capacity claims when
	// nothing wakes it (500 ms): jobs whose not_before or backoff just passed.
	SchedulerInterval time.Duration
	// BatchSize is the most jobs one claim takes from one queue (FR-017, 100).
	BatchSize int
	// LockTTL is the lifetime of a per-job Redis lock (assignment timeout, 60 s).
	LockTTL time.Duration
	// AssignmentTimeout is how long a worker has to ack (the deadline sent
	// with each assignment, 60 s).
	AssignmentTimeout time.Duration
	// MaxResultBytes bounds a success result (256 KiB); larger results fail
	// the attempt with reason output_too_large.
	MaxResultBytes int
	// Flushers is the number of concurrent group-commit writers per path (4).
	Flushers int
	// ReaperInterval is the pause between reaper cycles (1 s).
	ReaperInterval time.Duration
	// HeartbeatTimeout is how long a silent worker is trusted before the
	// reaper declares it OFFLINE and fails its jobs (30 s).
	HeartbeatTimeout time.Duration
	// TimeoutGrace is how long past a RUNNING job's own timeout the reaper
	// waits for the worker's report (10 s).
	TimeoutGrace time.Duration
	// Tracer makes the assignment spans (trace.go); nil: none.
	Tracer trace.Tracer
	// Observer receives what the engine did, for metrics (observe.go); nil: NopObserver.
	Observer Observer
	// Clock is the time the engine's rules decide with (retry times, deadlines); nil: time.Now.
	Clock func() time.Time
	// Rand is the jitter source of the retry backoff, uniform in [0,1); nil: math/rand/v2.
	Rand func() float64
	// KafkaOff: no relay publishes events (kafka.enabled false), so a deleted job's unpublished
	// events are owed to no one and go with it (JobDelete).
	KafkaOff bool
}

func (o *Options) defaults() error {
	if o.Store == nil || o.Dispatcher == nil || o.Log == nil {
		return errors.New("engine: store, dispatcher and logger are required")
	}
	if o.SchedulerInterval <= 0 {
		o.SchedulerInterval = 500 * time.Millisecond
	}
	if o.BatchSize <= 0 {
		o.BatchSize = 100
	}
	if o.LockTTL <= 0 {
		o.LockTTL = queue.DefaultAssignmentTimeout
	}
	if o.AssignmentTimeout <= 0 {
		o.AssignmentTimeout = queue.DefaultAssignmentTimeout
	}
	if o.MaxResultBytes <= 0 {
		o.MaxResultBytes = 256 << 10
	}
	if o.Flushers <= 0 {
		o.Flushers = 4
	}
	if o.ReaperInterval <= 0 {
		o.ReaperInterval = time.Second
	}
	if o.HeartbeatTimeout <= 0 {
		o.HeartbeatTimeout = queue.DefaultHeartbeatTimeout
	}
	if o.Clock == nil {
		o.Clock = time.Now
	}
	if o.Rand == nil {
		o.Rand = rand.Float64
	}
	if o.TimeoutGrace < 0 {
		o.TimeoutGrace = 0
	}
	if o.Observer == nil {
		o.Observer = NopObserver{}
	}
	return nil
}

// Engine runs the core loop of one server replica.
type Engine struct {
	opts Options
	log  *zap.Logger

	changes changeHooks // watch.go

	submits *batcher[store.JobInsertParams, submitResult]
	acks    *batcher[[]store.JobLease, []store.LeaseOutcome]
	reports *batcher[[]store.JobReportParams, []store.LeaseOutcome]

	// wakeScheduler has room for one pending wake-up: any number of submits
	// between two cycles cost one cycle.
	wakeScheduler chan struct{}
	wakeReaper    chan struct{}

	notifyMu     sync.Mutex
	notifyQueues map[string]struct{} // queues with new work not yet announced to other replicas
	notifyWake   chan struct{}
	// replicaID names this engine in the presence announcements; peers holds when each other
	// replica was last heard from (guarded by notifyMu). listening: the LISTEN loop is up, so an
	// empty peers map means no other replica listens (and a NOTIFY would wake nobody).
	replicaID string
	peers     map[string]time.Time
	listening atomic.Bool
	// notifiesSkipped counts the wake-up announcements not sent because no other replica listened.
	notifiesSkipped atomic.Int64

	redisMu      sync.Mutex
	redisFailing bool         // the last claim from Redis failed
	directClaims atomic.Int64 // jobs assigned straight from Postgres while Redis was down
	recovery     recoveryCounters

	// levels holds the weighted-dispatch state of each queue claimed with weights or max_wait
	// (weights.go); created on first use.
	// constraints is the constraint set as last read, to choose each queue's claim (constraints.go).
	constraints constraintCache
	levelsMu    sync.Mutex
	levels      map[string]*levelState

	// hist counts finished attempts per queue and minute (history.go).
	hist history

	mu       sync.Mutex
	sessions map[string]*Session // by worker id
	closing  bool                // CloseSessions ran: no new sessions
	ready    chan struct{}       // closed and replaced when ready sets gain jobs
	readyGen uint64              // counts the wake-ups: ready's generation
	running  bool
}

// New validates opts.
func New(opts Options) (*Engine, error) {
	if err := opts.defaults(); err != nil {
		return nil, err
	}
	e := &Engine{
		opts:          opts,
		log:           opts.Log,
		wakeScheduler: make(chan struct{}, 1),
		wakeReaper:    make(chan struct{}, 1),
		notifyQueues:  map[string]struct{}{},
		notifyWake:    make(chan struct{}, 1),
		replicaID:     uuid.NewString(),
		peers:         map[string]time.Time{},
		sessions:      map[string]*Session{},
		ready:         make(chan struct{}),
	}
	e.submits = newBatcher(1000, func(store.JobInsertParams) int { return 1 }, e.flushSubmits)
	e.acks = newBatcher(1000, func(l []store.JobLease) int { return len(l) }, e.flushAcks)
	e.reports = newBatcher(1000, func(r []store.JobReportParams) int { return len(r) }, e.flushReports)
	return e, nil
}

// Run runs the scheduler, the group-commit writers and the cross-replica
// listener until ctx ends. Writes already taken are finished first.
func (e *Engine) Run(ctx context.Context) error {
	e.mu.Lock()
	if e.running {
		e.mu.Unlock()
		return errors.New("engine: already running")
	}
	e.running = true
	e.mu.Unlock()

	var wg sync.WaitGroup
	wg.Go(func() { e.submits.run(ctx, max(1, e.opts.Flushers/2)) }) // unary submits: few writers, big batches
	wg.Go(func() { e.acks.run(ctx, e.opts.Flushers) })
	wg.Go(func() { e.reports.run(ctx, e.opts.Flushers) })
	wg.Go(func() { e.schedulerLoop(ctx) })
	wg.Go(func() { e.reaperLoop(ctx) })
	if e.opts.Notifier != nil {
		wg.Go(func() { e.listenLoop(ctx) })
		wg.Go(func() { e.notifyLoop(ctx) })
		wg.Go(func() { e.presenceLoop(ctx) })
	}
	wg.Wait()
	e.CloseSessions()
	return nil
}

// now is the engine's clock.
func (e *Engine) now() time.Time { return e.opts.Clock() }

// deadlines are the reaper's limits on held jobs.
func (e *Engine) deadlines() queue.Deadlines {
	return queue.Deadlines{Assignment: e.opts.AssignmentTimeout, Grace: e.opts.TimeoutGrace}
}

// listenLoop turns NOTIFYs from other replicas into scheduler wake-ups and
// reconnects with backoff when the listening connection fails.
func (e *Engine) listenLoop(ctx context.Context) {
	backoff := 100 * time.Millisecond
	for ctx.Err() == nil {
		start := time.Now()
		e.listening.Store(true)
		err := e.opts.Notifier.Listen(ctx, e.notified)
		e.listening.Store(false)
		if ctx.Err() != nil {
			return
		}
		if time.Since(start) > time.Minute {
			backoff = 100 * time.Millisecond
		}
		e.log.Warn("listen for due jobs failed; retrying", zap.Error(err), zap.Duration("backoff", backoff))
		select {
		case <-ctx.Done():
			return
		case <-time.After(backoff):
		}
		backoff = min(2*backoff, 5*time.Second)
	}
}

// WakeScheduler wakes the sessions waiting for work as soon as possible: they claim due jobs.
func (e *Engine) WakeScheduler() {
	select {
	case e.wakeScheduler <- struct{}{}:
	default:
	}
}

// readySignal returns the channel closed at the next wake-up of the sessions, and the
// generation of the wake-ups so far.
func (e *Engine) readySignal() (<-chan struct{}, uint64) {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.ready, e.readyGen
}

// broadcastReady wakes every session waiting for work.
func (e *Engine) broadcastReady() {
	e.mu.Lock()
	close(e.ready)
	e.ready = make(chan struct{})
	e.readyGen++
	e.mu.Unlock()
}

// CloseSessions ends every assignment stream (the first step of a graceful
// stop: workers reconnect elsewhere; nothing more is assigned here).
func (e *Engine) CloseSessions() {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.closing = true
	for id, s := range e.sessions {
		s.close(queue.ErrShutdown)
		delete(e.sessions, id)
	}
}

// ErrSessionReplaced ends a session when the same worker opens a new one
// (ABORTED on the wire). It is queue's sentinel, so the API's error table reaches it without the engine.
var ErrSessionReplaced = queue.ErrSessionReplaced

// redisDown records a failed in-flight record in Redis; the first of an outage is
// logged as a warning.
func (e *Engine) redisDown(err error) {
	e.redisMu.Lock()
	first := !e.redisFailing
	e.redisFailing = true
	e.redisMu.Unlock()
	if first {
		e.log.Warn("redis unreachable: dispatching without in-flight records until it is back (the reaper recovers from Postgres)", zap.Error(err))
	}
}

// redisUp records a successful in-flight record in Redis.
func (e *Engine) redisUp() {
	e.redisMu.Lock()
	was := e.redisFailing
	e.redisFailing = false
	e.redisMu.Unlock()
	if was {
		e.log.Info("redis reachable again: in-flight records resumed", zap.Int64("direct_claims_so_far", e.directClaims.Load()))
	}
}

// redisKnownDown: the last in-flight record failed, and the outage is logged.
func (e *Engine) redisKnownDown() bool {
	e.redisMu.Lock()
	defer e.redisMu.Unlock()
	return e.redisFailing
}

// DirectClaims is how many jobs were assigned without an in-flight record because
// Redis was unreachable.
func (e *Engine) DirectClaims() int64 { return e.directClaims.Load() }

// recoveryCounters count what the reaper did since the start.
type recoveryCounters struct {
	workersLost, retried, deadLettered, ttlExpired, orphans atomic.Int64
	failedMu                                                sync.Mutex
	failed                                                  map[string]int64 // by reason
}

func (c *recoveryCounters) addFailed(reason string) {
	c.failedMu.Lock()
	defer c.failedMu.Unlock()
	if c.failed == nil {
		c.failed = map[string]int64{}
	}
	c.failed[reason]++
}

// RecoveryStats is what this replica's reaper did since the engine started.
type RecoveryStats struct {
	WorkersLost  int64            // workers declared OFFLINE
	Failed       map[string]int64 // attempts failed, by reason (assignment_timeout, timeout, worker_lost)
	Retried      int64            // FAILED → PENDING
	DeadLettered int64            // FAILED → DEAD_LETTERED
	TTLExpired   int64            // PENDING → DEAD_LETTERED (ttl_expired)
	Orphans      int64            // in-flight entries removed
	DirectClaims int64            // jobs assigned without a Redis in-flight record while Redis was down
}

// RecoveryStats returns the reaper's counters (for metrics).
func (e *Engine) RecoveryStats() RecoveryStats {
	c := &e.recovery
	c.failedMu.Lock()
	failed := make(map[string]int64, len(c.failed))
	for k, v := range c.failed {
		failed[k] = v
	}
	c.failedMu.Unlock()
	return RecoveryStats{
		WorkersLost: c.workersLost.Load(), Failed: failed, Retried: c.retried.Load(),
		DeadLettered: c.deadLettered.Load(), TTLExpired: c.ttlExpired.Load(), Orphans: c.orphans.Load(),
		DirectClaims: e.directClaims.Load(),
	}
}
