package postgres_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/jq-dev/jq/queue"
	"github.com/jq-dev/jq/store"
)

// Events have no foreign key to their job (migration 000003), so a forced queue delete must remove
// them itself: no published event of a deleted job may remain, an unpublished one stays for the
// relay, and another queue's job sharing a batch keeps its events.
func TestQueueDeleteForceRemovesEvents(t *testing.T) {
	ctx := context.Background()
	q, err := testStore.QueueCreate(ctx, store.QueueCreateParams{Name: "force-events"})
	require.NoError(t, err)
	other, err := testStore.QueueCreate(ctx, store.QueueCreateParams{Name: "force-events-other"})
	require.NoError(t, err)
	insert := func(ps []store.JobInsertParams) []string {
		res, err := testStore.JobInsertMany(ctx, ps)
		require.NoError(t, err)
		ids := make([]string, len(res))
		for i, r := range res {
			ids[i] = r.Job.ID
		}
		return ids
	}
	jobs := func(queue string, n int) []store.JobInsertParams {
		ps := make([]store.JobInsertParams, n)
		for i := range ps {
			ps[i] = store.JobInsertParams{Queue: queue, Type: "t"}
		}
		return ps
	}
	// One batch: 25 jobs of the queue and one of another; then a batch of 25 more.
	first := insert(append(jobs(q.Name, 25), jobs(other.Name, 1)...))
	published, kept := first[:25], first[25]
	owed := insert(jobs(q.Name, 25))
	_, err = testStore.JobTransition(ctx, store.JobTransitionParams{
		ID: owed[len(owed)-1], From: queue.StatePending, To: queue.StateAssigned, WorkerID: "w", Attempt: store.AnyAttempt,
	})
	require.NoError(t, err)

	// The first batch reached Kafka (the relay's cursor is past it); the others are still owed to it.
	_, err = testStore.Pool().Exec(ctx, `UPDATE outbox_cursors SET id = (SELECT max(id) FROM event_rows WHERE job_id = ANY($1::uuid[]))
		WHERE name = 'kafka.batches'`, published)
	require.NoError(t, err)

	n, err := testStore.QueueDelete(ctx, store.QueueDeleteParams{Name: q.Name, Force: true})
	require.NoError(t, err)
	require.EqualValues(t, 50, n)
	count := func(ids ...string) int {
		var c int
		require.NoError(t, testStore.Pool().QueryRow(ctx,
			`SELECT count(*) FROM event_rows WHERE job_id = ANY($1::uuid[])`, ids).Scan(&c))
		return c
	}
	require.Zero(t, count(published...), "published events of deleted jobs are deleted")
	require.Equal(t, len(owed)+1, count(owed...), "unpublished events stay for the relay (I8); the last job has two")
	require.Equal(t, 1, count(kept), "another queue's job in the same batch keeps its event")
	evs, err := testStore.JobEvents(ctx, kept)
	require.NoError(t, err)
	require.Len(t, evs, 1)
	require.Equal(t, queue.StatePending, evs[0].To)
	var elements int
	require.NoError(t, testStore.Pool().QueryRow(ctx, `SELECT n FROM event_batches WHERE $1::uuid = ANY(job_ids)`, kept).Scan(&elements))
	require.Equal(t, 1, elements, "the batch holds what is left")
	_, err = testStore.JobEvents(ctx, owed[0])
	require.ErrorIs(t, err, queue.ErrJobNotFound, "a deleted job's leftover events are not its history")
}

// The insert takes the queue row's KEY SHARE lock itself (no foreign key any more): inserts racing a
// forced delete either commit before it — and are deleted and counted — or fail with
// ErrQueueNotFound. No job of a deleted queue survives.
func TestQueueDeleteRacesInserts(t *testing.T) {
	ctx := context.Background()
	q, err := testStore.QueueCreate(ctx, store.QueueCreateParams{Name: "delete-race"})
	require.NoError(t, err)
	var (
		wg       sync.WaitGroup
		mu       sync.Mutex
		accepted int
		ids      []string // of the accepted jobs
	)
	start := make(chan struct{})
	for range 8 {
		wg.Go(func() {
			<-start
			for {
				res, err := testStore.JobInsertMany(ctx, []store.JobInsertParams{{Queue: q.Name, Type: "t"}, {Queue: q.Name, Type: "t"}})
				if errors.Is(err, queue.ErrQueueNotFound) {
					return
				}
				if !errors.Is(err, nil) {
					t.Errorf("insert: %v", err)
					return
				}
				mu.Lock()
				accepted += len(res)
				for _, r := range res {
					ids = append(ids, r.Job.ID)
				}
				mu.Unlock()
			}
		})
	}
	close(start)
	// Let some inserts commit, then delete while the others run.
	require.Eventually(t, func() bool {
		mu.Lock()
		defer mu.Unlock()
		return accepted >= 40
	}, 30*time.Second, 5*time.Millisecond)
	deleted, err := testStore.QueueDelete(ctx, store.QueueDeleteParams{Name: q.Name, Force: true})
	require.NoError(t, err)
	wg.Wait()
	var left, survivors int
	require.NoError(t, testStore.Pool().QueryRow(ctx, `SELECT count(*) FROM jobs WHERE queue = $1`, q.Name).Scan(&left))
	require.NoError(t, testStore.Pool().QueryRow(ctx, `SELECT count(*) FROM jobs WHERE id = ANY($1::uuid[])`, ids).Scan(&survivors))
	require.Zero(t, left, "no job of the deleted queue is left")
	require.Zero(t, survivors, "no accepted job survives")
	require.EqualValues(t, accepted, deleted, "every accepted insert was deleted, nothing else (accepted ids: %d)", len(ids))
}
