package storetest

import (
	"bytes"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/jq-dev/jq/queue"
	"github.com/jq-dev/jq/store"
	"github.com/jq-dev/jq/store/internal/sqlstore"
)

// runPageTests checks the byte budget of JobList pages and their data on request.
func runPageTests(t *testing.T, newStore NewStoreFunc) {
	t.Run("ListDataOnlyWhenAsked", func(t *testing.T) {
		b := setup(t, newStore)
		p := b.job("t")
		p.Payload = []byte("payload")
		p.KeepResult = true
		j := b.insertOne(p)
		j = b.advance(j, queue.StateAssigned, queue.StateRunning)
		b.move(j, queue.StateDone, store.JobTransitionParams{Reason: "success", Result: []byte("result")})

		page, err := b.s.JobList(b.ctx, store.JobListParams{Queue: b.queue})
		require.NoError(t, err)
		require.Len(t, page.Jobs, 1)
		require.Empty(t, page.Jobs[0].Payload)
		require.Nil(t, page.Jobs[0].Result)
		require.Equal(t, queue.Checksum([]byte("result")), page.Jobs[0].ResultChecksum, "the metadata is all there")

		page, err = b.s.JobList(b.ctx, store.JobListParams{Queue: b.queue, WithData: true})
		require.NoError(t, err)
		require.Equal(t, b.get(j.ID), page.Jobs[0], "with data a listed job is the whole job")
	})

	t.Run("ListByteBudget", func(t *testing.T) {
		b := setup(t, newStore)
		const n, size, budget = 10, 100 << 10, 256 << 10 // two jobs a page
		ps := make([]store.JobInsertParams, n)
		for i := range ps {
			ps[i] = b.job("t")
			ps[i].Payload = bytes.Repeat([]byte{byte('a' + i)}, size)
		}
		b.insert(ps...)

		p := store.JobListParams{Queue: b.queue, Limit: store.MaxListLimit, WithData: true, MaxBytes: budget}
		var walked []*queue.Job
		for pages := 1; ; pages++ {
			require.LessOrEqual(t, pages, n, "every page makes progress")
			page, err := b.s.JobList(b.ctx, p)
			require.NoError(t, err)
			require.NotEmpty(t, page.Jobs)
			var total int64
			for _, j := range page.Jobs {
				require.Len(t, j.Payload, size, "with data")
				total += sqlstore.JobPageBytes(j, int64(len(j.Payload)))
			}
			require.LessOrEqual(t, total, int64(budget))
			walked = append(walked, page.Jobs...)
			if page.NextCursor == "" {
				break
			}
			require.Len(t, page.Jobs, 2, "cut by bytes, not by the limit")
			p.Cursor = page.NextCursor
		}
		require.Len(t, walked, n, "nothing skipped, nothing twice")
		seen := map[string]bool{}
		for _, j := range walked {
			require.False(t, seen[j.ID])
			seen[j.ID] = true
		}

		// Without data the same jobs are small: one page.
		page, err := b.s.JobList(b.ctx, store.JobListParams{Queue: b.queue, Limit: store.MaxListLimit, MaxBytes: budget})
		require.NoError(t, err)
		require.Len(t, page.Jobs, n)
		require.Empty(t, page.NextCursor)

		// A job bigger than the budget alone still makes a page of its own.
		page, err = b.s.JobList(b.ctx, store.JobListParams{Queue: b.queue, Limit: 5, WithData: true, MaxBytes: size / 2})
		require.NoError(t, err)
		require.Len(t, page.Jobs, 1)
		require.Len(t, page.Jobs[0].Payload, size)
		require.NotEmpty(t, page.NextCursor)
	})
}

func testJobPeekByteBudget(t *testing.T, newStore NewStoreFunc) {
	b := setupAdmin(t, newStore)
	const n, size = 6, 100 << 10
	ps := make([]store.JobInsertParams, n)
	for i := range ps {
		ps[i] = b.job("t")
		ps[i].Payload = bytes.Repeat([]byte{'x'}, size)
	}
	b.insert(ps...)

	res, err := b.a.JobPeek(b.ctx, store.JobPeekParams{Queue: b.queue, WithData: true, MaxBytes: 256 << 10})
	require.NoError(t, err)
	require.True(t, res.Truncated)
	require.Len(t, res.Jobs, 2)
	for _, j := range res.Jobs {
		require.Len(t, j.Payload, size)
	}

	res, err = b.a.JobPeek(b.ctx, store.JobPeekParams{Queue: b.queue, MaxBytes: 256 << 10})
	require.NoError(t, err)
	require.False(t, res.Truncated)
	require.Len(t, res.Jobs, n)
}
