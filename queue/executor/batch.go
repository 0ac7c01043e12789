package executor

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"go.uber.org/zap"

	"github.com/jq-dev/jq/internal/ctxtime"
)

// errExpired: an item's deadline passed before the server accepted it.
var errExpired = errors.New("deadline passed before the server could be reached")

// errStopped: the batcher stopped with the item still pending.
var errStopped = errors.New("worker stopped before the item was sent")

// batcher sends items in batches from one goroutine. While a call is in
// flight, new items accumulate; the next call takes all of them (up to
// MaxBatch). There is no linger: an idle batcher sends a lone item at once,
// so batching costs no latency and grows with load.
//
// A failed call is retried with backoff, merged with what arrived meanwhile,
// until each item's deadline; an item whose deadline passes, or that the
// server rejects as a whole (ErrInvalid, ErrWorkerInactive), is finished with
// that error. Every item is finished exactly once through done.
type batcher[T any] struct {
	name        string
	log         *zap.Logger
	send        func(ctx context.Context, items []T) ([]LeaseResult, error)
	done        func(item T, res LeaseResult, err error)
	jobID       func(T) string
	callTimeout time.Duration
	minBackoff  time.Duration
	maxBackoff  time.Duration

	wake  chan struct{}
	calls atomic.Int64

	mu       sync.Mutex
	pending  []pendingItem[T]
	inflight bool
	idleCh   chan struct{} // closed when pending is empty and nothing is in flight
}

type pendingItem[T any] struct {
	item     T
	deadline time.Time
	single   bool // send alone: its batch was rejected as invalid
	resent   bool // an earlier call carrying it failed on the way: it may have been applied
}

func (b *batcher[T]) init() {
	b.wake = make(chan struct{}, 1)
}

// add queues an item to be sent before deadline.
func (b *batcher[T]) add(item T, deadline time.Time) {
	b.mu.Lock()
	b.pending = append(b.pending, pendingItem[T]{item: item, deadline: deadline})
	b.mu.Unlock()
	select {
	case b.wake <- struct{}{}:
	default:
	}
}

// run sends until ctx ends; then every pending item is finished with
// errStopped.
func (b *batcher[T]) run(ctx context.Context) {
	bo := newBackoff(b.minBackoff, b.maxBackoff)
	for {
		select {
		case <-ctx.Done():
			b.stop()
			return
		case <-b.wake:
		}
		for {
			batch, expired := b.take(time.Now())
			for _, p := range expired {
				b.done(p.item, LeaseResult{}, errExpired)
			}
			if len(batch) == 0 {
				break
			}
			if !b.sendBatch(ctx, batch, bo) {
				b.stop()
				return
			}
		}
	}
}

// sendBatch makes one call and finishes or requeues its items; false means
// ctx ended while backing off.
func (b *batcher[T]) sendBatch(ctx context.Context, batch []pendingItem[T], bo *backoff) bool {
	items := make([]T, len(batch))
	for i, p := range batch {
		items[i] = p.item
	}
	cctx, cancel := context.WithTimeout(ctx, b.callTimeout)
	res, err := b.send(cctx, items)
	cancel()
	b.calls.Add(1)
	if err == nil {
		bo.reset()
		b.finishBatch(batch, res)
		return true
	}
	if ctx.Err() != nil {
		b.requeue(batch)
		return false
	}
	final := errors.Is(err, ErrInvalid) || errors.Is(err, ErrWorkerInactive)
	if final && errors.Is(err, ErrInvalid) && len(batch) > 1 {
		// One bad item must not sink the others: send each on its own.
		b.log.Warn("batch rejected as invalid; retrying its items one by one",
			zap.String("call", b.name), zap.Int("items", len(batch)), zap.Error(err))
		for i := range batch {
			batch[i].single = true
		}
		b.requeue(batch)
		b.idleIfEmpty()
		return true
	}
	if final {
		b.log.Error("server rejected the batch; giving up on its items",
			zap.String("call", b.name), zap.Int("items", len(batch)), zap.Error(err))
		for _, p := range batch {
			b.done(p.item, LeaseResult{}, err)
		}
		b.idleIfEmpty()
		return true
	}
	d := bo.next()
	b.log.Warn("call failed; retrying",
		zap.String("call", b.name), zap.Int("items", len(batch)), zap.Duration("backoff", d), zap.Error(err))
	for i := range batch {
		batch[i].resent = true
	}
	b.requeue(batch)
	return ctxtime.Sleep(ctx, d)
}

// finishBatch hands out the results: by position when the server kept the
// request order (as the contract says), else by job id; an item without a
// result is retried.
func (b *batcher[T]) finishBatch(batch []pendingItem[T], res []LeaseResult) {
	var retry []pendingItem[T]
	inOrder := len(res) == len(batch)
	for i := 0; inOrder && i < len(batch); i++ {
		inOrder = res[i].JobID == "" || res[i].JobID == b.jobID(batch[i].item)
	}
	if inOrder {
		for i, p := range batch {
			r := res[i]
			r.Redelivered = p.resent
			b.done(p.item, r, nil)
		}
	} else {
		byID := make(map[string]LeaseResult, len(res))
		for _, r := range res {
			byID[r.JobID] = r
		}
		for _, p := range batch {
			if r, ok := byID[b.jobID(p.item)]; ok {
				r.Redelivered = p.resent
				b.done(p.item, r, nil)
				continue
			}
			retry = append(retry, p)
		}
		b.log.Warn("server returned results out of order or incomplete",
			zap.String("call", b.name), zap.Int("items", len(batch)), zap.Int("results", len(res)), zap.Int("retried", len(retry)))
	}
	if len(retry) > 0 {
		b.requeue(retry)
		return
	}
	b.idleIfEmpty()
}

// take removes the next batch (and the expired items) from pending and marks
// a call in flight.
func (b *batcher[T]) take(now time.Time) (batch, expired []pendingItem[T]) {
	b.mu.Lock()
	defer b.mu.Unlock()
	keep := b.pending[:0]
	for _, p := range b.pending {
		if !p.deadline.IsZero() && now.After(p.deadline) {
			expired = append(expired, p)
			continue
		}
		keep = append(keep, p)
	}
	clear(b.pending[len(keep):])
	b.pending = keep
	n := min(len(b.pending), MaxBatch)
	if n > 0 && b.pending[0].single {
		n = 1
	}
	if n == 0 {
		b.inflight = false
		b.signalIdleLocked()
		return nil, expired
	}
	batch = make([]pendingItem[T], n)
	copy(batch, b.pending[:n])
	b.pending = append(b.pending[:0], b.pending[n:]...)
	b.inflight = true
	return batch, expired
}

// requeue puts a batch back in front of what arrived meanwhile, keeping the
// original order.
func (b *batcher[T]) requeue(batch []pendingItem[T]) {
	b.mu.Lock()
	b.pending = append(batch, b.pending...)
	b.inflight = false
	b.mu.Unlock()
}

func (b *batcher[T]) idleIfEmpty() {
	b.mu.Lock()
	b.inflight = false
	b.signalIdleLocked()
	b.mu.Unlock()
}

func (b *batcher[T]) signalIdleLocked() {
	if len(b.pending) == 0 && !b.inflight && b.idleCh != nil {
		close(b.idleCh)
		b.idleCh = nil
	}
}

// flush waits until every queued item has been finished, or ctx ends.
func (b *batcher[T]) flush(ctx context.Context) error {
	for {
		b.mu.Lock()
		if len(b.pending) == 0 && !b.inflight {
			b.mu.Unlock()
			return nil
		}
		if b.idleCh == nil {
			b.idleCh = make(chan struct{})
		}
		ch := b.idleCh
		b.mu.Unlock()
		select {
		case <-ch:
		case <-ctx.Done():
			return fmt.Errorf("%s: %d items still pending: %w", b.name, b.pendingCount(), ctx.Err())
		}
	}
}

func (b *batcher[T]) pendingCount() int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return len(b.pending)
}

// stop finishes every pending item with errStopped.
func (b *batcher[T]) stop() {
	b.mu.Lock()
	left := b.pending
	b.pending = nil
	b.inflight = false
	b.signalIdleLocked()
	b.mu.Unlock()
	for _, p := range left {
		b.done(p.item, LeaseResult{}, errStopped)
	}
}
