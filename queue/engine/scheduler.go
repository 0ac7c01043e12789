package engine

import (
	"context"
)

// schedulerLoop wakes the sessions waiting for work at every wake-up: a submit here, a NOTIFY
// from another replica, a retry or a recovery that made jobs PENDING. Each session then claims
// from Postgres for its own free capacity (Session.claim, store.DispatchStore.JobClaim), so
// nothing is handed out faster than workers take it (I7); jobs whose not_before or backoff passes
// without a wake-up are found by each session's poll (SchedulerInterval). Wake-ups coalesce: any
// number of submits between two rounds wake the sessions once.
func (e *Engine) schedulerLoop(ctx context.Context) {
	for {
		select {
		case <-ctx.Done():
			return
		case <-e.wakeScheduler:
			e.broadcastReady()
		}
	}
}
