package engine

import (
	"context"
	"errors"
	"strings"
	"time"

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
	e.keyJob(ctx, &p)
	res, err := e.submits.do(ctx, p)
	if err != nil {
		return store.JobInsertResult{}, err
	}
	return res.r, res.err
}

// SubmitMany inserts a batch in one transaction (all or nothing).
func (e *Engine) SubmitMany(ctx context.Context, ps []store.JobInsertParams) ([]store.JobInsertResult, error) {
	for i := range ps {
		e.keyJob(ctx, &ps[i])
	}
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
			e.jobChanged(r.Job.ID)
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
		if !e.othersListen() {
			e.notifiesSkipped.Add(1)
			continue
		}
		if err := e.opts.Notifier.Notify(ctx, queues); err != nil && ctx.Err() == nil {
			e.log.Warn("notify other replicas failed", zap.Error(err))
		}
	}
}

// Presence: every replica announces itself on the notification channel at start and every
// presenceInterval ("replica:<id>"; queue names never hold ':'). A replica that has heard no other
// within presenceTTL sends no wake-up NOTIFY (one replica: nothing else listens); the others'
// schedulers still find the work on their own ticks, so a missed announcement only delays.
const (
	presencePrefix   = "replica:"
	presenceInterval = 5 * time.Second
	presenceTTL      = 3 * presenceInterval
)

// WakeUpsSkipped is how many wake-up NOTIFYs this engine did not send because no other replica
// listened.
func (e *Engine) WakeUpsSkipped() int64 { return e.notifiesSkipped.Load() }

// othersListen reports whether a wake-up NOTIFY could reach another replica: one was heard
// recently, or this replica is not listening itself and so cannot tell.
func (e *Engine) othersListen() bool {
	if !e.listening.Load() {
		return true
	}
	now := time.Now()
	e.notifyMu.Lock()
	defer e.notifyMu.Unlock()
	for id, seen := range e.peers {
		if now.Sub(seen) < presenceTTL {
			return true
		}
		delete(e.peers, id)
	}
	return false
}

// notified handles one notification: another replica's presence, or queues with new work.
func (e *Engine) notified(payload string) {
	if payload == constraintsChanged {
		e.forgetConstraints()
		e.WakeScheduler()
		return
	}
	if q, ok := strings.CutPrefix(payload, queueSettingsChanged); ok {
		e.forgetQueueSettings(q)
		e.WakeScheduler()
		return
	}
	if id, ok := strings.CutPrefix(payload, presencePrefix); ok {
		if id != e.replicaID {
			e.notifyMu.Lock()
			e.peers[id] = time.Now()
			e.notifyMu.Unlock()
		}
		return
	}
	e.WakeScheduler()
}

// presenceLoop announces this replica now and every presenceInterval.
func (e *Engine) presenceLoop(ctx context.Context) {
	t := time.NewTicker(presenceInterval)
	defer t.Stop()
	for {
		if err := e.opts.Notifier.Notify(ctx, []string{presencePrefix + e.replicaID}); err != nil && ctx.Err() == nil {
			e.log.Debug("presence announcement failed", zap.Error(err))
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
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
