package executor

import (
	"context"
	"errors"
	"time"

	"go.uber.org/zap"
)

// errFenced cancels the jobs of a worker that could not renew its lease in time.
var errFenced = errors.New("lease not renewed in time: the worker stopped the job before the server could hand it to another worker")

// fenceFraction of the server's worker_heartbeat_timeout, counted from the start of the last
// successful renewal (registration or heartbeat), is when a worker that has not renewed since
// cancels its jobs. The server counts its timeout from when it recorded the renewal, which is
// after the worker sent it, and then needs a reaper pass to reassign: so the worker stops at
// least timeout×(1-fenceFraction) before any other worker can start the job. Both sides measure
// elapsed time on their own monotonic clocks; an offset between the hosts' wall clocks does not
// enter, only the rate drift between them (ppm) and a handler's time to honour its context.
const fenceFraction = 0.75

// noteRenewed records a successful renewal sent at sent.
func (e *Executor) noteRenewed(sent time.Time) {
	e.mu.Lock()
	if sent.After(e.renewedAt) {
		e.renewedAt = sent
	}
	e.mu.Unlock()
}

// fenceLoop cancels every job the worker holds once its lease has gone unrenewed past
// fenceFraction of the server's heartbeat timeout (Temporal's activity heartbeat timeout, seen
// from the worker). Without it a worker cut off from the server kept running jobs the server had
// already given to another worker.
func (e *Executor) fenceLoop(ctx context.Context) {
	t := time.NewTimer(time.Hour)
	defer t.Stop()
	for {
		t.Reset(e.checkFence(time.Now()))
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		case <-e.renewed:
		}
	}
}

// checkFence fences the held jobs when the lease is overdue at now and returns how long to wait
// before the next check.
func (e *Executor) checkFence(now time.Time) time.Duration {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.hbTimeout <= 0 || e.renewedAt.IsZero() {
		return time.Second // no lease yet, or a server that states no timeout
	}
	after := time.Duration(float64(e.hbTimeout) * fenceFraction)
	since := now.Sub(e.renewedAt)
	if since < after {
		return after - since
	}
	n := 0
	for _, t := range e.tasks {
		if t.fenced {
			continue
		}
		switch t.state {
		case stateQueued:
			t.cancelCause = errFenced
		case stateRunning:
			t.cancel(errFenced)
		default: // finished: its report is queued, the server judges it by attempt
			continue
		}
		t.fenced = true
		n++
	}
	if n > 0 {
		e.fenced.Add(int64(n))
		e.log.Warn("lease not renewed in time; cancelling the running jobs before the server reassigns them",
			zap.Int("jobs", n), zap.Duration("since_renewal", since), zap.Duration("heartbeat_timeout", e.hbTimeout))
	}
	return min(max(e.hbInterval, 100*time.Millisecond), time.Second)
}
