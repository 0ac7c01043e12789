package storetest

import (
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/jq-dev/jq/queue"
	"github.com/jq-dev/jq/store"
)

// resultSuite runs the contract of result retention (seed 001): keep_result false stores only
// the checksum and size; a kept result lives until a consuming fetch takes it or its queue's
// result_retention passes. JobResultsDrop acts on every queue but each test counts only its own, so
// the store may be shared. Subtests run in parallel.
//
// The store writes results with store.DispatchStore's report, takes them with store.OperatorStore's
// consuming fetch and drops them with store.RetentionStore's pass.
func resultSuite(t *testing.T, f Factory) {
	newStore := sharedStore(f)
	t.Run("NotKeptStoresChecksumOnly", func(t *testing.T) { testResultNotKept(t, newStore) })
	t.Run("KeptEmptyResult", func(t *testing.T) { testResultKeptEmpty(t, newStore) })
	t.Run("ConsumeTakesOnce", func(t *testing.T) { testResultConsume(t, newStore) })
	t.Run("DroppedAfterRetention", func(t *testing.T) { testResultRetention(t, newStore) })
	t.Run("DropInvalidLimit", func(t *testing.T) { testResultDropInvalid(t, newStore) })
}

type resBundle struct {
	*dsBundle
	rs interface {
		store.OperatorStore
		store.RetentionStore
	}
}

// setupResults marks the test parallel and returns a bundle whose queue has the given result
// retention (0: the default).
func setupResults(t *testing.T, newStore NewStoreFunc, retention time.Duration) *resBundle {
	t.Helper()
	b := setupDispatchStore(t, newStore)
	b.queue = b.newQueue(store.QueueCreateParams{ResultRetention: retention}).Name
	return &resBundle{dsBundle: b, rs: as[interface {
		store.OperatorStore
		store.RetentionStore
	}](t, b.s)}
}

// withQueue returns a copy of the bundle on a new queue with the given result retention.
func (b *resBundle) withQueue(retention time.Duration) *resBundle {
	b.t.Helper()
	inner := *b.bundle
	inner.queue = b.newQueue(store.QueueCreateParams{ResultRetention: retention}).Name
	return &resBundle{dsBundle: &dsBundle{bundle: &inner, ds: b.ds}, rs: b.rs}
}

// done runs a new job (keep_result as given) to DONE through the report statement with result.
func (b *resBundle) done(keep bool, result []byte) *queue.Job {
	b.t.Helper()
	p := b.job("t")
	p.KeepResult = keep
	j := b.assignOne(uniqueName("w"), b.insertOne(p))
	out := b.report(store.JobReportParams{JobLease: leaseOf(j), Success: true, Result: result})
	b.requireApplied(out[0], queue.StateDone)
	return b.get(j.ID)
}

// drop runs JobResultsDrop until a batch drops nothing of this bundle's queue and returns how many
// it dropped there.
func (b *resBundle) drop() int {
	b.t.Helper()
	total := 0
	for {
		byQueue, err := b.rs.JobResultsDrop(b.ctx, store.MaxResultsDropBatch)
		require.NoError(b.t, err)
		if byQueue[b.queue] == 0 {
			return total
		}
		total += byQueue[b.queue]
	}
}

func testResultNotKept(t *testing.T, newStore NewStoreFunc) {
	b := setupResults(t, newStore, 0)
	result := []byte(`{"big":"never stored"}`)
	j := b.done(false, result)
	require.Nil(t, j.Result, "without keep_result the bytes are not stored")
	require.Equal(t, queue.Checksum(result), j.ResultChecksum, "the checksum is")
	require.EqualValues(t, len(result), j.ResultSize, "and the size")
	require.False(t, j.ResultKept())

	got, taken, err := b.rs.JobConsumeResult(b.ctx, j.ID)
	require.NoError(t, err)
	require.False(t, taken, "nothing to consume")
	require.Nil(t, got.Result)

	// Through the generic transition too.
	p := b.job("t")
	j = b.advance(b.insertOne(p), queue.StateAssigned, queue.StateRunning)
	j = b.move(j, queue.StateDone, store.JobTransitionParams{Reason: "success", Result: result})
	require.Nil(t, j.Result)
	require.Equal(t, queue.Checksum(result), j.ResultChecksum)
	require.EqualValues(t, len(result), j.ResultSize)
}

// An empty result of a keep_result job is a result: found, not "none".
func testResultKeptEmpty(t *testing.T, newStore NewStoreFunc) {
	b := setupResults(t, newStore, 0)
	j := b.done(true, nil)
	require.NotNil(t, j.Result)
	require.Empty(t, j.Result)
	require.True(t, j.ResultKept())
	require.Zero(t, j.ResultSize)
	require.Equal(t, queue.Checksum(nil), j.ResultChecksum)
}

func testResultConsume(t *testing.T, newStore NewStoreFunc) {
	b := setupResults(t, newStore, 0)
	result := []byte(`[1,2,3]`)
	j := b.done(true, result)
	require.Equal(t, result, j.Result)
	require.True(t, j.ResultKept())

	var (
		wg    sync.WaitGroup
		taken atomic.Int64
	)
	for range 6 {
		wg.Go(func() {
			got, ok, err := b.rs.JobConsumeResult(b.ctx, j.ID)
			if !assert.NoError(t, err) || !ok {
				return
			}
			taken.Add(1)
			assert.Equal(t, result, got.Result)
			assert.Equal(t, queue.Checksum(result), got.ResultChecksum)
		})
	}
	wg.Wait()
	require.EqualValues(t, 1, taken.Load(), "exactly one consumer takes the result, intact")

	after := b.get(j.ID)
	require.Nil(t, after.Result, "consumed: the bytes are gone")
	require.False(t, after.ResultKept())
	require.True(t, after.KeepResult, "the job still says what was asked")
	require.Equal(t, queue.Checksum(result), after.ResultChecksum, "the checksum stays")
	require.EqualValues(t, len(result), after.ResultSize)
	require.Equal(t, queue.StateDone, after.State)
}

func testResultRetention(t *testing.T, newStore NewStoreFunc) {
	// A queue whose results expire a millisecond after completion, and one with the default 24 h.
	b := setupResults(t, newStore, time.Millisecond)
	long := b.withQueue(0)
	q, err := long.s.QueueGet(long.ctx, long.queue)
	require.NoError(t, err)
	require.Equal(t, queue.DefaultResultRetention, q.ResultRetention)
	q, err = b.s.QueueGet(b.ctx, b.queue)
	require.NoError(t, err)
	require.Equal(t, time.Millisecond, q.ResultRetention)

	result := []byte(`"kept"`)
	var short []*queue.Job
	for range 3 {
		short = append(short, b.done(true, result))
	}
	kept := long.done(true, result)

	// The database's clock moves past completed_at + 1 ms at once; poll rather than sleep.
	dropped := 0
	require.Eventually(t, func() bool {
		dropped += b.drop()
		return dropped == len(short)
	}, 10*time.Second, 5*time.Millisecond)
	for _, j := range short {
		got := b.get(j.ID)
		require.Nil(t, got.Result, "dropped after the retention")
		require.False(t, got.ResultKept())
		require.Equal(t, queue.StateDone, got.State, "the job is otherwise untouched")
		require.Equal(t, j.UpdatedAt, got.UpdatedAt)
		require.Equal(t, queue.Checksum(result), got.ResultChecksum)
		_, taken, err := b.rs.JobConsumeResult(b.ctx, j.ID)
		require.NoError(t, err)
		require.False(t, taken, "a fetch afterwards finds none")
	}
	require.Zero(t, b.drop(), "nothing left to drop")
	require.Zero(t, long.drop(), "the 24 h queue keeps its result")
	require.Equal(t, result, long.get(kept.ID).Result)
}

func testResultDropInvalid(t *testing.T, newStore NewStoreFunc) {
	b := setupResults(t, newStore, 0)
	for _, limit := range []int{0, -1, store.MaxResultsDropBatch + 1} {
		_, err := b.rs.JobResultsDrop(b.ctx, limit)
		require.ErrorIs(t, err, queue.ErrInvalidArgument, "limit %d", limit)
	}
	_, err := b.s.QueueCreate(b.ctx, store.QueueCreateParams{Name: uniqueName("st"), ResultRetention: -time.Second})
	require.ErrorIs(t, err, queue.ErrInvalidArgument)
	_, err = b.s.QueueCreate(b.ctx, store.QueueCreateParams{Name: uniqueName("st"), ResultRetention: time.Microsecond})
	require.ErrorIs(t, err, queue.ErrInvalidArgument, "below the stored unit")
}
