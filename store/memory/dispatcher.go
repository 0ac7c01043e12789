package memory

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/jq-dev/jq/queue"
	"github.com/jq-dev/jq/store"
)

// ErrClosed is returned by every method of a closed Dispatcher.
var ErrClosed = errors.New("memory: dispatcher closed")

// minSweep is the lock count below which no sweep runs: small tables are left to the lazy drops.
const minSweep = 1024

// DispatcherConfig configures a Dispatcher.
type DispatcherConfig struct {
	// Clock decides when locks expire; nil: time.Now.
	Clock func() time.Time
}

// Dispatcher is a store.Dispatcher in process memory (doc.go). It is safe for concurrent use.
type Dispatcher struct {
	clock func() time.Time

	mu     sync.Mutex
	closed bool
	queues map[string]*queueSets
	locks  map[lockKey]time.Time // expiry
	// sweepAt is the lock count at which InflightAdd next drops every expired lock.
	sweepAt int
}

// queueSets are the in-flight sets of one queue, by worker id, and their total size (Counts).
type queueSets struct {
	workers map[string]*inflightSet
	total   int
}

// inflightSet is one worker's in-flight set: ids in a doubly linked list in insertion order, with
// an index for O(1) membership and removal.
type inflightSet struct {
	head, tail *entry
	index      map[string]*entry
}

type entry struct {
	id         string
	prev, next *entry
}

func (s *inflightSet) push(id string) {
	e := &entry{id: id, prev: s.tail}
	if s.tail == nil {
		s.head = e
	} else {
		s.tail.next = e
	}
	s.tail = e
	s.index[id] = e
}

func (s *inflightSet) remove(e *entry) {
	if e.prev == nil {
		s.head = e.next
	} else {
		e.prev.next = e.next
	}
	if e.next == nil {
		s.tail = e.prev
	} else {
		e.next.prev = e.prev
	}
	delete(s.index, e.id)
}

// lockKey names a job's lock: per queue, like the Redis key <prefix>:{<queue>}:lock:<job_id>.
type lockKey struct {
	queue, id string
}

// NewDispatcher returns an empty Dispatcher.
func NewDispatcher(cfg DispatcherConfig) *Dispatcher {
	clock := cfg.Clock
	if clock == nil {
		clock = time.Now
	}
	return &Dispatcher{clock: clock, queues: map[string]*queueSets{}, locks: map[lockKey]time.Time{}, sweepAt: minSweep}
}

// Close drops everything; afterwards every method returns ErrClosed. It is idempotent.
func (d *Dispatcher) Close() error {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.closed, d.queues, d.locks = true, nil, nil
	return nil
}

// Ping returns nil until the Dispatcher is closed.
func (d *Dispatcher) Ping(ctx context.Context) error {
	return d.begin(ctx, "ping")
}

// InflightAdd records jobs the store just assigned to the worker: each enters the worker's
// in-flight set and takes its lock until now+LockTTL. An id already in the set keeps its place
// (a retried record is the same assignment; Redis's ZADD moves it to the end instead, and the
// contract allows either) and its lock is renewed. The whole batch is refused
// with queue.ErrInvalidArgument when an id is empty.
func (d *Dispatcher) InflightAdd(ctx context.Context, p store.InflightAddParams) error {
	if err := validateQueueWorker(p.Queue, p.WorkerID); err != nil {
		return err
	}
	if p.LockTTL <= 0 {
		return invalid("lock TTL %v must be positive", p.LockTTL)
	}
	if err := validateIDs(p.IDs); err != nil {
		return err
	}
	if len(p.IDs) == 0 {
		return nil
	}
	expiry := d.clock().Add(p.LockTTL)
	d.mu.Lock()
	defer d.mu.Unlock()
	if err := d.beginLocked(ctx, "inflight add"); err != nil {
		return err
	}
	qs := d.queues[p.Queue]
	if qs == nil {
		qs = &queueSets{workers: map[string]*inflightSet{}}
		d.queues[p.Queue] = qs
	}
	set := qs.workers[p.WorkerID]
	if set == nil {
		set = &inflightSet{index: make(map[string]*entry, len(p.IDs))}
		qs.workers[p.WorkerID] = set
	}
	for _, id := range p.IDs {
		if _, ok := set.index[id]; !ok {
			set.push(id)
			qs.total++
		}
		d.locks[lockKey{p.Queue, id}] = expiry
	}
	if len(d.locks) >= d.sweepAt {
		d.sweepLocked()
	}
	return nil
}

// InflightRemove removes the ids from the worker's in-flight set and releases the locks of the ids
// that were in it. Ids not in the set are ignored and their locks left alone: a call naming a
// worker that no longer holds a job must not unlock it for whoever holds it now.
func (d *Dispatcher) InflightRemove(ctx context.Context, p store.InflightParams) error {
	if err := validateQueueWorker(p.Queue, p.WorkerID); err != nil {
		return err
	}
	if err := validateIDs(p.IDs); err != nil {
		return err
	}
	if len(p.IDs) == 0 {
		return nil
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	if err := d.beginLocked(ctx, "inflight remove"); err != nil {
		return err
	}
	qs := d.queues[p.Queue]
	if qs == nil {
		return nil
	}
	set := qs.workers[p.WorkerID]
	if set == nil {
		return nil
	}
	for _, id := range p.IDs {
		e, ok := set.index[id]
		if !ok {
			continue
		}
		set.remove(e)
		qs.total--
		delete(d.locks, lockKey{p.Queue, id})
	}
	if len(set.index) == 0 {
		delete(qs.workers, p.WorkerID)
		if len(qs.workers) == 0 {
			delete(d.queues, p.Queue)
		}
	}
	return nil
}

// InflightList returns the ids in the worker's in-flight set, oldest assignment first.
func (d *Dispatcher) InflightList(ctx context.Context, queueName, workerID string) ([]string, error) {
	if err := validateQueueWorker(queueName, workerID); err != nil {
		return nil, err
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	if err := d.beginLocked(ctx, "inflight list"); err != nil {
		return nil, err
	}
	var set *inflightSet
	if qs := d.queues[queueName]; qs != nil {
		set = qs.workers[workerID]
	}
	if set == nil {
		return []string{}, nil
	}
	ids := make([]string, 0, len(set.index))
	for e := set.head; e != nil; e = e.next {
		ids = append(ids, e.id)
	}
	return ids, nil
}

// Counts returns the total in-flight entries of each queue, in the order given; O(1) per queue.
func (d *Dispatcher) Counts(ctx context.Context, queues []string) ([]store.DispatchCounts, error) {
	out := make([]store.DispatchCounts, len(queues))
	for i, q := range queues {
		if err := queue.ValidateQueueName(q); err != nil {
			return nil, err
		}
		out[i].Queue = q
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	if err := d.beginLocked(ctx, "counts"); err != nil {
		return nil, err
	}
	for i := range out {
		if qs := d.queues[out[i].Queue]; qs != nil {
			out[i].Inflight = int64(qs.total)
		}
	}
	return out, nil
}

// lockHeld says whether the job's lock in the queue is held now, and drops it if it has expired.
func (d *Dispatcher) lockHeld(queueName, id string) bool {
	d.mu.Lock()
	defer d.mu.Unlock()
	k := lockKey{queueName, id}
	expiry, ok := d.locks[k]
	if !ok {
		return false
	}
	if !d.clock().Before(expiry) {
		delete(d.locks, k)
		return false
	}
	return true
}

// sweepLocked drops every expired lock and sets the next sweep at twice the locks left, so each
// lock written pays O(1) sweeping on average.
func (d *Dispatcher) sweepLocked() {
	now := d.clock()
	for k, expiry := range d.locks {
		if !now.Before(expiry) {
			delete(d.locks, k)
		}
	}
	d.sweepAt = max(2*len(d.locks), minSweep)
}

// begin checks that the call may go ahead: the context is live and the Dispatcher open.
func (d *Dispatcher) begin(ctx context.Context, op string) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.beginLocked(ctx, op)
}

func (d *Dispatcher) beginLocked(ctx context.Context, op string) error {
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("memory: %s: %w", op, err)
	}
	if d.closed {
		return fmt.Errorf("memory: %s: %w", op, ErrClosed)
	}
	return nil
}

func invalid(format string, args ...any) error {
	return fmt.Errorf("%w: "+format, append([]any{queue.ErrInvalidArgument}, args...)...)
}

func validateQueueWorker(queueName, workerID string) error {
	if err := queue.ValidateQueueName(queueName); err != nil {
		return err
	}
	if workerID == "" {
		return invalid("empty worker id")
	}
	return nil
}

func validateIDs(ids []string) error {
	for _, id := range ids {
		if id == "" {
			return invalid("empty job id")
		}
	}
	return nil
}
