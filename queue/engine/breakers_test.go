package engine_test

import (
	"context"
	"testing"
	"time"

	"connectrpc.com/connect"
	"github.com/stretchr/testify/require"

	jqv1 "github.com/jq-dev/jq/api/gen/jq/v1"
	"github.com/jq-dev/jq/queue"
	"github.com/jq-dev/jq/store"
)

// A worker's circuit breakers, reported by its heartbeat, cap what its session takes: nothing
// of an open queue (its jobs stay PENDING) while the other queue is served, one job of a
// half-open queue, everything once closed. ListWorkers shows the breakers.
func TestSessionHonoursBreakers(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	r := h.startReplica()
	cl := h.client(r.addr)
	sfx := h.prefix[len(h.prefix)-8:]
	paused, served := "brk-a-"+sfx, "brk-b-"+sfx
	for _, q := range []string{paused, served} {
		_, err := h.store.QueueCreate(h.ctx, store.QueueCreateParams{Name: q})
		require.NoError(t, err)
	}
	id := "brk-" + sfx
	_, err := cl.Workers.RegisterWorker(h.ctx, connect.NewRequest(&jqv1.RegisterWorkerRequest{
		WorkerId: id, Concurrency: 10, Queues: []string{paused, served},
	}))
	require.NoError(t, err)
	heartbeat := func(bs ...*jqv1.QueueBreaker) {
		t.Helper()
		_, err := cl.Workers.Heartbeat(h.ctx, connect.NewRequest(&jqv1.HeartbeatRequest{WorkerId: id, Breakers: bs}))
		require.NoError(t, err)
	}
	// Open before the stream: the session takes the breakers from the worker's row.
	heartbeat(&jqv1.QueueBreaker{Queue: paused, State: jqv1.CircuitBreakerState_CIRCUIT_BREAKER_STATE_OPEN, FailureRate: 0.6, Samples: 20})
	w, err := h.store.WorkerGet(h.ctx, id)
	require.NoError(t, err)
	sess := r.engine.OpenSession(w, 0)
	defer sess.Close()

	submit := func(q string, n int) []string {
		ids := make([]string, n)
		for i := range ids {
			j, err := r.engine.Submit(h.ctx, store.JobInsertParams{Queue: q, Type: "noop"})
			require.NoError(t, err)
			ids[i] = j.Job.ID
		}
		return ids
	}
	pausedIDs := submit(paused, 3)
	servedIDs := submit(served, 4)

	var got []*queue.Job
	for len(got) < len(servedIDs) {
		jobs, err := sess.Next(h.ctx)
		require.NoError(t, err)
		got = append(got, jobs...)
	}
	for _, j := range got {
		require.Equal(t, served, j.Queue, "nothing of the open queue")
	}
	// Nothing more comes while the breaker is open, though 6 slots are free and 3 jobs wait.
	nothing := func() {
		t.Helper()
		ctx, cancel := context.WithTimeout(h.ctx, 500*time.Millisecond)
		defer cancel()
		jobs, err := sess.Next(ctx)
		require.ErrorIs(t, err, context.DeadlineExceeded, "got %d jobs", len(jobs))
	}
	nothing()
	for _, jid := range pausedIDs {
		j, err := h.store.JobGet(h.ctx, jid)
		require.NoError(t, err)
		require.Equal(t, queue.StatePending, j.State, "not failed, not assigned")
	}
	ws, err := cl.Workers.ListWorkers(h.ctx, connect.NewRequest(&jqv1.ListWorkersRequest{}))
	require.NoError(t, err)
	var listed *jqv1.Worker
	for _, x := range ws.Msg.GetWorkers() {
		if x.GetId() == id {
			listed = x
		}
	}
	require.NotNil(t, listed)
	require.Len(t, listed.GetBreakers(), 1)
	require.Equal(t, paused, listed.GetBreakers()[0].GetQueue())
	require.Equal(t, jqv1.CircuitBreakerState_CIRCUIT_BREAKER_STATE_OPEN, listed.GetBreakers()[0].GetState())

	// Half-open (applied to the live session by the heartbeat): one probe job, no more.
	heartbeat(&jqv1.QueueBreaker{Queue: paused, State: jqv1.CircuitBreakerState_CIRCUIT_BREAKER_STATE_HALF_OPEN})
	probe, err := sess.Next(h.ctx)
	require.NoError(t, err)
	require.Len(t, probe, 1)
	require.Equal(t, paused, probe[0].Queue)
	nothing()

	// Closed (an empty list, as an older worker sends): the rest flow.
	heartbeat()
	var rest []*queue.Job
	for len(rest) < 2 {
		jobs, err := sess.Next(h.ctx)
		require.NoError(t, err)
		rest = append(rest, jobs...)
	}
	for _, j := range rest {
		require.Equal(t, paused, j.Queue)
	}
}
