package sqlite_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/jq-dev/jq/queue"
	"github.com/jq-dev/jq/store"
	"github.com/jq-dev/jq/store/sqlite"
)

func privateStore(t testing.TB) *sqlite.Store { return newPrivateStore(t, sqlite.Config{}) }

// clock is a store clock the test moves by hand.
type clock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *clock) now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *clock) add(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = c.t.Add(d)
}

func clockedStore(t *testing.T) (*sqlite.Store, *clock) {
	c := &clock{t: time.Now().UTC().Truncate(time.Microsecond)}
	return newPrivateStore(t, sqlite.Config{Now: c.now}), c
}

func setupAux(t *testing.T) (*sqlite.Store, *clock, context.Context, string) {
	t.Helper()
	s, c := clockedStore(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	t.Cleanup(cancel)
	q, err := s.QueueCreate(ctx, store.QueueCreateParams{Name: "aux"})
	require.NoError(t, err)
	return s, c, ctx, q.Name
}

func deadJob(ctx context.Context, t *testing.T, s *sqlite.Store, q string) *queue.Job {
	t.Helper()
	res, err := s.JobInsertMany(ctx, []store.JobInsertParams{{Queue: q, Type: "noop"}})
	require.NoError(t, err)
	j, err := s.JobTransition(ctx, store.JobTransitionParams{ID: res[0].Job.ID, From: queue.StatePending,
		To: queue.StateDeadLettered, Reason: "test"})
	require.NoError(t, err)
	return j
}

// Leases and the backlog's age go by the store's clock: a lease ends when that clock passes it, and
// the expired holder's mark changes nothing.
func TestOutboxLeaseByStoreClock(t *testing.T) {
	t.Parallel()
	s, c, ctx, q := setupAux(t)
	res, err := s.JobInsertMany(ctx, []store.JobInsertParams{{Queue: q, Type: "noop"}})
	require.NoError(t, err)
	p := store.EventsClaimParams{Limit: 10, Lease: time.Minute}
	first, err := s.EventsClaim(ctx, p)
	require.NoError(t, err)
	require.Len(t, first.Events, 1)
	require.Equal(t, res[0].Job.ID, first.Events[0].JobID)
	none, err := s.EventsClaim(ctx, p)
	require.NoError(t, err)
	require.Empty(t, none.Events, "a live lease keeps every other claim off")

	c.add(2 * time.Minute)
	bl, err := s.OutboxBacklog(ctx)
	require.NoError(t, err)
	require.Equal(t, store.OutboxBacklog{Events: 1, OldestAge: 2 * time.Minute}, bl)
	again, err := s.EventsClaim(ctx, p)
	require.NoError(t, err)
	require.Equal(t, first.Events, again.Events)
	require.ErrorIs(t, s.EventsMarkPublished(ctx, first), queue.ErrStaleAttempt)
	require.NoError(t, s.EventsMarkPublished(ctx, again))
	bl, err = s.OutboxBacklog(ctx)
	require.NoError(t, err)
	require.Equal(t, store.OutboxBacklog{}, bl)
}

// Deleting jobs (one, or a purge of dead letters) deletes their published events and leaves the
// unpublished ones to the relay, which still publishes them; retention deletes them afterwards.
func TestAdminDeleteKeepsUnpublishedEvents(t *testing.T) {
	t.Parallel()
	s, c, ctx, q := setupAux(t)
	publish := func() int {
		t.Helper()
		cl, err := s.EventsClaim(ctx, store.EventsClaimParams{Limit: 100, Lease: time.Minute})
		require.NoError(t, err)
		require.NoError(t, s.EventsMarkPublished(ctx, cl))
		return len(cl.Events)
	}
	published := deadJob(ctx, t, s, q)
	require.Equal(t, 2, publish())
	owed := deadJob(ctx, t, s, q)
	alsoOwed := deadJob(ctx, t, s, q)

	require.NoError(t, s.JobDelete(ctx, store.JobDeleteParams{ID: published.ID, State: queue.StateDeadLettered}))
	require.NoError(t, s.JobDelete(ctx, store.JobDeleteParams{ID: owed.ID, State: queue.StateDeadLettered}))
	n, err := s.JobPurgeDeadLetters(ctx, store.JobPurgeDeadLettersParams{Queue: q})
	require.NoError(t, err)
	require.EqualValues(t, 1, n)
	for _, id := range []string{published.ID, owed.ID, alsoOwed.ID} {
		_, err := s.JobGet(ctx, id)
		require.ErrorIs(t, err, queue.ErrJobNotFound)
	}

	bl, err := s.OutboxBacklog(ctx)
	require.NoError(t, err)
	require.EqualValues(t, 4, bl.Events, "the deleted jobs' unpublished events are still owed")
	cl, err := s.EventsClaim(ctx, store.EventsClaimParams{Limit: 100, Lease: time.Minute})
	require.NoError(t, err)
	var got []string
	for _, e := range cl.Events {
		got = append(got, e.JobID)
	}
	require.Equal(t, []string{owed.ID, owed.ID, alsoOwed.ID, alsoOwed.ID}, got)
	require.NoError(t, s.EventsMarkPublished(ctx, cl))

	c.add(time.Hour)
	pruned, err := s.EventsPrune(ctx, store.EventsPruneParams{OlderThan: time.Minute, Limit: 100})
	require.NoError(t, err)
	require.EqualValues(t, 4, pruned, "only the owed events were left, the published ones went with their jobs")
}
