package engine

import (
	"context"
	"sync"
	"time"

	"github.com/jq-dev/jq/queue"
)

// batcher is the group commit used on every hot path (submit, ack, report):
// callers hand in requests; a few flusher goroutines each take whatever has
// accumulated — at most maxItems — and write it with one statement. There is
// no linger: while one flush is in flight the next batch fills up, so under
// load batches grow by themselves and when idle a request is written at once.
type batcher[T, R any] struct {
	in       chan *batchReq[T, R]
	stopped  chan struct{} // closed when run has returned: nothing reads in any more
	maxItems int
	size     func(T) int
	flush    func(ctx context.Context, reqs []T) ([]R, error)
}

// flushTimeout bounds one batched write.
const flushTimeout = 30 * time.Second

type batchReq[T, R any] struct {
	ctx  context.Context
	v    T
	res  R
	err  error
	done chan struct{}
}

func newBatcher[T, R any](maxItems int, size func(T) int, flush func(context.Context, []T) ([]R, error)) *batcher[T, R] {
	return &batcher[T, R]{in: make(chan *batchReq[T, R], 4*maxItems), stopped: make(chan struct{}), maxItems: maxItems, size: size, flush: flush}
}

// do submits one request and waits for its result. When ctx ends first the
// caller gets ctx's error; the request may still be written (the caller must
// treat the outcome as unknown, as with any RPC that times out).
func (b *batcher[T, R]) do(ctx context.Context, v T) (R, error) {
	r := &batchReq[T, R]{ctx: ctx, v: v, done: make(chan struct{})}
	var zero R
	select {
	case b.in <- r:
	case <-ctx.Done():
		return zero, ctx.Err()
	case <-b.stopped:
		return zero, queue.ErrShutdown
	}
	select {
	case <-r.done:
		return r.res, r.err
	case <-ctx.Done():
		return zero, ctx.Err()
	case <-b.stopped:
		select {
		case <-r.done:
			return r.res, r.err
		default: // queued after the final drain: never written
			return zero, queue.ErrShutdown
		}
	}
}

// run starts n flushers and returns when ctx ends and they have stopped.
// Requests still queued at that point fail with ctx's error.
func (b *batcher[T, R]) run(ctx context.Context, n int) {
	var wg sync.WaitGroup
	for range n {
		wg.Go(func() { b.loop(ctx) })
	}
	wg.Wait()
	defer close(b.stopped)
	for {
		select {
		case r := <-b.in:
			r.err = queue.ErrShutdown // UNAVAILABLE: nothing was written, retry elsewhere
			close(r.done)
		default:
			return
		}
	}
}

func (b *batcher[T, R]) loop(ctx context.Context) {
	batch := make([]*batchReq[T, R], 0, 64)
	for ctx.Err() == nil {
		batch = batch[:0]
		select {
		case <-ctx.Done():
			return
		case r := <-b.in:
			batch = append(batch, r)
		}
		items := b.size(batch[0].v)
	fill:
		for items < b.maxItems {
			select {
			case r := <-b.in:
				batch = append(batch, r)
				items += b.size(r.v)
			default:
				break fill
			}
		}
		b.write(ctx, batch)
	}
}

func (b *batcher[T, R]) write(ctx context.Context, batch []*batchReq[T, R]) {
	// Callers that gave up are dropped before the write, so a timed-out
	// submit is not committed behind the caller's back when avoidable.
	live := batch[:0]
	for _, r := range batch {
		if r.ctx.Err() != nil {
			r.err = r.ctx.Err()
			close(r.done)
			continue
		}
		live = append(live, r)
	}
	if len(live) == 0 {
		return
	}
	vs := make([]T, len(live))
	for i, r := range live {
		vs[i] = r.v
	}
	// The write outlives a cancelled server context: accepted work is
	// finished, not abandoned half-way.
	fctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), flushTimeout)
	res, err := b.flush(fctx, vs)
	cancel()
	for i, r := range live {
		if err != nil {
			r.err = err
		} else {
			r.res = res[i]
		}
		close(r.done)
	}
}
