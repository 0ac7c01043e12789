package storetest

import (
	"sort"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/jq-dev/jq/queue"
	"github.com/jq-dev/jq/store"
)

func runQueueTests(t *testing.T, newStore NewStoreFunc) {
	t.Run("CreateDefaults", func(t *testing.T) {
		b := setup(t, newStore)
		q, err := b.s.QueueGet(b.ctx, b.queue)
		require.NoError(t, err)
		require.Equal(t, b.queue, q.Name)
		require.Equal(t, queue.DefaultMaxRetries, q.MaxRetries)
		require.Zero(t, q.TTL)
		require.Equal(t, queue.DefaultBackoffBase, q.BackoffBase)
		require.Equal(t, queue.DefaultBackoffMax, q.BackoffMax)
		require.Empty(t, q.PriorityWeights)
		require.Zero(t, q.MaxWait, "no aging")
		require.False(t, q.Paused)
		require.False(t, q.CreatedAt.IsZero())
		require.False(t, q.UpdatedAt.IsZero())
	})

	t.Run("CreateCustom", func(t *testing.T) {
		b := setup(t, newStore)
		created := b.newQueue(store.QueueCreateParams{
			MaxRetries:      ptr(0),
			TTL:             90 * time.Second,
			PriorityWeights: map[int]int{9: 6, 5: 3, 0: 1},
			BackoffBase:     500 * time.Millisecond,
			BackoffMax:      10 * time.Second,
			MaxWait:         10 * time.Minute,
		})
		require.Zero(t, created.MaxRetries, "an explicit 0 is not the default")
		require.Equal(t, 90*time.Second, created.TTL)
		require.Equal(t, map[int]int{9: 6, 5: 3, 0: 1}, created.PriorityWeights)
		require.Equal(t, 500*time.Millisecond, created.BackoffBase)
		require.Equal(t, 10*time.Second, created.BackoffMax)
		require.Equal(t, 10*time.Minute, created.MaxWait)
		got, err := b.s.QueueGet(b.ctx, created.Name)
		require.NoError(t, err)
		require.Equal(t, created, got)
	})

	t.Run("CreateInvalid", func(t *testing.T) {
		b := setup(t, newStore)
		for _, p := range []store.QueueCreateParams{
			{Name: ""},
			{Name: "Upper"},
			{Name: "has space"},
			{Name: uniqueName("st"), MaxRetries: ptr(-1)},
			{Name: uniqueName("st"), TTL: -time.Second},
			{Name: uniqueName("st"), PriorityWeights: map[int]int{10: 1}},
			{Name: uniqueName("st"), PriorityWeights: map[int]int{3: 0}},
			{Name: uniqueName("st"), BackoffBase: time.Minute, BackoffMax: time.Second},
			{Name: uniqueName("st"), BackoffBase: -time.Second},
			{Name: uniqueName("st"), MaxWait: -time.Second},
			{Name: uniqueName("st"), MaxWait: time.Microsecond},
		} {
			_, err := b.s.QueueCreate(b.ctx, p)
			require.ErrorIs(t, err, queue.ErrInvalidArgument, "%+v", p)
			if p.Name != "" {
				_, err = b.s.QueueGet(b.ctx, p.Name)
				require.ErrorIs(t, err, queue.ErrQueueNotFound, "nothing created for %+v", p)
			}
		}
	})

	t.Run("CreateExists", func(t *testing.T) {
		b := setup(t, newStore)
		_, err := b.s.QueueCreate(b.ctx, store.QueueCreateParams{Name: b.queue, MaxRetries: ptr(9)})
		require.ErrorIs(t, err, queue.ErrQueueExists)
		q, err := b.s.QueueGet(b.ctx, b.queue)
		require.NoError(t, err)
		require.Equal(t, queue.DefaultMaxRetries, q.MaxRetries, "the existing queue is untouched")
	})

	t.Run("GetNotFound", func(t *testing.T) {
		b := setup(t, newStore)
		_, err := b.s.QueueGet(b.ctx, uniqueName("missing"))
		require.ErrorIs(t, err, queue.ErrQueueNotFound)
	})

	t.Run("Update", func(t *testing.T) {
		b := setup(t, newStore)
		created := b.newQueue(store.QueueCreateParams{TTL: time.Minute, PriorityWeights: map[int]int{9: 3, 0: 1}, MaxWait: time.Hour})
		got, err := b.s.QueueUpdate(b.ctx, store.QueueUpdateParams{Name: created.Name, MaxRetries: ptr(7),
			PriorityWeights: map[int]int{5: 2}, BackoffMax: ptr(time.Minute)})
		require.NoError(t, err)
		require.Equal(t, 7, got.MaxRetries)
		require.Equal(t, map[int]int{5: 2}, got.PriorityWeights)
		require.Equal(t, time.Minute, got.BackoffMax)
		require.Equal(t, time.Minute, got.TTL, "not named: kept")
		require.Equal(t, time.Hour, got.MaxWait, "not named: kept")
		require.Equal(t, created.CreatedAt, got.CreatedAt)
		require.False(t, got.UpdatedAt.Before(created.UpdatedAt))
		read, err := b.s.QueueGet(b.ctx, created.Name)
		require.NoError(t, err)
		require.Equal(t, got, read)

		// Zero removes the TTL and aging; an empty weight map means strict priority.
		got, err = b.s.QueueUpdate(b.ctx, store.QueueUpdateParams{Name: created.Name, TTL: ptr(time.Duration(0)),
			MaxWait: ptr(time.Duration(0)), PriorityWeights: map[int]int{}})
		require.NoError(t, err)
		require.Zero(t, got.TTL)
		require.Zero(t, got.MaxWait)
		require.Empty(t, got.PriorityWeights)
		require.Equal(t, 7, got.MaxRetries)
	})

	t.Run("UpdateInvalid", func(t *testing.T) {
		b := setup(t, newStore)
		created := b.newQueue(store.QueueCreateParams{BackoffBase: time.Second, BackoffMax: time.Minute})
		for _, p := range []store.QueueUpdateParams{
			{MaxRetries: ptr(-1)},
			{MaxRetries: ptr(store.MaxJobRetries + 1)},
			{TTL: ptr(-time.Second)},
			{PriorityWeights: map[int]int{10: 1}},
			{PriorityWeights: map[int]int{3: 0}},
			{BackoffBase: ptr(2 * time.Minute)}, // above the kept backoff_max
			{BackoffMax: ptr(time.Millisecond)}, // below the kept backoff_base
			{MaxWait: ptr(time.Microsecond)},
			{ResultRetention: ptr(time.Microsecond)},
		} {
			p.Name = created.Name
			_, err := b.s.QueueUpdate(b.ctx, p)
			require.ErrorIs(t, err, queue.ErrInvalidArgument, "%+v", p)
		}
		got, err := b.s.QueueGet(b.ctx, created.Name)
		require.NoError(t, err)
		require.Equal(t, created, got, "nothing changed")
		_, err = b.s.QueueUpdate(b.ctx, store.QueueUpdateParams{Name: uniqueName("st"), MaxRetries: ptr(1)})
		require.ErrorIs(t, err, queue.ErrQueueNotFound)
	})

	t.Run("List", func(t *testing.T) {
		b := setup(t, newStore)
		other := b.newQueue(store.QueueCreateParams{})
		qs, err := b.s.QueueList(b.ctx)
		require.NoError(t, err)
		names := make([]string, len(qs))
		for i, q := range qs {
			names[i] = q.Name
		}
		require.Contains(t, names, b.queue)
		require.Contains(t, names, other.Name)
		require.True(t, sort.StringsAreSorted(names), "ordered by name")
	})

	t.Run("Ensure", func(t *testing.T) {
		b := setup(t, newStore)
		name := uniqueName("st")
		q, created, err := b.s.QueueEnsure(b.ctx, store.QueueCreateParams{Name: name, MaxRetries: ptr(5)})
		require.NoError(t, err)
		require.True(t, created)
		require.Equal(t, 5, q.MaxRetries)

		q2, created, err := b.s.QueueEnsure(b.ctx, store.QueueCreateParams{Name: name, MaxRetries: ptr(1)})
		require.NoError(t, err)
		require.False(t, created)
		require.Equal(t, q, q2, "an existing queue is returned unchanged")

		_, _, err = b.s.QueueEnsure(b.ctx, store.QueueCreateParams{Name: "Bad Name"})
		require.ErrorIs(t, err, queue.ErrInvalidArgument)
	})

	t.Run("EnsureConcurrent", func(t *testing.T) {
		b := setup(t, newStore)
		name := uniqueName("st")
		const callers = 10
		var (
			wg      sync.WaitGroup
			mu      sync.Mutex
			created int
			errs    []error
		)
		for range callers {
			wg.Go(func() {
				_, c, err := b.s.QueueEnsure(b.ctx, store.QueueCreateParams{Name: name})
				mu.Lock()
				defer mu.Unlock()
				if c {
					created++
				}
				if err != nil {
					errs = append(errs, err)
				}
			})
		}
		wg.Wait()
		require.Empty(t, errs)
		require.Equal(t, 1, created, "exactly one caller creates the queue")
	})

	t.Run("SetPaused", func(t *testing.T) {
		b := setup(t, newStore)
		q, err := b.s.QueueSetPaused(b.ctx, store.QueueSetPausedParams{Name: b.queue, Paused: true})
		require.NoError(t, err)
		require.True(t, q.Paused)
		got, err := b.s.QueueGet(b.ctx, b.queue)
		require.NoError(t, err)
		require.True(t, got.Paused)

		// A paused queue still accepts jobs.
		b.insertOne(b.job("t"))

		q, err = b.s.QueueSetPaused(b.ctx, store.QueueSetPausedParams{Name: b.queue, Paused: false})
		require.NoError(t, err)
		require.False(t, q.Paused)

		_, err = b.s.QueueSetPaused(b.ctx, store.QueueSetPausedParams{Name: uniqueName("missing"), Paused: true})
		require.ErrorIs(t, err, queue.ErrQueueNotFound)
	})

	t.Run("DeleteEmpty", func(t *testing.T) {
		b := setup(t, newStore)
		n, err := b.s.QueueDelete(b.ctx, store.QueueDeleteParams{Name: b.queue})
		require.NoError(t, err)
		require.Zero(t, n)
		_, err = b.s.QueueGet(b.ctx, b.queue)
		require.ErrorIs(t, err, queue.ErrQueueNotFound)

		_, err = b.s.QueueDelete(b.ctx, store.QueueDeleteParams{Name: b.queue})
		require.ErrorIs(t, err, queue.ErrQueueNotFound)
		_, err = b.s.QueueDelete(b.ctx, store.QueueDeleteParams{Name: b.queue, Force: true})
		require.ErrorIs(t, err, queue.ErrQueueNotFound)
	})

	t.Run("DeleteNotEmpty", func(t *testing.T) {
		b := setup(t, newStore)
		// Terminal jobs count too: a queue with history is not empty.
		done := b.advance(b.insertOne(b.job("t")), queue.StateDeadLettered)
		_, err := b.s.QueueDelete(b.ctx, store.QueueDeleteParams{Name: b.queue})
		require.ErrorIs(t, err, queue.ErrQueueNotEmpty)

		pending := b.insertOne(b.job("t"))
		_, err = b.s.QueueDelete(b.ctx, store.QueueDeleteParams{Name: b.queue})
		require.ErrorIs(t, err, queue.ErrQueueNotEmpty)
		b.get(pending.ID)
		b.get(done.ID)

		n, err := b.s.QueueDelete(b.ctx, store.QueueDeleteParams{Name: b.queue, Force: true})
		require.NoError(t, err)
		require.EqualValues(t, 2, n)
		_, err = b.s.QueueGet(b.ctx, b.queue)
		require.ErrorIs(t, err, queue.ErrQueueNotFound)
		for _, id := range []string{pending.ID, done.ID} {
			_, err = b.s.JobGet(b.ctx, id)
			require.ErrorIs(t, err, queue.ErrJobNotFound)
			_, err = b.s.JobEvents(b.ctx, id)
			require.ErrorIs(t, err, queue.ErrJobNotFound)
		}
		// Submitting to the deleted queue fails.
		_, err = b.s.JobInsertMany(b.ctx, []store.JobInsertParams{b.job("t")})
		require.ErrorIs(t, err, queue.ErrQueueNotFound)
	})

	t.Run("Stats", func(t *testing.T) {
		b := setup(t, newStore)
		st, err := b.s.QueueStats(b.ctx, b.queue)
		require.NoError(t, err)
		window := st.Window
		require.Positive(t, window, "the recent figures cover a window")
		require.LessOrEqual(t, window, queue.RecentWindow)
		require.Equal(t, &queue.QueueStats{Queue: b.queue, Window: window}, st, "an empty queue")

		// A delayed job is PENDING but not due: it counts, and it is not the oldest due job.
		delayed := b.job("a")
		delayed.RunAt = time.Now().Add(time.Hour)
		b.insertOne(delayed)
		st, err = b.s.QueueStats(b.ctx, b.queue)
		require.NoError(t, err)
		require.EqualValues(t, 1, st.Pending)
		require.Zero(t, st.OldestPendingAge, "no PENDING job is due")

		res := b.insert(b.job("a"), b.job("a"), b.job("a"), b.job("a"), b.job("a"), b.job("a"))
		// One job in each state; res[0] stays PENDING.
		b.advance(res[1].Job, queue.StateAssigned)
		b.advance(res[2].Job, queue.StateAssigned, queue.StateRunning)
		b.advance(res[3].Job, queue.StateAssigned, queue.StateRunning, queue.StateDone)
		b.advance(res[4].Job, queue.StateAssigned, queue.StateFailed)
		b.advance(res[5].Job, queue.StateDeadLettered) // a cancel: no attempt finished

		st, err = b.s.QueueStats(b.ctx, b.queue)
		require.NoError(t, err)
		require.Equal(t, b.queue, st.Queue)
		require.EqualValues(t, 2, st.Pending, "the delayed job and res[0]")
		for _, s := range queue.States() {
			if s != queue.StatePending {
				require.EqualValues(t, 1, st.Count(s), s)
			}
		}
		require.False(t, st.DoneEstimated, "one DONE job is counted, not estimated")
		require.EqualValues(t, 2, st.TotalProcessed, "DONE + DEAD_LETTERED")
		// Two attempts finished (the success and the failure), one failed; the cancel is none.
		require.EqualValues(t, 2, st.Finished)
		require.EqualValues(t, 1, st.FailedAttempts)
		require.EqualValues(t, 2, st.FinishedLastMinute)
		require.EqualValues(t, 1, st.FailedLastMinute)
		require.InDelta(t, 0.5, st.ErrorRate, 1e-9)
		require.Positive(t, st.Window)
		require.Positive(t, st.Throughput())
		require.GreaterOrEqual(t, st.AvgProcessingTime, time.Duration(0))
		require.Less(t, st.AvgProcessingTime, time.Minute)
		require.Positive(t, st.OldestPendingAge, "res[0] is due")
		require.Less(t, st.OldestPendingAge, time.Minute)

		_, err = b.s.QueueStats(b.ctx, uniqueName("missing"))
		require.ErrorIs(t, err, queue.ErrQueueNotFound)
	})
}
