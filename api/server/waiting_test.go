package apiserver_test

import (
	"testing"

	"connectrpc.com/connect"
	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	jqv1 "github.com/jq-dev/jq/api/gen/jq/v1"
	"github.com/jq-dev/jq/store"
)

// TestWaitingForAWorkerOfTheType: a worker registers its job types and
// ListWorkers shows them; GetJob of a PENDING job and GetStatus's queue say why it waits — no
// worker serves the queue, then none of its workers handles the type — until a worker that does
// (here one of every type) registers.
func TestWaitingForAWorkerOfTheType(t *testing.T) {
	b := setup(t)
	job := b.insert(store.JobInsertParams{Queue: b.queue, Type: "greet"})
	b.insert(store.JobInsertParams{Queue: b.queue, Type: "report"})
	waiting := func() (ofJob, ofQueue string) {
		t.Helper()
		got, err := b.cl.Jobs.GetJob(b.ctx, connect.NewRequest(&jqv1.GetJobRequest{JobId: job.ID}))
		require.NoError(t, err)
		status, err := b.cl.Admin.GetStatus(b.ctx, connect.NewRequest(&jqv1.GetStatusRequest{}))
		require.NoError(t, err)
		for _, q := range status.Msg.GetQueues() {
			if q.GetQueue() == b.queue {
				return got.Msg.GetJob().GetWaiting(), q.GetWaiting()
			}
		}
		t.Fatalf("GetStatus does not list queue %s", b.queue)
		return "", ""
	}
	register := func(types ...string) (*jqv1.Worker, error) {
		res, err := b.cl.Workers.RegisterWorker(b.ctx, connect.NewRequest(&jqv1.RegisterWorkerRequest{
			WorkerId: "w-" + uuid.NewString()[:12], Concurrency: 1, Queues: []string{b.queue}, Types: types,
		}))
		if err != nil {
			return nil, err
		}
		return res.Msg.GetWorker(), nil
	}

	j, q := waiting()
	require.Equal(t, "no connected worker serves queue "+b.queue, j)
	require.Equal(t, j, q)

	w, err := register("noop", "greeting")
	require.NoError(t, err)
	require.Equal(t, []string{"greeting", "noop"}, w.GetTypes())
	j, q = waiting()
	require.Equal(t, "no connected worker handles type greet", j)
	require.Equal(t, "no connected worker handles types greet, report", q, "the queue's due types nobody handles")

	_, err = register("a b")
	requireCode(t, connect.CodeInvalidArgument, err, "a malformed type")
	_, err = register("greet", "greet")
	requireCode(t, connect.CodeInvalidArgument, err, "a repeated type")

	_, err = register() // every type
	require.NoError(t, err)
	j, q = waiting()
	require.Empty(t, j)
	require.Empty(t, q)
}
