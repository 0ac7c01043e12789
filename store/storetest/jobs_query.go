package storetest

import (
	"slices"
	"testing"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/jq-dev/jq/queue"
	"github.com/jq-dev/jq/store"
)

func runJobQueryTests(t *testing.T, newStore NewStoreFunc) {
	t.Run("GetNotFound", func(t *testing.T) {
		b := setup(t, newStore)
		_, err := b.s.JobGet(b.ctx, uuid.NewString())
		require.ErrorIs(t, err, queue.ErrJobNotFound)
		_, err = b.s.JobEvents(b.ctx, uuid.NewString())
		require.ErrorIs(t, err, queue.ErrJobNotFound)
	})

	t.Run("MalformedID", func(t *testing.T) {
		b := setup(t, newStore)
		for _, id := range []string{"", "42", "not-a-uuid", "'; DROP TABLE jobs; --"} {
			_, err := b.s.JobGet(b.ctx, id)
			require.ErrorIs(t, err, queue.ErrInvalidArgument, id)
			_, err = b.s.JobEvents(b.ctx, id)
			require.ErrorIs(t, err, queue.ErrInvalidArgument, id)
		}
	})

	t.Run("ListFilters", func(t *testing.T) {
		b := setup(t, newStore)
		mk := func(labels map[string]string) store.JobInsertParams {
			p := b.job("t")
			p.Labels = labels
			return p
		}
		res := b.insert(
			mk(map[string]string{"team": "a", "env": "prod"}),
			mk(map[string]string{"team": "a", "env": "dev"}),
			mk(map[string]string{"team": "b"}),
			mk(nil),
		)
		b.advance(res[1].Job, queue.StateAssigned)
		b.advance(res[2].Job, queue.StateDeadLettered)
		other := b.newQueue(store.QueueCreateParams{})
		b.insert(store.JobInsertParams{Queue: other.Name, Type: "t", Labels: map[string]string{"team": "a"}})

		want := func(is ...int) []string {
			var out []string
			for _, i := range slices.Backward(is) { // newest first
				out = append(out, res[i].Job.ID)
			}
			return out
		}
		list := func(p store.JobListParams) []string {
			p.Queue = b.queue
			return ids(b.listAll(p))
		}
		require.Equal(t, want(0, 1, 2, 3), list(store.JobListParams{}))
		require.Equal(t, want(0, 3), list(store.JobListParams{States: []queue.State{queue.StatePending}}))
		require.Equal(t, want(1, 2), list(store.JobListParams{States: []queue.State{queue.StateAssigned, queue.StateDeadLettered}}))
		require.Empty(t, list(store.JobListParams{States: []queue.State{queue.StateDone}}))
		require.Equal(t, want(0, 1), list(store.JobListParams{Labels: map[string]string{"team": "a"}}))
		require.Equal(t, want(0), list(store.JobListParams{Labels: map[string]string{"team": "a", "env": "prod"}}))
		require.Equal(t, want(1), list(store.JobListParams{
			Labels: map[string]string{"team": "a"},
			States: []queue.State{queue.StateAssigned},
		}))
	})

	t.Run("ListAcrossQueues", func(t *testing.T) {
		b := setup(t, newStore)
		other := b.newQueue(store.QueueCreateParams{})
		tag := map[string]string{"run": uniqueName("run")}
		res := b.insert(
			store.JobInsertParams{Queue: b.queue, Type: "t", Labels: tag},
			store.JobInsertParams{Queue: other.Name, Type: "t", Labels: tag},
		)
		got := b.listAll(store.JobListParams{Labels: tag, Limit: 1})
		require.Equal(t, []string{res[1].Job.ID, res[0].Job.ID}, ids(got))
	})

	t.Run("ListPagination", func(t *testing.T) {
		b := setup(t, newStore)
		const n = 53
		ps := make([]store.JobInsertParams, n)
		for i := range ps {
			ps[i] = b.job("t")
		}
		// Two batches: one shares a transaction timestamp, the other comes later.
		res := append(b.insert(ps[:30]...), b.insert(ps[30:]...)...)

		for _, limit := range []int{1, 7, 20, n, n + 1} {
			var (
				seen   = map[string]bool{}
				walked []*queue.Job
				p      = store.JobListParams{Queue: b.queue, Limit: limit}
				pages  int
			)
			for {
				page, err := b.s.JobList(b.ctx, p)
				require.NoError(t, err)
				require.LessOrEqual(t, len(page.Jobs), limit)
				pages++
				for _, j := range page.Jobs {
					require.False(t, seen[j.ID], "job %s on two pages", j.ID)
					seen[j.ID] = true
				}
				walked = append(walked, page.Jobs...)
				if page.NextCursor == "" {
					break
				}
				require.Len(t, page.Jobs, limit, "only the last page is short")
				p.Cursor = page.NextCursor
			}
			require.Len(t, walked, n, "limit %d", limit)
			require.Equal(t, (n+limit-1)/limit, pages, "no empty trailing page (limit %d)", limit)
			for i := range walked {
				// Newest first: the reverse of submit order.
				require.Equal(t, res[n-1-i].Job.ID, walked[i].ID)
			}
		}
	})

	t.Run("ListDefaultLimit", func(t *testing.T) {
		b := setup(t, newStore)
		ps := make([]store.JobInsertParams, store.DefaultListLimit+1)
		for i := range ps {
			ps[i] = b.job("t")
		}
		b.insert(ps...)
		page, err := b.s.JobList(b.ctx, store.JobListParams{Queue: b.queue})
		require.NoError(t, err)
		require.Len(t, page.Jobs, store.DefaultListLimit)
		require.NotEmpty(t, page.NextCursor)
	})

	t.Run("ListInvalid", func(t *testing.T) {
		b := setup(t, newStore)
		for _, p := range []store.JobListParams{
			{Queue: b.queue, Cursor: "garbage!"},
			{Queue: b.queue, Cursor: "Zm9vYmFy"}, // base64 of "foobar"
			{Queue: b.queue, Cursor: store.EncodeJobCursor(store.JobCursor{ID: "x"})},
			{Queue: b.queue, Limit: -1},
			{Queue: b.queue, States: []queue.State{"QUEUED"}},
			{Queue: "Bad Queue"},
		} {
			_, err := b.s.JobList(b.ctx, p)
			require.ErrorIs(t, err, queue.ErrInvalidArgument, "%+v", p)
		}
		// An unknown queue is an empty list, not an error.
		page, err := b.s.JobList(b.ctx, store.JobListParams{Queue: uniqueName("missing")})
		require.NoError(t, err)
		require.Empty(t, page.Jobs)
		require.Empty(t, page.NextCursor)
	})
}
