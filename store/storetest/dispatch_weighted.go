package storetest

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/jq-dev/jq/queue"
	"github.com/jq-dev/jq/store"
)

// runJobClaimWeightedTests is the contract of the weighted claim (JobClaimParams.Levels and MaxWait):
// the store executes the quotas the engine's queue.LevelScheduler planned.
func runJobClaimWeightedTests(t *testing.T, newStore NewStoreFunc) {
	// insertLevels inserts n jobs at each priority, one batch per job so that created_at grows, the
	// levels interleaved; it returns the due ids of each level in FIFO order (JobDue's order).
	insertLevels := func(b *dsBundle, n int, prios ...int) map[int][]string {
		for range n {
			for _, prio := range prios {
				b.insertOne(b.jobAt(prio))
			}
		}
		byLevel := map[int][]string{}
		for _, d := range b.due(store.MaxDispatchBatch) {
			byLevel[d.Priority] = append(byLevel[d.Priority], d.ID)
		}
		return byLevel
	}
	claim := func(b *dsBundle, limit int, maxWait time.Duration, levels ...queue.LevelQuota) []*queue.Job {
		b.t.Helper()
		jobs, err := b.ds.JobClaim(b.ctx, store.JobClaimParams{
			Queue: b.queue, WorkerID: "w", Limit: limit, MaxWait: maxWait, Levels: levels,
		})
		require.NoError(b.t, err)
		for _, j := range jobs {
			require.Equal(b.t, queue.StateAssigned, j.State)
			require.Equal(b.t, "w", j.WorkerID)
		}
		return jobs
	}

	// Each level takes its quota, FIFO within the level, in the order the levels are given.
	t.Run("QuotasInOrder", func(t *testing.T) {
		b := setupDispatchStore(t, newStore)
		lv := insertLevels(b, 4, 0, 9, 5)
		got := claim(b, 3, 0, queue.LevelQuota{Priority: 0, Max: 2}, queue.LevelQuota{Priority: 9, Max: 1})
		require.Equal(t, []string{lv[0][0], lv[0][1], lv[9][0]}, ids(got))
		got = claim(b, 4, 0, queue.LevelQuota{Priority: 5, Max: 1}, queue.LevelQuota{Priority: 0, Max: 3})
		require.Equal(t, []string{lv[5][0], lv[0][2], lv[0][3]}, ids(got)[:3])
		// Level 0 ran out after two: the fourth goes to the rest, in dispatch order (priority 9 first).
		require.Equal(t, lv[9][1], ids(got)[3])
		evs := b.events(got[0].ID)
		b.requireEvent(evs[len(evs)-1], 2, queue.StatePending, queue.StateAssigned, queue.ReasonAssigned, "w", 1)
	})

	// A level with fewer due jobs than its quota passes the rest on to the following levels; what
	// every level leaves goes to any due job in dispatch order, levels without a quota included.
	t.Run("WorkConserving", func(t *testing.T) {
		b := setupDispatchStore(t, newStore)
		lv := insertLevels(b, 5, 5, 3)
		lv0 := insertLevels(b, 1, 0)[0]
		got := claim(b, 4, 0, queue.LevelQuota{Priority: 0, Max: 3}, queue.LevelQuota{Priority: 5, Max: 1})
		require.Equal(t, []string{lv0[0], lv[5][0], lv[5][1], lv[5][2]}, ids(got))
		// Level 9 has none: all four go to the rest, in dispatch order (5, then 3).
		got = claim(b, 4, 0, queue.LevelQuota{Priority: 9, Max: 4})
		require.Equal(t, []string{lv[5][3], lv[5][4], lv[3][0], lv[3][1]}, ids(got))
		// A quota of 0 still takes what the levels before it left.
		got = claim(b, 2, 0, queue.LevelQuota{Priority: 9, Max: 2}, queue.LevelQuota{Priority: 3, Max: 0})
		require.Equal(t, []string{lv[3][2], lv[3][3]}, ids(got))
		require.Len(t, claim(b, 10, 0, queue.LevelQuota{Priority: 9, Max: 10}), 1)
		require.Empty(t, claim(b, 10, 0, queue.LevelQuota{Priority: 3, Max: 10}))
	})

	// Jobs due for at least MaxWait come first, oldest first, whatever their priority and quotas. Time
	// must pass for jobs to age: the fresh jobs are inserted after it.
	const maxWait = time.Second
	t.Run("AgingFirst", func(t *testing.T) {
		b := setupDispatchStore(t, newStore)
		oldLow := b.insertOne(b.jobAt(0))
		oldHigh := b.insertOne(b.jobAt(9))
		time.Sleep(maxWait + 100*time.Millisecond)
		lv := insertLevels(b, 3, 9)
		got := claim(b, 3, maxWait, queue.LevelQuota{Priority: 9, Max: 3}, queue.LevelQuota{Priority: 0, Max: 0})
		require.Equal(t, []string{oldLow.ID, oldHigh.ID, lv[9][1]}, ids(got),
			"the aged jobs oldest first, then level 9's quota")
	})
	// MaxWait without quotas: aged first, then dispatch order.
	t.Run("AgingWithoutLevels", func(t *testing.T) {
		b := setupDispatchStore(t, newStore)
		old := b.insertOne(b.jobAt(0))
		time.Sleep(maxWait + 100*time.Millisecond)
		fresh := b.insertOne(b.jobAt(9))
		require.Equal(t, []string{old.ID, fresh.ID}, ids(claim(b, 2, maxWait)))
	})
	t.Run("NotAgedYet", func(t *testing.T) {
		b := setupDispatchStore(t, newStore)
		low := b.insertOne(b.jobAt(0))
		fresh := b.insertOne(b.jobAt(9))
		require.Equal(t, []string{fresh.ID, low.ID}, ids(claim(b, 2, time.Hour)))
	})

	// A typed worker's weighted claim takes only its types, in every step.
	t.Run("Types", func(t *testing.T) {
		b := setupDispatchStore(t, newStore)
		var want []string
		for _, prio := range []int{9, 0, 9, 0} {
			p := b.jobAt(prio)
			b.insertOne(p)
			p.Type = "a"
			want = append(want, b.insertOne(p).ID)
		}
		jobs, err := b.ds.JobClaim(b.ctx, store.JobClaimParams{
			Queue: b.queue, WorkerID: "w", Limit: 10, Types: []string{"a"}, MaxWait: time.Hour,
			Levels: []queue.LevelQuota{{Priority: 0, Max: 1}, {Priority: 9, Max: 1}},
		})
		require.NoError(t, err)
		require.Equal(t, []string{want[1], want[0], want[2], want[3]}, ids(jobs),
			"level 0's first, level 9's first, then the rest in dispatch order")
	})

	t.Run("Invalid", func(t *testing.T) {
		b := setupDispatchStore(t, newStore)
		for _, p := range []store.JobClaimParams{
			{Levels: []queue.LevelQuota{{Priority: 9, Max: 1}, {Priority: 9, Max: 1}}},
			{Levels: []queue.LevelQuota{{Priority: 10, Max: 1}}},
			{Levels: []queue.LevelQuota{{Priority: 0, Max: -1}}},
			{Levels: []queue.LevelQuota{{Priority: 0, Max: 3}}},
			{MaxWait: -time.Second},
		} {
			p.Queue, p.WorkerID, p.Limit = b.queue, "w", 2
			_, err := b.ds.JobClaim(b.ctx, p)
			require.ErrorIs(t, err, queue.ErrInvalidArgument, "%+v", p)
		}
	})
}

// jobAt returns insert params of a job at priority prio.
func (b *dsBundle) jobAt(prio int) store.JobInsertParams {
	p := b.job("t")
	p.Priority = prio
	return p
}
