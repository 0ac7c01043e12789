package engine

import (
	"context"
	"errors"

	"go.uber.org/zap"

	"github.com/jq-dev/jq/queue"
	"github.com/jq-dev/jq/store"
)

// submitResult is one caller's answer from a group commit.
type submitResult struct {
	r   store.JobInsertResult
	err error
}

// Submit durably inserts one job and its first event (I1): it returns only
// after the commit. Concurrent calls are group-committed: many jobs per
// transaction, no linger.
func (e *Engine) Submit(ctx context.Context, p store.JobInsertParams) (store.JobInsertResult, error) {
	// No validation here: the API validated the request and the store checks
	// every job again; an invalid job only sends its batch to the per-caller
	// fallback, so it never refuses another caller's job.
	res, err := e.submits.do(ctx, p)
	if err != nil {
		return store.JobInsertResult{}, err
	}
	return res.r, res.err
}

// SubmitMany inserts a batch in one transaction (all or nothing).
func (e *Engine) SubmitMany(ctx context.Context, ps []store.JobInsertParams) ([]store.JobInsertResult, error) {
	res, err := e.opts.Store.JobInsertMany(ctx, ps)
	if err != nil {
		return nil, err
	}
	e.afterInsert(ctx, res)
	return res, nil
}

// flushSubmits writes the submits of many callers in one transaction. When
// that fails because of one caller's input (unknown queue, idempotency
// conflict, invalid argument), the batch is retried one job at a time so each
// caller gets its own answer and no one else's job is refused.
func (e *Engine) flushSubmits(ctx context.Context, ps []store.JobInsertParams) ([]submitResult, error) {
	out := make([]submitResult, len(ps))
	res, err := e.opts.Store.JobInsertMany(ctx, ps)
	if err == nil {
		e.afterInsert(ctx, res)
		for i := range res {
			out[i].r = res[i]
		}
		return out, nil
	}
	if len(ps) == 1 || !isCallerError(err) {
		return nil, err
	}
	for i := range ps {
		r, err := e.opts.Store.JobInsertMany(ctx, ps[i:i+1])
		if err != nil {
			out[i].err = err
			continue
		}
		out[i].r = r[0]
		e.afterInsert(ctx, r)
	}
	return out, nil
}

func isCallerError(err error) bool {
	return errors.Is(err, queue.ErrQueueNotFound) || errors.Is(err, queue.ErrIdempotencyConflict) ||
		errors.Is(err, queue.ErrInvalidArgument)
}

// afterInsert wakes this replica's scheduler and, off the submit path, the
// other replicas' (notifyLoop coalesces the queues of many commits into one
// NOTIFY statement).
func (e *Engine) afterInsert(_ context.Context, res []store.JobInsertResult) {
	queues := map[string]int{}
	for _, r := range res {
		if r.Job != nil && !r.Existing {
			queues[r.Job.Queue]++
		}
	}
	for q, n := range queues {
		e.opts.Observer.Submitted(q, n)
	}
	e.notifyNewWork(queues)
}

// notifyNewWork wakes this replica's scheduler and announces the queues to the
// other replicas (a submit, a retry).
func (e *Engine) notifyNewWork(queues map[string]int) {
	e.WakeScheduler()
	if e.opts.Notifier == nil || len(queues) == 0 {
		return
	}
	e.notifyMu.Lock()
	for q := range queues {
		e.notifyQueues[q] = struct{}{}
	}
	e.notifyMu.Unlock()
	select {
	case e.notifyWake <- struct{}{}:
	default:
	}
}

// notifyLoop sends the pending cross-replica notifications, one statement
// for everything that accumulated while the previous one was in flight. A
// lost notification only delays the other replicas to their next tick.
func (e *Engine) notifyLoop(ctx context.Context) {
	for {
		select {
		case <-ctx.Done():
			return
		case <-e.notifyWake:
		}
		e.notifyMu.Lock()
		queues := make([]string, 0, len(e.notifyQueues))
		for q := range e.notifyQueues {
			queues = append(queues, q)
		}
		clear(e.notifyQueues)
		e.notifyMu.Unlock()
		if len(queues) == 0 {
			continue
		}
		if err := e.opts.Notifier.Notify(ctx, queues); err != nil && ctx.Err() == nil {
			e.log.Warn("notify other replicas failed", zap.Error(err))
		}
	}
}

// JobsReady announces that jobs of these queues became PENDING outside a
// submit (an operator's retry): this replica's scheduler runs at once and the
// other replicas' are woken through NOTIFY.
func (e *Engine) JobsReady(queues ...string) {
	m := make(map[string]int, len(queues))
	for _, q := range queues {
		m[q]++
	}
	e.notifyNewWork(m)
}
