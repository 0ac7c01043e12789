package engine

import (
	"context"
	"time"

	"go.uber.org/zap"

	"github.com/jq-dev/jq/store"
)

// maxDueLimit bounds one JobDue query.
const maxDueLimit = 10000

// schedulerLoop runs a cycle on every wake-up (a submit here, a NOTIFY from
// another replica, capacity freed by a report) and at least every
// SchedulerInterval (jobs whose run_at or backoff has just passed).
func (e *Engine) schedulerLoop(ctx context.Context) {
	tick := time.NewTicker(e.opts.SchedulerInterval)
	defer tick.Stop()
	failing := false // log the first failure of an outage, not every cycle
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		case <-e.wakeScheduler:
		}
		for {
			more, err := e.SchedulerCycle(ctx)
			switch {
			case err != nil && ctx.Err() == nil && !failing:
				failing = true
				e.log.Warn("scheduler cycle failed; retrying every interval (workers claim straight from Postgres while Redis is down)", zap.Error(err))
			case err != nil && ctx.Err() == nil:
				e.log.Debug("scheduler cycle failed", zap.Error(err))
			case err == nil && failing:
				failing = false
				e.log.Info("scheduler cycle succeeded again")
			}
			if !more || ctx.Err() != nil {
				break
			}
		}
	}
}

// SchedulerCycle moves due jobs into the ready sets of the queues this
// replica's workers serve, up to their free capacity (I7: nothing is handed
// out faster than workers take it; the rest stays PENDING in Postgres, where
// the next cycle finds it). It reports whether a queue hit the batch size, so
// the caller runs another cycle at once.
func (e *Engine) SchedulerCycle(ctx context.Context) (more bool, err error) {
	defer func(start time.Time) { e.opts.Observer.SchedulerCycle(time.Since(start)) }(time.Now())
	pushed := 0
	for q, free := range e.demand() {
		n, full, err := e.fillQueue(ctx, q, free)
		if err != nil {
			return false, err
		}
		pushed += n
		more = more || full
	}
	if pushed > 0 {
		e.broadcastReady()
	}
	return more, nil
}

// demand is the free capacity of this replica's sessions per queue. A
// worker serving several queues counts fully for each: its claim takes from
// whichever has work. A queue whose breaker is open on a worker gets none of
// that worker's capacity, a half-open one at most its probe.
func (e *Engine) demand() map[string]int {
	e.mu.Lock()
	defer e.mu.Unlock()
	d := map[string]int{}
	for _, s := range e.sessions {
		free := s.free()
		if free <= 0 {
			continue
		}
		for _, q := range s.queues {
			if room := s.room(q, free); room > 0 {
				d[q] += room
			}
		}
	}
	return d
}

// fillQueue tops the queue's ready set up to free entries.
func (e *Engine) fillQueue(ctx context.Context, q string, free int) (pushed int, full bool, err error) {
	readyLen, err := e.opts.Dispatcher.ReadyLen(ctx, q)
	if err != nil {
		return 0, false, err
	}
	need := min(free-int(readyLen), e.opts.BatchSize)
	if need <= 0 {
		return 0, false, nil
	}
	// Jobs already in the ready set (or just claimed) are still PENDING and
	// come first in dispatch order; ask past them. Their locks make
	// ReadyPush skip them.
	due, err := e.opts.Store.JobDue(ctx, store.JobDueParams{Queue: q, Limit: min(int(readyLen)+need, maxDueLimit)})
	if err != nil {
		return 0, false, err
	}
	if len(due) == 0 {
		return 0, false, nil
	}
	added, err := e.opts.Dispatcher.ReadyPush(ctx, store.ReadyPushParams{Queue: q, Jobs: due, LockTTL: e.opts.LockTTL})
	if err != nil {
		return 0, false, err
	}
	return added, added >= e.opts.BatchSize, nil
}
