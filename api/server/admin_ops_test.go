package apiserver_test

import (
	"testing"
	"time"

	"connectrpc.com/connect"
	"github.com/stretchr/testify/require"
	"go.uber.org/zap/zaptest"

	jqv1 "github.com/jq-dev/jq/api/gen/jq/v1"
	"github.com/jq-dev/jq/api/server"
	"github.com/jq-dev/jq/internal/testenv"
	"github.com/jq-dev/jq/queue"
	"github.com/jq-dev/jq/store"
	"github.com/jq-dev/jq/store/redis"
)

// setupAdmin serves the API over the package store with a Redis dispatcher
// of the test's own for GetStats.
func setupAdmin(t *testing.T) (*bundle, *redisstore.Dispatcher) {
	t.Helper()
	t.Parallel()
	b := newBundle(t, testStore)
	rdb, prefix := testenv.NewRedis(t)
	disp, err := redisstore.New(b.ctx, redisstore.Config{Client: rdb, KeyPrefix: prefix})
	require.NoError(t, err)
	opts := withEngine(t, apiserver.Options{
		Store: testStore, Counter: disp, Log: zaptest.NewLogger(t),
		Workers: apiserver.WorkerTiming{HeartbeatInterval: time.Second, HeartbeatTimeout: 10 * time.Second},
	})
	b.eng = opts.Engine
	b.cl = serve(t, opts)
	return b, disp
}

func (b *bundle) dead() *queue.Job {
	b.t.Helper()
	j, err := b.eng.JobCancel(b.ctx, b.insert(store.JobInsertParams{}).ID)
	require.NoError(b.t, err)
	require.Equal(b.t, queue.StateDeadLettered, j.State)
	return j
}

func TestGetStats(t *testing.T) {
	b, disp := setupAdmin(t)
	for range 3 {
		b.insert(store.JobInsertParams{})
	}
	// One of them is claimed, as a session does: assigned in Postgres, recorded in Redis.
	claimed, err := testStore.JobClaim(b.ctx, store.JobClaimParams{Queue: b.queue, WorkerID: "w-stats", Limit: 1})
	require.NoError(t, err)
	require.Len(t, claimed, 1)
	require.NoError(t, disp.InflightAdd(b.ctx, store.InflightAddParams{Queue: b.queue, WorkerID: "w-stats", IDs: []string{claimed[0].ID}, LockTTL: time.Minute}))
	b.dead()
	b.register(1)

	resp, err := b.cl.Admin.GetStats(b.ctx, connect.NewRequest(&jqv1.GetStatsRequest{}))
	require.NoError(t, err)
	var mine *jqv1.QueueRuntimeStats
	var inflight int64
	for i, q := range resp.Msg.GetQueues() {
		if i > 0 {
			require.Less(t, resp.Msg.GetQueues()[i-1].GetQueue(), q.GetQueue(), "ordered by name")
		}
		if q.GetQueue() == b.queue {
			mine = q
		}
		inflight += q.GetInflight()
	}
	require.NotNil(t, mine)
	require.EqualValues(t, 2, mine.GetReady())
	require.EqualValues(t, 1, mine.GetInflight())
	require.EqualValues(t, 1, mine.GetDeadLettered())
	require.Equal(t, inflight, resp.Msg.GetInflight())
	require.GreaterOrEqual(t, resp.Msg.GetLiveHeartbeats(), int64(1))

	// Without a dispatcher the answer is UNAVAILABLE, not a guess.
	cl := serve(t, apiserver.Options{Store: testStore})
	_, err = cl.Admin.GetStats(b.ctx, connect.NewRequest(&jqv1.GetStatsRequest{}))
	requireCode(t, connect.CodeUnavailable, err)
}

func TestPeekQueue(t *testing.T) {
	b, _ := setupAdmin(t)
	low := b.insert(store.JobInsertParams{Priority: 1})
	high := b.insert(store.JobInsertParams{Priority: 8})
	d1, d2 := b.dead(), b.dead()

	peek := func(req *jqv1.PeekQueueRequest) []string {
		t.Helper()
		resp, err := b.cl.Admin.PeekQueue(b.ctx, connect.NewRequest(req))
		require.NoError(t, err)
		var ids []string
		for _, j := range resp.Msg.GetJobs() {
			require.Nil(t, j.GetResult())
			ids = append(ids, j.GetId())
		}
		return ids
	}
	require.Equal(t, []string{high.ID, low.ID}, peek(&jqv1.PeekQueueRequest{Queue: b.queue}))
	require.Equal(t, []string{high.ID}, peek(&jqv1.PeekQueueRequest{Queue: b.queue, Limit: 1}))
	require.Equal(t, []string{d2.ID, d1.ID}, peek(&jqv1.PeekQueueRequest{Queue: b.queue, Dead: true}))

	for _, req := range []*jqv1.PeekQueueRequest{{Queue: "Bad Name"}, {Queue: b.queue, Limit: -1}, {Queue: b.queue, Limit: 1001}} {
		_, err := b.cl.Admin.PeekQueue(b.ctx, connect.NewRequest(req))
		requireCode(t, connect.CodeInvalidArgument, err, "%v", req)
	}
	_, err := b.cl.Admin.PeekQueue(b.ctx, connect.NewRequest(&jqv1.PeekQueueRequest{Queue: "no-such-queue-peek"}))
	requireCode(t, connect.CodeNotFound, err)
	require.Contains(t, err.Error(), "no-such-queue-peek")
}

// A weighted queue's peek shows the order its dispatch takes (9,9,0,9 with 9=3,0=1 both
// backlogged), not strict priority.
func TestPeekQueueWeighted(t *testing.T) {
	b, _ := setupAdmin(t)
	_, err := b.store.QueueUpdate(b.ctx, store.QueueUpdateParams{Name: b.queue, PriorityWeights: map[int]int{9: 3, 0: 1}})
	require.NoError(t, err)
	for range 4 {
		b.insert(store.JobInsertParams{Priority: 9})
		b.insert(store.JobInsertParams{Priority: 0})
	}
	resp, err := b.cl.Admin.PeekQueue(b.ctx, connect.NewRequest(&jqv1.PeekQueueRequest{Queue: b.queue, Limit: 4}))
	require.NoError(t, err)
	var levels []int32
	for _, j := range resp.Msg.GetJobs() {
		levels = append(levels, j.GetPriority())
	}
	require.Equal(t, []int32{9, 9, 0, 9}, levels)
}

func TestPurgeDeadLetters(t *testing.T) {
	b, _ := setupAdmin(t)
	d1, d2 := b.dead(), b.dead()
	pending := b.insert(store.JobInsertParams{})

	_, err := b.cl.Admin.PurgeDeadLetters(b.ctx, connect.NewRequest(&jqv1.PurgeDeadLettersRequest{Queue: b.queue}))
	requireCode(t, connect.CodeFailedPrecondition, err, "refused without confirm")
	_, err = b.store.JobGet(b.ctx, d1.ID)
	require.NoError(t, err, "nothing was deleted")

	resp, err := b.cl.Admin.PurgeDeadLetters(b.ctx, connect.NewRequest(&jqv1.PurgeDeadLettersRequest{Queue: b.queue, Confirm: true}))
	require.NoError(t, err)
	require.EqualValues(t, 2, resp.Msg.GetDeleted())
	for _, id := range []string{d1.ID, d2.ID} {
		_, err := b.cl.Jobs.GetJob(b.ctx, connect.NewRequest(&jqv1.GetJobRequest{JobId: id}))
		requireCode(t, connect.CodeNotFound, err)
	}
	_, err = b.store.JobGet(b.ctx, pending.ID)
	require.NoError(t, err)

	_, err = b.cl.Admin.PurgeDeadLetters(b.ctx, connect.NewRequest(&jqv1.PurgeDeadLettersRequest{Queue: "Bad Name", Confirm: true}))
	requireCode(t, connect.CodeInvalidArgument, err)
	_, err = b.cl.Admin.PurgeDeadLetters(b.ctx, connect.NewRequest(&jqv1.PurgeDeadLettersRequest{Queue: "no-such-queue-purge", Confirm: true}))
	requireCode(t, connect.CodeNotFound, err)
}
