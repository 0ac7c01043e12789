package storetest

import (
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/jq-dev/jq/internal/testenv"
	"github.com/jq-dev/jq/queue"
	"github.com/jq-dev/jq/store"
)

func runWorkerTests(t *testing.T, newStore NewStoreFunc) {
	t.Run("Register", func(t *testing.T) {
		b := setup(t, newStore)
		id := uniqueName("w")
		w, err := b.s.WorkerRegister(b.ctx, store.WorkerRegisterParams{
			ID: id, Hostname: "host-1", Concurrency: 4, Queues: []string{b.queue, "default"}, Version: "1.2.3",
		})
		require.NoError(t, err)
		require.Equal(t, id, w.ID)
		require.Equal(t, "host-1", w.Hostname)
		require.Equal(t, queue.WorkerOnline, w.Status)
		require.Equal(t, 4, w.Concurrency)
		require.Equal(t, []string{b.queue, "default"}, w.Queues)
		require.Equal(t, "1.2.3", w.Version)
		require.Zero(t, w.RunningJobs)
		require.False(t, w.StartedAt.IsZero())
		require.False(t, w.LastHeartbeatAt.IsZero())

		got, err := b.s.WorkerGet(b.ctx, id)
		require.NoError(t, err)
		require.Equal(t, w, got)
	})

	// The types a worker handles are kept sorted and replaced by each registration; none: every type.
	t.Run("Types", func(t *testing.T) {
		b := setup(t, newStore)
		id := uniqueName("w")
		reg := func(types ...string) *queue.Worker {
			w, err := b.s.WorkerRegister(b.ctx, store.WorkerRegisterParams{ID: id, Concurrency: 1, Queues: []string{b.queue}, Types: types})
			require.NoError(t, err)
			got, err := b.s.WorkerGet(b.ctx, id)
			require.NoError(t, err)
			require.Equal(t, w.Types, got.Types)
			return w
		}
		w := reg()
		require.Empty(t, w.Types)
		require.True(t, w.Handles(b.queue, "anything"))
		w = reg("greet", "email")
		require.Equal(t, []string{"email", "greet"}, w.Types)
		require.True(t, w.Handles(b.queue, "greet"))
		require.False(t, w.Handles(b.queue, "noop"))
		require.False(t, w.Handles("other", "greet"))
		require.Empty(t, reg().Types, "registering again without types takes every type again")
		for _, bad := range [][]string{{""}, {"a b"}, {"a", "a"}, make([]string, store.MaxWorkerTypes+1)} {
			_, err := b.s.WorkerRegister(b.ctx, store.WorkerRegisterParams{ID: id, Concurrency: 1, Queues: []string{b.queue}, Types: bad})
			require.ErrorIs(t, err, queue.ErrInvalidArgument, "%q", bad)
		}
	})

	t.Run("Owner", func(t *testing.T) {
		b := setup(t, newStore)
		id := uniqueName("w")
		reg := func(principal string) (*queue.Worker, error) {
			return b.s.WorkerRegister(b.ctx, store.WorkerRegisterParams{ID: id, Concurrency: 1, Queues: []string{b.queue}, Principal: principal})
		}
		// Registered with authentication off: no owner; the first principal takes it.
		w, err := reg("")
		require.NoError(t, err)
		require.Empty(t, w.Principal)
		w, err = reg("token:a")
		require.NoError(t, err)
		require.Equal(t, "token:a", w.Principal)
		// Another principal cannot take it over, and changes nothing.
		require.NoError(t, b.s.WorkerDeregister(b.ctx, id))
		_, err = reg("token:b")
		require.ErrorIs(t, err, queue.ErrPermissionDenied)
		got, err := b.s.WorkerGet(b.ctx, id)
		require.NoError(t, err)
		require.Equal(t, queue.WorkerOffline, got.Status)
		require.Equal(t, "token:a", got.Principal)
		// The owner registers again; so does a caller without a principal, keeping the owner.
		_, err = reg("token:a")
		require.NoError(t, err)
		// An admin may register it; the owner stays.
		w, err = b.s.WorkerRegister(b.ctx, store.WorkerRegisterParams{ID: id, Concurrency: 1, Queues: []string{b.queue}, Principal: "token:admin", AnyOwner: true})
		require.NoError(t, err)
		require.Equal(t, "token:a", w.Principal)
		w, err = reg("")
		require.NoError(t, err)
		require.Equal(t, "token:a", w.Principal)
	})

	t.Run("Counts", func(t *testing.T) {
		b := setup(t, newStore)
		owner := uniqueName("p")
		before, err := b.s.WorkerCounts(b.ctx, owner, "")
		require.NoError(t, err)
		require.Zero(t, before.LiveOfPrincipal)
		ids := []string{uniqueName("w"), uniqueName("w"), uniqueName("w")}
		for _, id := range ids {
			_, err := b.s.WorkerRegister(b.ctx, store.WorkerRegisterParams{ID: id, Concurrency: 1, Queues: []string{b.queue}, Principal: owner})
			require.NoError(t, err)
		}
		require.NoError(t, b.s.WorkerDeregister(b.ctx, ids[2])) // OFFLINE: not counted
		c, err := b.s.WorkerCounts(b.ctx, owner, ids[0])        // ids[0] re-registering: not counted
		require.NoError(t, err)
		require.Equal(t, 1, c.LiveOfPrincipal)
		// The cluster-wide count moves with the other subtests' workers (they register and
		// deregister concurrently): it holds ids[1] at least. Its exact value against a limit is
		// workerLimitSuite's, on an isolated store.
		require.GreaterOrEqual(t, c.Live, 1)
	})

	// One principal cannot have more than MaxOfPrincipal live workers, concurrent registrations
	// included; an OFFLINE id does not count (a worker whose ids churn is never locked out), and
	// the principal's oldest OFFLINE rows make room, so it never holds more rows than the limit.
	t.Run("PrincipalLimit", func(t *testing.T) {
		b := setup(t, newStore)
		owner := uniqueName("p")
		const limit = 3
		reg := func(id string, retention time.Duration) error {
			_, err := b.s.WorkerRegister(b.ctx, store.WorkerRegisterParams{ID: id, Concurrency: 1, Queues: []string{b.queue},
				Principal: owner, MaxOfPrincipal: limit, OfflineRetention: retention})
			return err
		}
		ids := make([]string, 12)
		errs := make([]error, len(ids))
		var wg sync.WaitGroup
		for i := range ids {
			ids[i] = uniqueName("w")
			wg.Go(func() { errs[i] = reg(ids[i], 0) })
		}
		wg.Wait()
		var owned []string
		for i, err := range errs {
			if err == nil {
				owned = append(owned, ids[i])
				continue
			}
			require.ErrorIs(t, err, queue.ErrLimitReached)
		}
		require.Len(t, owned, limit, "concurrent registrations do not overshoot")
		require.NoError(t, reg(owned[0], 0), "an owned id registers again at the limit")
		require.ErrorIs(t, reg(uniqueName("w"), 0), queue.ErrLimitReached, "a fourth live worker is refused")
		require.NoError(t, b.s.WorkerDeregister(b.ctx, owned[1]))
		fresh := uniqueName("w")
		require.NoError(t, reg(fresh, 0), "an OFFLINE worker does not count")
		_, err := b.s.WorkerGet(b.ctx, owned[1])
		require.ErrorIs(t, err, queue.ErrWorkerNotFound, "the OFFLINE row made room for the new one")
		// Ids that churn (a new id per restart, the old one deregistered or lost) never lock the
		// principal out, and its rows stay at the limit.
		last := fresh
		for range 10 {
			require.NoError(t, b.s.WorkerDeregister(b.ctx, last))
			last = uniqueName("w")
			require.NoError(t, reg(last, 0))
		}
		rows := 0
		all, err := b.s.WorkerList(b.ctx)
		require.NoError(t, err)
		for _, w := range all {
			if w.Principal == owner {
				rows++
			}
		}
		require.Equal(t, limit, rows, "OFFLINE rows beyond the limit are deleted")
		require.ErrorIs(t, reg(uniqueName("w"), 0), queue.ErrLimitReached, "three live again")
		// Past the retention an OFFLINE row is collected by any registration.
		require.NoError(t, b.s.WorkerDeregister(b.ctx, owned[2]))
		testenv.Eventually(t, 10*time.Second, func() error {
			if err := reg(owned[0], 2*time.Second); err != nil {
				return err
			}
			if _, err := b.s.WorkerGet(b.ctx, owned[2]); !errors.Is(err, queue.ErrWorkerNotFound) {
				return fmt.Errorf("offline row still there: %w", err)
			}
			return nil
		})
	})

	t.Run("ListPage", func(t *testing.T) {
		b := setup(t, newStore)
		var mine []string
		for range 5 {
			id := uniqueName("w")
			_, err := b.s.WorkerRegister(b.ctx, store.WorkerRegisterParams{ID: id, Concurrency: 1, Queues: []string{b.queue}})
			require.NoError(t, err)
			mine = append(mine, id)
		}
		var paged []string
		for after := ""; ; {
			page, err := b.s.WorkerListPage(b.ctx, after, 2)
			require.NoError(t, err)
			require.LessOrEqual(t, len(page), 2)
			if len(page) == 0 {
				break
			}
			for _, w := range page {
				paged = append(paged, w.ID)
			}
			after = page[len(page)-1].ID
		}
		require.True(t, slices.IsSorted(paged))
		// Parallel tests register workers and prune OFFLINE ones meanwhile: the workers of this
		// test are in the pages.
		for _, id := range mine {
			require.Contains(t, paged, id)
		}
		_, err := b.s.WorkerListPage(b.ctx, "", 0)
		require.ErrorIs(t, err, queue.ErrInvalidArgument)
	})

	t.Run("RegisterInvalid", func(t *testing.T) {
		b := setup(t, newStore)
		for _, p := range []store.WorkerRegisterParams{
			{ID: ""},
			{ID: uniqueName("w"), Concurrency: -1},
			{ID: uniqueName("w"), Queues: []string{"Not A Queue"}},
		} {
			_, err := b.s.WorkerRegister(b.ctx, p)
			require.ErrorIs(t, err, queue.ErrInvalidArgument, "%+v", p)
		}
	})

	t.Run("NotFound", func(t *testing.T) {
		b := setup(t, newStore)
		id := uniqueName("missing")
		_, err := b.s.WorkerGet(b.ctx, id)
		require.ErrorIs(t, err, queue.ErrWorkerNotFound)
		_, err = b.s.WorkerHeartbeat(b.ctx, store.WorkerHeartbeatParams{ID: id})
		require.ErrorIs(t, err, queue.ErrWorkerNotFound)
		_, err = b.s.WorkerSetStatus(b.ctx, store.WorkerSetStatusParams{ID: id, Status: queue.WorkerDraining})
		require.ErrorIs(t, err, queue.ErrWorkerNotFound)
		require.ErrorIs(t, b.s.WorkerDeregister(b.ctx, id), queue.ErrWorkerNotFound)
	})

	t.Run("Heartbeat", func(t *testing.T) {
		b := setup(t, newStore)
		w := b.register(uniqueName("w"))
		hb, err := b.s.WorkerHeartbeat(b.ctx, store.WorkerHeartbeatParams{ID: w.ID})
		require.NoError(t, err)
		require.False(t, hb.LastHeartbeatAt.Before(w.LastHeartbeatAt))
		require.Equal(t, w.StartedAt, hb.StartedAt)
		require.Equal(t, queue.WorkerOnline, hb.Status)
	})

	t.Run("HeartbeatBreakers", func(t *testing.T) {
		b := setup(t, newStore)
		w := b.register(uniqueName("w"))
		require.Empty(t, w.Breakers)
		since := time.Date(2026, 11, 24, 10, 0, 0, 0, time.UTC)
		open := []queue.QueueBreaker{
			{Queue: "default", State: queue.BreakerOpen, FailureRate: 0.6, Samples: 20, Since: since},
			{Queue: b.queue, State: queue.BreakerHalfOpen, FailureRate: 0.75, Samples: 40, Since: since.Add(time.Second)},
		}
		hb, err := b.s.WorkerHeartbeat(b.ctx, store.WorkerHeartbeatParams{ID: w.ID, Breakers: open})
		require.NoError(t, err)
		require.Equal(t, open, hb.Breakers)
		got, err := b.s.WorkerGet(b.ctx, w.ID)
		require.NoError(t, err)
		require.Equal(t, open, got.Breakers, "kept with the worker")

		// Each heartbeat replaces the list; an older worker's heartbeat (none) clears it.
		hb, err = b.s.WorkerHeartbeat(b.ctx, store.WorkerHeartbeatParams{ID: w.ID})
		require.NoError(t, err)
		require.Empty(t, hb.Breakers)

		for _, bad := range [][]queue.QueueBreaker{
			{{Queue: "Not A Queue", State: queue.BreakerOpen}},
			{{Queue: "default", State: "AJAR"}},
			{{Queue: "default", State: queue.BreakerOpen, FailureRate: 1.5}},
			{{Queue: "default", State: queue.BreakerOpen}, {Queue: "default", State: queue.BreakerHalfOpen}},
		} {
			_, err := b.s.WorkerHeartbeat(b.ctx, store.WorkerHeartbeatParams{ID: w.ID, Breakers: bad})
			require.ErrorIs(t, err, queue.ErrInvalidArgument, "%+v", bad)
		}
	})

	t.Run("StatusAndDeregister", func(t *testing.T) {
		b := setup(t, newStore)
		w := b.register(uniqueName("w"))

		d, err := b.s.WorkerSetStatus(b.ctx, store.WorkerSetStatusParams{ID: w.ID, Status: queue.WorkerDraining})
		require.NoError(t, err)
		require.Equal(t, queue.WorkerDraining, d.Status)
		_, err = b.s.WorkerSetStatus(b.ctx, store.WorkerSetStatusParams{ID: w.ID, Status: "BUSY"})
		require.ErrorIs(t, err, queue.ErrInvalidArgument)

		require.NoError(t, b.s.WorkerDeregister(b.ctx, w.ID))
		off, err := b.s.WorkerGet(b.ctx, w.ID)
		require.NoError(t, err)
		require.Equal(t, queue.WorkerOffline, off.Status, "kept for history")
		_, err = b.s.WorkerSetStatus(b.ctx, store.WorkerSetStatusParams{ID: w.ID, Status: queue.WorkerDraining})
		require.ErrorIs(t, err, queue.ErrIllegalTransition, "only registering revives an OFFLINE worker")

		// A late heartbeat does not revive an OFFLINE worker.
		hb, err := b.s.WorkerHeartbeat(b.ctx, store.WorkerHeartbeatParams{ID: w.ID})
		require.NoError(t, err)
		require.Equal(t, queue.WorkerOffline, hb.Status)

		// Registering again does.
		back := b.register(w.ID)
		require.Equal(t, queue.WorkerOnline, back.Status)
	})

	t.Run("ListAndRunningJobs", func(t *testing.T) {
		b := setup(t, newStore)
		a, c := b.register(uniqueName("w")), b.register(uniqueName("w"))
		res := b.insert(b.job("t"), b.job("t"), b.job("t"))
		b.move(res[0].Job, queue.StateAssigned, store.JobTransitionParams{WorkerID: a.ID})
		b.advance(b.move(res[1].Job, queue.StateAssigned, store.JobTransitionParams{WorkerID: a.ID}), queue.StateRunning)
		b.advance(b.move(res[2].Job, queue.StateAssigned, store.JobTransitionParams{WorkerID: a.ID}), queue.StateRunning, queue.StateDone)

		ws, err := b.s.WorkerList(b.ctx)
		require.NoError(t, err)
		byID := map[string]*queue.Worker{}
		var listed []string
		for _, w := range ws {
			byID[w.ID] = w
			listed = append(listed, w.ID)
		}
		require.True(t, slices.IsSorted(listed), "ordered by id")
		require.Contains(t, byID, a.ID)
		require.Contains(t, byID, c.ID)
		require.Equal(t, 2, byID[a.ID].RunningJobs, "ASSIGNED and RUNNING count; DONE does not")
		require.Zero(t, byID[c.ID].RunningJobs)
	})
}

func (b *bundle) register(id string) *queue.Worker {
	b.t.Helper()
	w, err := b.s.WorkerRegister(b.ctx, store.WorkerRegisterParams{ID: id, Hostname: "h", Concurrency: 2, Queues: []string{b.queue}})
	require.NoError(b.t, err)
	return w
}
