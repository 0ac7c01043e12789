package postgres_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/jq-dev/jq/store"
)

// Transactions commit out of id order: a reader sends nothing past an event whose transaction is
// still open, then it and the later ones in id order — none is skipped.
func TestEventFeedWaitsForEarlierIDs(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	s := privateStore(t)
	_, err := s.QueueCreate(ctx, store.QueueCreateParams{Name: "feed"})
	require.NoError(t, err)
	p := store.EventsReadParams{Queue: "feed", Limit: 100, FromNow: true}
	r, err := s.EventsRead(ctx, p)
	require.NoError(t, err)
	p = r.Next(p)

	early, err := s.Pool().Begin(ctx)
	require.NoError(t, err)
	defer func() { _ = early.Rollback(ctx) }()
	var earlyJob string
	require.NoError(t, early.QueryRow(ctx, `INSERT INTO job_events (job_id, seq, queue, type, to_state)
		VALUES (gen_random_uuid(), 1, 'feed', 'noop', 'PENDING') RETURNING job_id::text`).Scan(&earlyJob))
	res, err := s.JobInsertMany(ctx, []store.JobInsertParams{{Queue: "feed", Type: "noop"}})
	require.NoError(t, err)

	for range 20 { // reads while the early transaction runs send nothing
		r, err := s.EventsRead(ctx, p)
		require.NoError(t, err)
		require.Empty(t, r.Events, "an event after a still-open id was read")
		require.True(t, r.Pending, "the reader is told to read again soon")
		p = r.Next(p)
	}
	require.NoError(t, early.Commit(ctx))
	var got []string
	require.Eventually(t, func() bool {
		r, err := s.EventsRead(ctx, p)
		require.NoError(t, err)
		for _, e := range r.Events {
			got = append(got, e.JobID)
		}
		p = r.Next(p)
		return len(got) >= 2
	}, 10*time.Second, 5*time.Millisecond)
	require.Equal(t, []string{earlyJob, res[0].Job.ID}, got, "the early event first, none skipped")
}
