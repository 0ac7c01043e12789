package storetest

import (
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/jq-dev/jq/queue"
	"github.com/jq-dev/jq/store"
)

// recoverySuite runs the contract of store.RecoveryStore (except JobLeasesToCancel, which
// operatorSuite covers). The reaper's statements act on the whole store — every worker, every job —
// so it takes an isolated one, and the subtests run one after the other.
func recoverySuite(t *testing.T, f Factory) {
	s := f.IsolatedStore(t)
	bb := newBundle(t, func(*testing.T) store.Store { return s })
	b := &rsBundle{dsBundle: &dsBundle{bundle: bb, ds: as[store.DispatchStore](t, s)}, rs: as[store.RecoveryStore](t, s)}
	t.Run("JobOverdue", b.testOverdue)
	t.Run("JobFailMany", b.testFailMany)
	t.Run("JobSettleFailed", b.testRetryFailed)
	t.Run("JobSettleFailedRetryAfter", b.testRetryAfter)
	t.Run("JobSettleFailedWritesTheDecision", b.testSettleWritesDecision)
	t.Run("JobExpireTTL", b.testExpireTTL)
	t.Run("WorkerMarkLost", b.testMarkLost)
	t.Run("JobHeldBy", b.testHeldBy)
	t.Run("InvalidArguments", b.testRecoveryInvalid)
}

type rsBundle struct {
	*dsBundle
	rs store.RecoveryStore
}

// assigned inserts a job (with p's settings) and assigns it to worker.
func (b *rsBundle) assigned(t *testing.T, worker string, p store.JobInsertParams) *queue.Job {
	t.Helper()
	c := b.with(t)
	j := c.insertOne(p)
	jobs, err := b.ds.JobAssignMany(b.ctx, store.JobAssignParams{WorkerID: worker, IDs: []string{j.ID}})
	require.NoError(t, err)
	require.Len(t, jobs, 1)
	return jobs[0]
}

// running inserts, assigns and acks a job.
func (b *rsBundle) running(t *testing.T, worker string, p store.JobInsertParams) *queue.Job {
	t.Helper()
	j := b.assigned(t, worker, p)
	out, err := b.ds.JobAckMany(b.ctx, []store.JobLease{{ID: j.ID, Attempt: j.Attempt, WorkerID: worker}})
	require.NoError(t, err)
	require.NoError(t, out[0].Err)
	return out[0].Job
}

func (b *rsBundle) overdue(t *testing.T, p store.JobOverdueParams) map[string]store.OverdueLease {
	t.Helper()
	if p.Limit == 0 {
		p.Limit = store.MaxDispatchBatch
	}
	if p.Now.IsZero() {
		p.Now = time.Now()
	}
	ls, err := b.rs.JobOverdue(b.ctx, p)
	require.NoError(t, err)
	out := map[string]store.OverdueLease{}
	for _, l := range ls {
		// The store narrows; the rule decides (as the reaper does). Every candidate the store
		// returns must be overdue by the rule: the filter may not return more.
		j := queue.Job{State: l.State, UpdatedAt: l.UpdatedAt, StartedAt: l.StartedAt, Timeout: l.Timeout}
		reason, ok := p.Deadlines.Overdue(&j, l.WorkerLost, p.Now)
		require.True(t, ok, "job %s returned by JobOverdue is not overdue by queue.Deadlines", l.ID)
		l.Reason = reason
		out[l.ID] = l
	}
	return out
}

// settle runs the retry sweep as the engine does: queue.SettleFailed with the wall clock and jitter.
func (b *rsBundle) settle(limit int) (store.RetrySweep, error) {
	return b.rs.JobSettleFailed(b.ctx, limit, func(j queue.FailedJob) queue.Decision {
		return queue.SettleFailed(j, time.Now(), rand.Float64)
	})
}

func (b *rsBundle) fail(t *testing.T, j *queue.Job, reason string) *queue.Job {
	t.Helper()
	out, err := b.rs.JobFailMany(b.ctx, []store.JobFailParams{{
		JobLease: store.JobLease{ID: j.ID, Attempt: j.Attempt, WorkerID: j.WorkerID}, Reason: reason, Error: "boom",
	}})
	require.NoError(t, err)
	require.NoError(t, out[0].Err)
	return out[0].Job
}

func (b *rsBundle) testOverdue(t *testing.T) {
	w := b.with(t).register(uniqueName("w"))
	assigned := b.assigned(t, w.ID, b.job("a"))
	short := b.job("r")
	short.Timeout = time.Second
	running := b.running(t, w.ID, short)
	long := b.job("r")
	long.Timeout = time.Hour
	runningLong := b.running(t, w.ID, long)
	ghost := b.assigned(t, uniqueName("ghost"), b.job("g")) // a worker that never registered

	// Generous limits: nothing is overdue but the ghost's job, and that only when asked.
	got := b.overdue(t, store.JobOverdueParams{Deadlines: queue.Deadlines{Assignment: time.Hour, Grace: time.Hour}})
	require.NotContains(t, got, assigned.ID)
	require.NotContains(t, got, running.ID)
	require.NotContains(t, got, ghost.ID, "worker_lost only with WorkersLost")
	got = b.overdue(t, store.JobOverdueParams{Deadlines: queue.Deadlines{Assignment: time.Hour, Grace: time.Hour}, WorkersLost: true})
	require.Contains(t, got, ghost.ID)
	require.Equal(t, queue.ReasonWorkerLost, got[ghost.ID].Reason)
	require.Equal(t, queue.StateAssigned, got[ghost.ID].State)
	require.Equal(t, ghost.Attempt, got[ghost.ID].Attempt)
	require.NotContains(t, got, assigned.ID, "the registered worker is ONLINE")

	// A tiny assignment timeout: the ASSIGNED job is overdue, the RUNNING ones are not.
	got = b.overdue(t, store.JobOverdueParams{Deadlines: queue.Deadlines{Assignment: time.Microsecond, Grace: time.Hour}})
	require.Contains(t, got, assigned.ID)
	require.Equal(t, queue.ReasonAssignmentTimeout, got[assigned.ID].Reason)
	require.Equal(t, w.ID, got[assigned.ID].WorkerID)
	require.Equal(t, b.queue, got[assigned.ID].Queue)
	require.NotContains(t, got, running.ID)

	// The 1 s job passes its timeout (grace 0); the 1 h one never does.
	require.Eventually(t, func() bool {
		_, ok := b.overdue(t, store.JobOverdueParams{Deadlines: queue.Deadlines{Assignment: time.Hour}})[running.ID]
		return ok
	}, 10*time.Second, 50*time.Millisecond)
	got = b.overdue(t, store.JobOverdueParams{Deadlines: queue.Deadlines{Assignment: time.Hour}})
	require.Equal(t, queue.ReasonTimeout, got[running.ID].Reason)
	require.Equal(t, queue.StateRunning, got[running.ID].State)
	require.NotContains(t, got, runningLong.ID)

	// A worker marked OFFLINE loses its jobs (when asked).
	require.NoError(t, b.s.WorkerDeregister(b.ctx, w.ID))
	got = b.overdue(t, store.JobOverdueParams{Deadlines: queue.Deadlines{Assignment: time.Hour, Grace: time.Hour}, WorkersLost: true})
	require.Equal(t, queue.ReasonWorkerLost, got[runningLong.ID].Reason)

	// Finished jobs are never overdue.
	for _, j := range []*queue.Job{assigned, running, runningLong, ghost} {
		b.fail(t, j, queue.ReasonWorkerLost)
	}
	got = b.overdue(t, store.JobOverdueParams{Deadlines: queue.Deadlines{Assignment: time.Microsecond}, WorkersLost: true})
	for _, j := range []*queue.Job{assigned, running, runningLong, ghost} {
		require.NotContains(t, got, j.ID)
	}
}

func (b *rsBundle) testFailMany(t *testing.T) {
	c := b.with(t)
	w := c.register(uniqueName("w"))
	assigned := b.assigned(t, w.ID, b.job("a"))
	running := b.running(t, w.ID, b.job("r"))
	done := b.running(t, w.ID, b.job("d"))
	rep, err := b.ds.JobReportMany(b.ctx, []store.JobReportParams{{JobLease: store.JobLease{ID: done.ID, Attempt: done.Attempt, WorkerID: w.ID}, Success: true}})
	require.NoError(t, err)
	require.NoError(t, rep[0].Err)

	out, err := b.rs.JobFailMany(b.ctx, []store.JobFailParams{
		{JobLease: store.JobLease{ID: assigned.ID, Attempt: assigned.Attempt, WorkerID: "reaper"}, Reason: queue.ReasonAssignmentTimeout},
		{JobLease: store.JobLease{ID: running.ID, Attempt: running.Attempt, WorkerID: w.ID}, Reason: queue.ReasonTimeout, Error: "ran too long"},
		{JobLease: store.JobLease{ID: done.ID, Attempt: done.Attempt, WorkerID: w.ID}, Reason: queue.ReasonTimeout},
		{JobLease: store.JobLease{ID: running.ID, Attempt: running.Attempt, WorkerID: w.ID}, Reason: queue.ReasonTimeout},
		{JobLease: store.JobLease{ID: "3c9d0c0e-7b4a-4c8e-9a55-0a3f1f6f6b11", Attempt: 1, WorkerID: w.ID}, Reason: queue.ReasonTimeout},
		{JobLease: store.JobLease{ID: assigned.ID, Attempt: assigned.Attempt, WorkerID: w.ID}},
	})
	require.NoError(t, err)
	require.Len(t, out, 6)
	require.NoError(t, out[0].Err, "ASSIGNED → FAILED; the worker is not compared")
	require.Equal(t, queue.StateFailed, out[0].Job.State)
	require.Equal(t, queue.ReasonAssignmentTimeout, out[0].Job.FailureReason)
	require.NoError(t, out[1].Err)
	require.Equal(t, "ran too long", out[1].Job.LastError)
	require.ErrorIs(t, out[2].Err, queue.ErrStaleAttempt, "a DONE job is never failed")
	require.ErrorIs(t, out[3].Err, queue.ErrStaleAttempt, "a repeat in the batch")
	require.ErrorIs(t, out[4].Err, queue.ErrJobNotFound)
	require.ErrorIs(t, out[5].Err, queue.ErrInvalidArgument, "a reason is required")
	require.Equal(t, queue.StateDone, c.get(done.ID).State)

	evs := c.events(assigned.ID)
	last := evs[len(evs)-1]
	require.Equal(t, queue.StateAssigned, last.From)
	require.Equal(t, queue.StateFailed, last.To)
	require.Equal(t, queue.ReasonAssignmentTimeout, last.Reason)
	evs = c.events(running.ID)
	last = evs[len(evs)-1]
	require.Equal(t, queue.StateRunning, last.From)
	require.Equal(t, "ran too long", last.Error)

	// A stale attempt changes nothing.
	again := b.assigned(t, w.ID, b.job("s"))
	out, err = b.rs.JobFailMany(b.ctx, []store.JobFailParams{{JobLease: store.JobLease{ID: again.ID, Attempt: again.Attempt + 1, WorkerID: w.ID}, Reason: queue.ReasonTimeout}})
	require.NoError(t, err)
	require.ErrorIs(t, out[0].Err, queue.ErrStaleAttempt)
	require.Equal(t, queue.StateAssigned, c.get(again.ID).State)
}

func (b *rsBundle) testRetryFailed(t *testing.T) {
	c := b.with(t)
	b.sweepAll(t) // what earlier subtests left FAILED
	q := c.newQueue(store.QueueCreateParams{BackoffBase: 2 * time.Second, BackoffMax: 3 * time.Second})
	w := c.register(uniqueName("w"))
	mk := func(maxRetries int) store.JobInsertParams {
		p := store.JobInsertParams{Queue: q.Name, Type: "t", MaxRetries: &maxRetries, TTL: time.Hour}
		return p
	}
	retry := b.fail(t, b.running(t, w.ID, mk(3)), queue.DefaultFailureReason)
	exhausted := b.fail(t, b.running(t, w.ID, mk(0)), queue.ReasonTimeout)
	permanentJob := b.running(t, w.ID, mk(3))
	rep, err := b.ds.JobReportMany(b.ctx, []store.JobReportParams{{
		JobLease: store.JobLease{ID: permanentJob.ID, Attempt: permanentJob.Attempt, WorkerID: w.ID},
		Error:    "bad input", Permanent: true,
	}})
	require.NoError(t, err)
	require.NoError(t, rep[0].Err)
	require.True(t, rep[0].Job.NoRetry)

	before := time.Now()
	total := store.RetrySweep{Queues: map[string]int{}, DeadQueues: map[string]int{}}
	for {
		sweep, err := b.settle(2) // several calls: the limit holds
		require.NoError(t, err)
		require.LessOrEqual(t, sweep.Retried+sweep.DeadLettered, 2)
		if sweep.Retried+sweep.DeadLettered == 0 {
			break
		}
		total.Retried += sweep.Retried
		total.DeadLettered += sweep.DeadLettered
		for k, v := range sweep.Queues {
			total.Queues[k] += v
		}
		for k, v := range sweep.DeadQueues {
			total.DeadQueues[k] += v
		}
	}
	require.Equal(t, 1, total.Retried)
	require.Equal(t, 2, total.DeadLettered)
	require.Equal(t, map[string]int{q.Name: 1}, total.Queues)
	require.Equal(t, map[string]int{q.Name: 2}, total.DeadQueues)

	j := c.get(retry.ID)
	require.Equal(t, queue.StatePending, j.State)
	require.Equal(t, 1, j.RetryCount)
	// Backoff of the first retry: base (2 s) plus up to 10 % jitter, from the database's now().
	wait := time.Until(j.NotBefore)
	require.Greater(t, wait, 2*time.Second-time.Since(before)-time.Second, "not before base")
	require.LessOrEqual(t, wait, 2200*time.Millisecond+time.Second, "at most base + 10 %%")
	require.Equal(t, j.NotBefore.Add(time.Hour), j.ExpiresAt, "the TTL restarts from not_before")
	require.True(t, j.CompletedAt.IsZero())
	evs := c.events(retry.ID)
	require.Equal(t, queue.StateFailed, evs[len(evs)-1].From)
	require.Equal(t, queue.StatePending, evs[len(evs)-1].To)
	require.Equal(t, queue.ReasonRetry, evs[len(evs)-1].Reason)

	j = c.get(exhausted.ID)
	require.Equal(t, queue.StateDeadLettered, j.State)
	require.Equal(t, queue.ReasonTimeout, j.FailureReason, "the last failure's reason is kept")
	require.False(t, j.CompletedAt.IsZero())
	evs = c.events(exhausted.ID)
	require.Equal(t, queue.ReasonMaxRetries, evs[len(evs)-1].Reason)
	require.Equal(t, "boom", evs[len(evs)-1].Error, "the dead-letter event carries the last error")

	j = c.get(permanentJob.ID)
	require.Equal(t, queue.StateDeadLettered, j.State)
	require.Equal(t, queue.ReasonPermanent, j.FailureReason, "why it was dead-lettered, not the generic error")
	evs = c.events(permanentJob.ID)
	require.Equal(t, queue.ReasonPermanent, evs[len(evs)-1].Reason)

	// The second retry doubles the delay (4 s), capped at max (3 s). Assignment does not look at
	// not_before, so the job can be run again at once.
	jobs, err := b.ds.JobAssignMany(b.ctx, store.JobAssignParams{WorkerID: w.ID, IDs: []string{retry.ID}})
	require.NoError(t, err)
	require.Len(t, jobs, 1)
	b.fail(t, jobs[0], queue.DefaultFailureReason)
	before = time.Now()
	sweep, err := b.settle(10)
	require.NoError(t, err)
	require.Equal(t, 1, sweep.Retried)
	j = c.get(retry.ID)
	require.Equal(t, 2, j.RetryCount)
	wait = time.Until(j.NotBefore)
	require.Greater(t, wait, 3*time.Second-time.Since(before)-time.Second)
	require.LessOrEqual(t, wait, 3300*time.Millisecond+time.Second)
}

// testSettleWritesDecision: the backend writes exactly what the rule decided — not a backoff of its
// own. With a fixed clock and jitter the stored not_before and expires_at are exact; a decision for
// another edge fails the sweep and writes nothing.
func (b *rsBundle) testSettleWritesDecision(t *testing.T) {
	c := b.with(t)
	b.sweepAll(t)
	q := c.newQueue(store.QueueCreateParams{BackoffBase: 2 * time.Second, BackoffMax: time.Minute})
	w := c.register(uniqueName("w"))
	three := 3
	j := b.fail(t, b.running(t, w.ID, store.JobInsertParams{Queue: q.Name, Type: "t", MaxRetries: &three, TTL: time.Hour}),
		queue.DefaultFailureReason)
	// A clock far from the database's: a backend computing its own time would be seconds off.
	now := time.Date(2031, 5, 6, 7, 8, 9, 123456000, time.UTC)
	half := func() float64 { return 0.5 }
	var seen []queue.FailedJob
	sweep, err := b.rs.JobSettleFailed(b.ctx, store.MaxDispatchBatch, func(f queue.FailedJob) queue.Decision {
		seen = append(seen, f)
		return queue.SettleFailed(f, now, half)
	})
	require.NoError(t, err)
	require.Equal(t, 1, sweep.Retried)
	require.Len(t, seen, 1)
	require.Equal(t, queue.FailedJob{MaxRetries: 3, TTL: time.Hour, Reason: queue.DefaultFailureReason,
		Policy: queue.RetryPolicy{Base: 2 * time.Second, Max: time.Minute}}, seen[0], "the rule is given the job and its queue's policy")
	got := c.get(j.ID)
	want := now.Add(2*time.Second + 100*time.Millisecond) // base + 10 % jitter × 0.5
	require.True(t, want.Equal(got.NotBefore), "not_before %v, want %v", got.NotBefore, want)
	require.True(t, want.Add(time.Hour).Equal(got.ExpiresAt), "expires_at %v, want %v", got.ExpiresAt, want.Add(time.Hour))
	require.Equal(t, 1, got.RetryCount)

	// A decision the sweep may not write: nothing changes.
	j2 := b.fail(t, b.running(t, w.ID, store.JobInsertParams{Queue: q.Name, Type: "t", MaxRetries: &three}), queue.DefaultFailureReason)
	_, err = b.rs.JobSettleFailed(b.ctx, store.MaxDispatchBatch, func(queue.FailedJob) queue.Decision {
		return queue.Decision{From: queue.StateFailed, To: queue.StateDone, Reason: "x"}
	})
	require.ErrorIs(t, err, queue.ErrIllegalTransition)
	require.Equal(t, queue.StateFailed, c.get(j2.ID).State)
	b.sweepAll(t)
}

// sweepAll runs the retry sweep until nothing is FAILED.
// testRetryAfter: a failure report's RetryAfter delays the retry past the queue's backoff (never
// shortens it), is used up by that retry, and means nothing with Permanent.
func (b *rsBundle) testRetryAfter(t *testing.T) {
	c := b.with(t)
	b.sweepAll(t) // what earlier subtests left FAILED
	q := c.newQueue(store.QueueCreateParams{BackoffBase: 2 * time.Second, BackoffMax: 2 * time.Second})
	w := c.register(uniqueName("w"))
	three := 3
	p := store.JobInsertParams{Queue: q.Name, Type: "t", MaxRetries: &three}
	report := func(j *queue.Job, retryAfter time.Duration, permanent bool) {
		t.Helper()
		rep, err := b.ds.JobReportMany(b.ctx, []store.JobReportParams{{
			JobLease: store.JobLease{ID: j.ID, Attempt: j.Attempt, WorkerID: w.ID},
			Error:    "busy", RetryAfter: retryAfter, Permanent: permanent,
		}})
		require.NoError(t, err)
		require.NoError(t, rep[0].Err)
	}
	long := b.running(t, w.ID, p)  // Retry-After beyond the backoff: it wins
	short := b.running(t, w.ID, p) // Retry-After below the backoff: the backoff wins
	perm := b.running(t, w.ID, p)  // permanent: dead-lettered all the same
	report(long, time.Hour, false)
	report(short, 10*time.Millisecond, false)
	report(perm, time.Hour, true)

	before := time.Now()
	b.sweepAll(t)
	j := c.get(long.ID)
	require.Equal(t, queue.StatePending, j.State)
	require.GreaterOrEqual(t, j.NotBefore.Add(time.Second), before.Add(time.Hour), "not before now + retry_after (1 s for clock rounding)")
	require.Less(t, time.Until(j.NotBefore), time.Hour+time.Minute, "retry_after, not retry_after plus the backoff")
	j = c.get(short.ID)
	require.Equal(t, queue.StatePending, j.State)
	require.Greater(t, time.Until(j.NotBefore), time.Second, "the backoff (2 s) wins over a shorter retry_after")
	require.LessOrEqual(t, time.Until(j.NotBefore), 2200*time.Millisecond+time.Second)
	require.Equal(t, queue.StateDeadLettered, c.get(perm.ID).State)

	// The retry used the Retry-After up: the next failure, without one, waits for the backoff alone.
	again, err := b.ds.JobAssignMany(b.ctx, store.JobAssignParams{WorkerID: w.ID, IDs: []string{long.ID}})
	require.NoError(t, err)
	require.Len(t, again, 1)
	report(again[0], 0, false)
	b.sweepAll(t)
	j = c.get(long.ID)
	require.Equal(t, queue.StatePending, j.State)
	require.Equal(t, 2, j.RetryCount)
	require.Less(t, time.Until(j.NotBefore), 2200*time.Millisecond+time.Second, "retry_after was reset by the first retry")
}

func (b *rsBundle) sweepAll(t *testing.T) {
	t.Helper()
	for {
		sweep, err := b.settle(store.MaxDispatchBatch)
		require.NoError(t, err)
		if sweep.Retried+sweep.DeadLettered == 0 {
			return
		}
	}
}

func (b *rsBundle) testExpireTTL(t *testing.T) {
	c := b.with(t)
	p := b.job("ttl")
	p.TTL = time.Millisecond
	expiring := c.insertOne(p)
	p.TTL = time.Hour
	kept := c.insertOne(p)
	require.Eventually(t, func() bool {
		n, err := b.rs.JobExpireTTL(b.ctx, 100)
		require.NoError(t, err)
		if len(n) > 0 {
			require.Equal(t, map[string]int{p.Queue: 1}, n, "counted by queue")
		}
		return len(n) > 0 || c.get(expiring.ID).State == queue.StateDeadLettered
	}, 10*time.Second, 20*time.Millisecond)
	j := c.get(expiring.ID)
	require.Equal(t, queue.StateDeadLettered, j.State)
	require.Equal(t, queue.ReasonTTLExpired, j.FailureReason)
	evs := c.events(expiring.ID)
	require.Equal(t, queue.StatePending, evs[len(evs)-1].From)
	require.Equal(t, queue.ReasonTTLExpired, evs[len(evs)-1].Reason)
	require.Equal(t, queue.StatePending, c.get(kept.ID).State)
	n, err := b.rs.JobExpireTTL(b.ctx, 100)
	require.NoError(t, err)
	require.Empty(t, n, "nothing left to expire")
}

func (b *rsBundle) testMarkLost(t *testing.T) {
	c := b.with(t)
	silent := c.register(uniqueName("silent"))
	require.NoError(t, b.s.WorkerDeregister(b.ctx, c.register(uniqueName("gone")).ID))
	ids, err := b.rs.WorkerMarkLost(b.ctx, time.Hour)
	require.NoError(t, err)
	require.NotContains(t, ids, silent.ID, "heartbeat within the timeout")
	require.Eventually(t, func() bool {
		ids, err := b.rs.WorkerMarkLost(b.ctx, 200*time.Millisecond)
		require.NoError(t, err)
		for _, id := range ids {
			require.NotContains(t, id, "gone", "an OFFLINE worker is not lost again")
		}
		return slices.Contains(ids, silent.ID)
	}, 10*time.Second, 50*time.Millisecond)
	w, err := b.s.WorkerGet(b.ctx, silent.ID)
	require.NoError(t, err)
	require.Equal(t, queue.WorkerOffline, w.Status)
	ids, err = b.rs.WorkerMarkLost(b.ctx, time.Microsecond)
	require.NoError(t, err)
	require.NotContains(t, ids, silent.ID, "already OFFLINE")
}

func (b *rsBundle) testHeldBy(t *testing.T) {
	c := b.with(t)
	w := c.register(uniqueName("w"))
	a := b.assigned(t, w.ID, b.job("a"))
	r := b.running(t, w.ID, b.job("r"))
	f := b.fail(t, b.running(t, w.ID, b.job("f")), queue.ReasonTimeout)
	ids, err := b.rs.JobHeldBy(b.ctx, w.ID)
	require.NoError(t, err)
	require.ElementsMatch(t, []string{a.ID, r.ID}, ids)
	require.NotContains(t, ids, f.ID)
	ids, err = b.rs.JobHeldBy(b.ctx, uniqueName("nobody"))
	require.NoError(t, err)
	require.Empty(t, ids)
}

func (b *rsBundle) testRecoveryInvalid(t *testing.T) {
	for name, p := range map[string]store.JobOverdueParams{
		"no assignment timeout": {Now: time.Now(), Limit: 1},
		"negative grace":        {Deadlines: queue.Deadlines{Assignment: time.Second, Grace: -1}, Now: time.Now(), Limit: 1},
		"no now":                {Deadlines: queue.Deadlines{Assignment: time.Second}, Limit: 1},
		"no limit":              {Deadlines: queue.Deadlines{Assignment: time.Second}, Now: time.Now()},
		"limit too big":         {Deadlines: queue.Deadlines{Assignment: time.Second}, Now: time.Now(), Limit: store.MaxDispatchBatch + 1},
	} {
		_, err := b.rs.JobOverdue(b.ctx, p)
		require.ErrorIs(t, err, queue.ErrInvalidArgument, name)
	}
	_, err := b.settle(0)
	require.ErrorIs(t, err, queue.ErrInvalidArgument)
	_, err = b.rs.JobSettleFailed(b.ctx, 1, nil)
	require.ErrorIs(t, err, queue.ErrInvalidArgument)
	_, err = b.rs.JobExpireTTL(b.ctx, store.MaxDispatchBatch+1)
	require.ErrorIs(t, err, queue.ErrInvalidArgument)
	_, err = b.rs.WorkerMarkLost(b.ctx, 0)
	require.ErrorIs(t, err, queue.ErrInvalidArgument)
	_, err = b.rs.JobFailMany(b.ctx, make([]store.JobFailParams, store.MaxDispatchBatch+1))
	require.ErrorIs(t, err, queue.ErrInvalidArgument)
}
