package storetest

import (
	"slices"
	"strings"
	"testing"
	"time"

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

	t.Run("ListTypeTimeScheduled", func(t *testing.T) {
		b := setup(t, newStore)
		mk := func(typ string, runAt time.Time) store.JobInsertParams {
			p := b.job(typ)
			p.RunAt = runAt
			return p
		}
		res := b.insert(mk("email.send", time.Time{}), mk("report.build", time.Time{}))
		// The store's clock decides created_at: bounds are taken from the jobs themselves.
		first := b.get(res[0].Job.ID)
		later := b.insert(mk("email.send", time.Now().Add(time.Hour)), mk("email.send", time.Time{}))
		delayed, done := later[0].Job, b.advance(later[1].Job, queue.StateAssigned, queue.StateRunning, queue.StateDone)
		done = b.get(done.ID)
		b.advance(res[1].Job, queue.StateDeadLettered)
		second := b.get(delayed.ID)

		list := func(p store.JobListParams) []string {
			p.Queue = b.queue
			return ids(b.listAll(p))
		}
		all := []string{done.ID, delayed.ID, res[1].Job.ID, res[0].Job.ID}
		require.ElementsMatch(t, all, list(store.JobListParams{}))
		require.ElementsMatch(t, []string{done.ID, delayed.ID, res[0].Job.ID}, list(store.JobListParams{Type: "email.send"}))
		require.Equal(t, []string{res[1].Job.ID}, list(store.JobListParams{Type: "report.build"}))
		require.Empty(t, list(store.JobListParams{Type: "image.resize"}))

		// created_after is inclusive, created_before exclusive.
		require.NotContains(t, list(store.JobListParams{CreatedAfter: second.CreatedAt}), res[0].Job.ID)
		require.Contains(t, list(store.JobListParams{CreatedAfter: second.CreatedAt}), delayed.ID)
		require.ElementsMatch(t, []string{res[0].Job.ID, res[1].Job.ID}, list(store.JobListParams{CreatedBefore: second.CreatedAt}))
		require.Contains(t, list(store.JobListParams{CreatedAfter: first.CreatedAt, CreatedBefore: first.CreatedAt.Add(time.Microsecond)}), first.ID)

		// Completion times: the DONE job and the dead letter have one, the others never match.
		require.False(t, done.CompletedAt.IsZero())
		completed := list(store.JobListParams{CompletedAfter: first.CreatedAt})
		require.ElementsMatch(t, []string{done.ID, res[1].Job.ID}, completed)
		require.Equal(t, []string{done.ID}, list(store.JobListParams{
			CompletedAfter: done.CompletedAt, CompletedBefore: done.CompletedAt.Add(time.Microsecond),
		}))
		require.Empty(t, list(store.JobListParams{CompletedBefore: first.CreatedAt}))

		// Scheduled: PENDING and not due yet.
		require.Equal(t, []string{delayed.ID}, list(store.JobListParams{Scheduled: true}))
		require.Equal(t, []string{delayed.ID}, list(store.JobListParams{Scheduled: true, States: []queue.State{queue.StatePending}}))
		require.Equal(t, []string{delayed.ID}, list(store.JobListParams{Scheduled: true, Type: "email.send"}))

		// A page token carries its filters.
		page, err := b.s.JobList(b.ctx, store.JobListParams{Queue: b.queue, Type: "email.send", Limit: 1})
		require.NoError(t, err)
		require.NotEmpty(t, page.NextCursor)
		_, err = b.s.JobList(b.ctx, store.JobListParams{Queue: b.queue, Type: "report.build", Limit: 1, Cursor: page.NextCursor})
		require.ErrorIs(t, err, queue.ErrInvalidArgument, "a token of another type filter")
		_, err = b.s.JobList(b.ctx, store.JobListParams{Queue: b.queue, Type: "email.send", Scheduled: true, Limit: 1, Cursor: page.NextCursor})
		require.ErrorIs(t, err, queue.ErrInvalidArgument, "a token of a listing without scheduled")

		for _, p := range []store.JobListParams{
			{Queue: b.queue, Type: "has space"},
			{Queue: b.queue, CreatedAfter: second.CreatedAt, CreatedBefore: second.CreatedAt},
			{Queue: b.queue, CompletedAfter: second.CreatedAt, CompletedBefore: first.CreatedAt},
			{Queue: b.queue, Scheduled: true, States: []queue.State{queue.StateDone}},
		} {
			_, err := b.s.JobList(b.ctx, p)
			require.ErrorIs(t, err, queue.ErrInvalidArgument, "%+v", p)
		}
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

	t.Run("ListAscending", func(t *testing.T) {
		b := setup(t, newStore)
		const n = 23
		ps := make([]store.JobInsertParams, n)
		for i := range ps {
			ps[i] = b.job("t")
		}
		// A batch sharing a transaction timestamp, then single jobs: ties and distinct times.
		res := append(b.insert(ps[:10]...), b.insert(ps[10:15]...)...)
		for i := 15; i < n; i++ {
			res = append(res, b.insert(ps[i])...)
		}
		newest := ids(b.listAll(store.JobListParams{Queue: b.queue}))
		require.Len(t, newest, n)

		for _, limit := range []int{1, 4, n, n + 1} {
			p := store.JobListParams{Queue: b.queue, Limit: limit, Ascending: true}
			var walked []*queue.Job
			for pages := 1; ; pages++ {
				require.LessOrEqual(t, pages, n, "every page makes progress")
				page, err := b.s.JobList(b.ctx, p)
				require.NoError(t, err)
				walked = append(walked, page.Jobs...)
				if page.NextCursor == "" {
					break
				}
				require.Len(t, page.Jobs, limit, "only the last page is short")
				p.Cursor = page.NextCursor
			}
			got := ids(walked)
			require.Equal(t, ids(jobsOf(res)), got, "oldest first is submit order (limit %d)", limit)
			back := slices.Clone(got)
			slices.Reverse(back)
			require.Equal(t, newest, back, "the same order as newest first, walked the other way")
			for i := 1; i < len(walked); i++ {
				a, c := walked[i-1], walked[i]
				require.True(t, a.CreatedAt.Before(c.CreatedAt) || a.CreatedAt.Equal(c.CreatedAt) && a.ID < c.ID,
					"created_at ascending, ties by id ascending")
			}
		}

		// A cursor continues only a walk in its own direction.
		first, err := b.s.JobList(b.ctx, store.JobListParams{Queue: b.queue, Limit: 2})
		require.NoError(t, err)
		_, err = b.s.JobList(b.ctx, store.JobListParams{Queue: b.queue, Limit: 2, Ascending: true, Cursor: first.NextCursor})
		require.ErrorIs(t, err, queue.ErrInvalidArgument)
		up, err := b.s.JobList(b.ctx, store.JobListParams{Queue: b.queue, Limit: 2, Ascending: true})
		require.NoError(t, err)
		_, err = b.s.JobList(b.ctx, store.JobListParams{Queue: b.queue, Limit: 2, Cursor: up.NextCursor})
		require.ErrorIs(t, err, queue.ErrInvalidArgument)
	})

	t.Run("ListCancelledIn", func(t *testing.T) {
		b := setup(t, newStore)
		ps := make([]store.JobInsertParams, 6)
		for i := range ps {
			ps[i] = b.job("t")
		}
		res := jobsOf(b.insert(ps...))
		pending := res[0]
		failed := b.move(b.advance(res[1], queue.StateAssigned, queue.StateRunning), queue.StateFailed,
			store.JobTransitionParams{Reason: "error", Error: "boom"})
		failedCancel := b.move(b.advance(res[2], queue.StateAssigned, queue.StateRunning), queue.StateFailed,
			store.JobTransitionParams{Reason: queue.ReasonCancelled, Error: "context canceled"})
		dead := b.move(pending, queue.StateDeadLettered, store.JobTransitionParams{Reason: queue.ReasonTTLExpired})
		deadCancel := b.move(res[3], queue.StateDeadLettered, store.JobTransitionParams{Reason: queue.ReasonCancelled})
		pending = res[4]
		// The leftover job: RUNNING, with its cancellation requested when the store can do that.
		running := b.advance(res[5], queue.StateAssigned, queue.StateRunning)
		op, canCancel := b.s.(commandStore)
		if canCancel {
			var err error
			running, err = cancelJob(b.ctx, op, running.ID)
			require.NoError(t, err)
			require.True(t, running.CancelRequested)
		}

		list := func(p store.JobListParams) []string {
			p.Queue, p.Ascending = b.queue, true
			return ids(b.listAll(p))
		}
		all := []queue.State{queue.StatePending, queue.StateFailed, queue.StateDeadLettered, queue.StateRunning}
		require.Equal(t, ids([]*queue.Job{dead, failed, failedCancel, deadCancel, pending, running}),
			list(store.JobListParams{States: all}), "sanity: in creation order")
		require.Equal(t, ids([]*queue.Job{dead, failed, pending, running}), list(store.JobListParams{States: all,
			CancelledIn: map[queue.State]bool{queue.StateFailed: false, queue.StateDeadLettered: false}}),
			"other states are not affected")
		require.Equal(t, ids([]*queue.Job{failedCancel, deadCancel, pending, running}), list(store.JobListParams{States: all,
			CancelledIn: map[queue.State]bool{queue.StateFailed: true, queue.StateDeadLettered: true}}))
		require.Equal(t, ids([]*queue.Job{failed, deadCancel}), list(store.JobListParams{
			States:      []queue.State{queue.StateFailed, queue.StateDeadLettered},
			CancelledIn: map[queue.State]bool{queue.StateFailed: false, queue.StateDeadLettered: true}}))
		require.Equal(t, ids([]*queue.Job{dead}), list(store.JobListParams{
			States: []queue.State{queue.StateDeadLettered}, CancelledIn: map[queue.State]bool{queue.StateDeadLettered: false}}),
			"not cancelled: another reason")
		if canCancel {
			require.Equal(t, ids([]*queue.Job{running}), list(store.JobListParams{
				States: []queue.State{queue.StateRunning}, CancelledIn: map[queue.State]bool{queue.StateRunning: true}}),
				"a requested cancel counts")
			require.Empty(t, list(store.JobListParams{
				States: []queue.State{queue.StateRunning}, CancelledIn: map[queue.State]bool{queue.StateRunning: false}}))
		}

		// A cursor continues only the listing with the same cancelled filter.
		p := store.JobListParams{Queue: b.queue, Limit: 1, CancelledIn: map[queue.State]bool{queue.StateFailed: true}}
		page, err := b.s.JobList(b.ctx, p)
		require.NoError(t, err)
		require.NotEmpty(t, page.NextCursor)
		p.Cursor, p.CancelledIn = page.NextCursor, map[queue.State]bool{queue.StateFailed: false}
		_, err = b.s.JobList(b.ctx, p)
		require.ErrorIs(t, err, queue.ErrInvalidArgument)
		p.CancelledIn = nil
		_, err = b.s.JobList(b.ctx, p)
		require.ErrorIs(t, err, queue.ErrInvalidArgument)
		_, err = b.s.JobList(b.ctx, store.JobListParams{Queue: b.queue, CancelledIn: map[queue.State]bool{"QUEUED": true}})
		require.ErrorIs(t, err, queue.ErrInvalidArgument)
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
			{Queue: b.queue, Cursor: store.JobListParams{Queue: b.queue}.CursorAfter(&queue.Job{ID: "x"})}, // not a job id
			{Queue: b.queue, Limit: -1},
			{Queue: b.queue, States: []queue.State{"QUEUED"}},
			{Queue: "Bad Queue"},
		} {
			_, err := b.s.JobList(b.ctx, p)
			require.ErrorIs(t, err, queue.ErrInvalidArgument, "%+v", p)
		}
		// An unknown queue is an error, whatever the other filters; an existing queue without
		// matching jobs is an empty list.
		missing := uniqueName("missing")
		for _, p := range []store.JobListParams{
			{Queue: missing},
			{Queue: missing, States: []queue.State{queue.StateDone}, Labels: map[string]string{"k": "v"}, Type: "t"},
		} {
			_, err := b.s.JobList(b.ctx, p)
			require.ErrorIs(t, err, queue.ErrQueueNotFound, "%+v", p)
			require.ErrorContains(t, err, missing)
		}
		page, err := b.s.JobList(b.ctx, store.JobListParams{Queue: b.queue, Type: "none"})
		require.NoError(t, err)
		require.Empty(t, page.Jobs)
		require.Empty(t, page.NextCursor)
	})
}

// runJobIDPrefixTests: a job is found by the leading hex digits of its id, as the tables show it.
func runJobIDPrefixTests(t *testing.T, newStore NewStoreFunc) {
	t.Run("IDsByPrefix", func(t *testing.T) {
		b := setup(t, newStore)
		res, err := b.s.JobInsertMany(b.ctx, []store.JobInsertParams{b.job("t"), b.job("t"), b.job("t")})
		require.NoError(t, err)
		for _, r := range res {
			id := r.Job.ID
			got, err := b.s.JobPrefixList(b.ctx, id[:8], store.MaxIDPrefixMatches)
			require.NoError(t, err)
			require.Contains(t, got, id)
			got, err = b.s.JobPrefixList(b.ctx, strings.ToUpper(id[:13]), 1) // with its dash, any case
			require.NoError(t, err)
			require.Equal(t, []string{id}, got)
			got, err = b.s.JobPrefixList(b.ctx, id, 5)
			require.NoError(t, err)
			require.Equal(t, []string{id}, got)
		}
		// The ids of one prefix come in id order, at most limit of them.
		got, err := b.s.JobPrefixList(b.ctx, "0000", store.MaxIDPrefixMatches)
		require.NoError(t, err)
		require.True(t, slices.IsSorted(got))
		for _, id := range got {
			require.True(t, strings.HasPrefix(id, "0000"), id)
		}
		for _, bad := range []string{"", "885", "zzzz", "885e978c'--", strings.Repeat("a", 33)} {
			_, err := b.s.JobPrefixList(b.ctx, bad, 10)
			require.ErrorIs(t, err, queue.ErrInvalidArgument, bad)
		}
		_, err = b.s.JobPrefixList(b.ctx, "885e", 0)
		require.ErrorIs(t, err, queue.ErrInvalidArgument)
	})
}
