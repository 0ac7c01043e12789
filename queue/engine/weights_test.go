package engine_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/jq-dev/jq/internal/testenv"
	"github.com/jq-dev/jq/queue"
	"github.com/jq-dev/jq/queue/engine"
	"github.com/jq-dev/jq/store"
)

// weightsEnv is one replica and a one-slot worker session on a fresh queue of given settings.
type weightsEnv struct {
	h      *harness
	engine *engine.Engine
	queue  string
	worker string
}

func newWeightsEnv(t *testing.T, p store.QueueCreateParams) *weightsEnv {
	t.Helper()
	h := newHarness(t)
	r := h.startReplica()
	sfx := h.prefix[len(h.prefix)-8:]
	p.Name = "wts-" + sfx
	_, err := h.store.QueueCreate(h.ctx, p)
	require.NoError(t, err)
	return &weightsEnv{h: h, engine: r.engine, queue: p.Name, worker: "wts-w-" + sfx}
}

// insert adds n jobs at priority prio in batches (no session yet: they wait as a backlog).
func (w *weightsEnv) insert(n, prio int) {
	w.h.t.Helper()
	for n > 0 {
		ps := make([]store.JobInsertParams, min(n, 100))
		for i := range ps {
			ps[i] = store.JobInsertParams{Queue: w.queue, Type: "noop", Priority: prio}
		}
		_, err := w.h.store.JobInsertMany(w.h.ctx, ps)
		require.NoError(w.h.t, err)
		n -= len(ps)
	}
}

// starts opens a session with one slot and returns the first n jobs it starts, in order: each is
// reported done (which implies its ack) before the slot takes the next.
func (w *weightsEnv) starts(n int) []*queue.Job {
	t, ctx := w.h.t, w.h.ctx
	t.Helper()
	wk, err := w.engine.WorkerRegister(ctx, store.WorkerRegisterParams{ID: w.worker, Concurrency: 1, Queues: []string{w.queue}})
	require.NoError(t, err)
	sess := w.engine.OpenSession(wk, 0)
	defer sess.Close()
	var out []*queue.Job
	for len(out) < n {
		jobs, err := sess.Next(ctx)
		require.NoError(t, err)
		require.Len(t, jobs, 1, "one slot")
		j := jobs[0]
		res, err := w.engine.Report(ctx, w.worker, []store.JobReportParams{{
			JobLease: store.JobLease{ID: j.ID, Attempt: j.Attempt, WorkerID: w.worker}, Success: true,
		}})
		require.NoError(t, err)
		require.NoError(t, res[0].Err)
		out = append(out, j)
	}
	return out
}

// TestWeightedDispatchRatio: with weights 9=3,0=1 and both levels backlogged, one worker slot starts the levels 3:1
// (within 10 %) over 400 starts, FIFO within each level. Strict priority would start 400 of 9.
func TestWeightedDispatchRatio(t *testing.T) {
	t.Parallel()
	w := newWeightsEnv(t, store.QueueCreateParams{PriorityWeights: map[int]int{9: 3, 0: 1}})
	w.insert(400, 9)
	w.insert(400, 0)
	count := map[int]int{}
	last := map[int]time.Time{}
	for _, j := range w.starts(400) {
		count[j.Priority]++
		require.False(t, j.CreatedAt.Before(last[j.Priority]), "FIFO within a level")
		last[j.Priority] = j.CreatedAt
	}
	require.Equal(t, 400, count[9]+count[0])
	t.Logf("starts: %d of priority 9, %d of priority 0", count[9], count[0])
	ratio := float64(count[9]) / float64(count[0])
	require.InDelta(t, 3.0, ratio, 0.3, "starts of 9 and of 0: %d and %d", count[9], count[0])
}

// A weighted level with no due jobs does not distort the others: 9=3,5=2,0=1 with nothing at 5
// starts 9 and 0 at 3:1, and a level without a weight (here 4) only gets what the weighted leave.
func TestWeightedDispatchEmptyLevel(t *testing.T) {
	t.Parallel()
	w := newWeightsEnv(t, store.QueueCreateParams{PriorityWeights: map[int]int{9: 3, 5: 2, 0: 1}})
	w.insert(400, 9)
	w.insert(400, 0)
	w.insert(10, 4)
	count := map[int]int{}
	for _, j := range w.starts(400) {
		count[j.Priority]++
	}
	t.Logf("starts: %v", count)
	require.Zero(t, count[4], "no weight: served after the weighted levels")
	require.InDelta(t, 3.0, float64(count[9])/float64(count[0]), 0.3, "starts of 9 and of 0: %v", count)
}

// Aging: a low-priority job that has waited past the queue's max_wait starts before newer high ones,
// whatever the weights (the scheduler alone would start priority 9 first).
func TestWeightedDispatchAging(t *testing.T) {
	t.Parallel()
	const maxWait = time.Second
	w := newWeightsEnv(t, store.QueueCreateParams{PriorityWeights: map[int]int{9: 3, 0: 1}, MaxWait: maxWait})
	w.insert(1, 0)
	time.Sleep(maxWait + 100*time.Millisecond) // the low job ages; the high ones come after
	w.insert(20, 9)
	got := w.starts(2)
	require.Equal(t, 0, got[0].Priority, "the aged low job first")
	require.Equal(t, 9, got[1].Priority)
}

// A queue's weights changed through one replica change dispatch on another without a restart: its
// announcement makes the other read them at its next claim (at the latest after queueSettingsTTL).
// Strict priority starts only 9s from a backlog of 9s and 0s; with 9=1,0=1 the other replica's one
// slot alternates.
func TestQueueUpdateReachesOtherReplica(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	a, b := h.startReplica(), h.startReplica()
	sfx := h.prefix[len(h.prefix)-8:]
	w := &weightsEnv{h: h, engine: b.engine, queue: "wupd-" + sfx, worker: "wupd-w-" + sfx}
	_, err := a.engine.QueueCreate(h.ctx, store.QueueCreateParams{Name: w.queue})
	require.NoError(t, err)
	w.insert(200, 9)
	w.insert(200, 0)
	for _, j := range w.starts(4) {
		require.Equal(t, 9, j.Priority, "strict priority before the update")
	}
	_, err = a.engine.QueueUpdate(h.ctx, store.QueueUpdateParams{Name: w.queue, PriorityWeights: map[int]int{9: 1, 0: 1}})
	require.NoError(t, err)
	testenv.Eventually(t, 2*engine.QueueSettingsTTL, func() error {
		count := map[int]int{}
		for _, j := range w.starts(4) {
			count[j.Priority]++
		}
		if count[0] == 0 {
			return fmt.Errorf("replica b still dispatches by strict priority: %v", count)
		}
		require.Equal(t, map[int]int{9: 2, 0: 2}, count, "9=1,0=1: the levels alternate")
		return nil
	})
}

// Peek's order is dispatch's: the order engine.DispatchOrder gives for a weighted, backlogged queue
// is the order one slot then starts its jobs in (9,9,0,9 with 9=3,0=1), not strict priority.
func TestDispatchOrderIsDispatch(t *testing.T) {
	t.Parallel()
	w := newWeightsEnv(t, store.QueueCreateParams{PriorityWeights: map[int]int{9: 3, 0: 1}})
	w.insert(12, 9)
	w.insert(12, 0)
	byLevel := map[int][]*queue.Job{}
	for _, prio := range []int{0, 9} {
		res, err := w.h.store.JobPeek(w.h.ctx, store.JobPeekParams{Queue: w.queue, Limit: 8, Priority: &prio})
		require.NoError(t, err)
		byLevel[prio] = res.Jobs
	}
	order := w.engine.DispatchOrder(w.h.ctx, w.queue, byLevel, 8)
	var shown, started []string
	var levels []int
	for _, j := range order {
		shown = append(shown, j.ID)
		levels = append(levels, j.Priority)
	}
	require.Equal(t, []int{9, 9, 0, 9, 9, 9, 0, 9}, levels)
	for _, j := range w.starts(8) {
		started = append(started, j.ID)
	}
	require.Equal(t, shown, started, "the order shown is the order dispatched")
}
