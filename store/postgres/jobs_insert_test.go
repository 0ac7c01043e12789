package postgres_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/jq-dev/jq/queue"
	"github.com/jq-dev/jq/store"
)

// A large batch is copied (COPY), a small one inserted by one statement: both store the same rows
// and submission events, resolve the queue's defaults the same way, and refuse an unknown queue
// without inserting anything.
func TestInsertCopyMatchesStatement(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	s := testStore
	q := fmt.Sprintf("copy-%d", time.Now().UnixNano())
	retries := 7
	_, err := s.QueueCreate(ctx, store.QueueCreateParams{Name: q, MaxRetries: &retries, TTL: time.Hour})
	require.NoError(t, err)

	batch := func(n int) []store.JobInsertParams {
		ps := make([]store.JobInsertParams, n)
		for i := range ps {
			p := store.JobInsertParams{Queue: q, Type: "noop", Payload: []byte(fmt.Sprintf("p%d", i)), Priority: i % 10}
			switch i % 4 {
			case 1:
				zero := 0
				p.MaxRetries, p.TTL = &zero, time.Minute
				p.Labels = map[string]string{"k": "v"}
			case 2:
				p.RunAt = time.Now().Add(time.Hour).Truncate(time.Microsecond).UTC()
				p.TraceContext = map[string]string{"traceparent": "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"}
				p.KeepResult = true
			case 3:
				p.Timeout = 3 * time.Second
				p.Principal = "token:p"
			}
			ps[i] = p
		}
		return ps
	}
	for _, n := range []int{8, 200} { // the statement, then COPY
		ps := batch(n)
		res, err := s.JobInsertMany(ctx, ps)
		require.NoError(t, err)
		require.Len(t, res, n)
		for i, r := range res {
			got, err := s.JobGet(ctx, r.Job.ID)
			require.NoError(t, err)
			require.Equal(t, r.Job.CreatedAt, got.CreatedAt, "n=%d job %d", n, i)
			require.Equal(t, r.Job.NotBefore, got.NotBefore, "n=%d job %d", n, i)
			require.Equal(t, r.Job.ExpiresAt, got.ExpiresAt, "n=%d job %d", n, i)
			require.Equal(t, r.Job.MaxRetries, got.MaxRetries, "n=%d job %d", n, i)
			require.Equal(t, r.Job.Timeout, got.Timeout, "n=%d job %d", n, i)
			require.Equal(t, ps[i].Payload, got.Payload)
			require.Equal(t, ps[i].Priority, got.Priority)
			require.Equal(t, ps[i].Principal, got.Principal)
			require.Equal(t, ps[i].KeepResult, got.KeepResult)
			require.Equal(t, len(ps[i].Labels), len(got.Labels))
			require.Equal(t, len(ps[i].TraceContext), len(got.TraceContext))
			require.Equal(t, queue.StatePending, got.State)
			switch i % 4 {
			case 0:
				require.Equal(t, 7, got.MaxRetries, "the queue's default")
				require.Equal(t, got.NotBefore.Add(time.Hour), got.ExpiresAt, "the queue's TTL")
			case 1:
				require.Zero(t, got.MaxRetries)
			}
			if i > 0 {
				require.True(t, res[i-1].Job.CreatedAt.Before(got.CreatedAt), "submit order is creation order")
			}
			evs, err := s.JobEvents(ctx, r.Job.ID)
			require.NoError(t, err)
			require.Len(t, evs, 1)
			require.EqualValues(t, 1, evs[0].Seq)
			require.Equal(t, queue.StatePending, evs[0].To)
			require.Equal(t, "submitted", evs[0].Reason)
			require.Equal(t, got.CreatedAt, evs[0].At)
		}
	}

	bad := batch(100)
	bad[50].Queue = "no-such-queue-" + q
	_, err = s.JobInsertMany(ctx, bad)
	require.ErrorIs(t, err, queue.ErrQueueNotFound)
	st, err := s.QueueStats(ctx, q)
	require.NoError(t, err)
	require.EqualValues(t, 208, st.Pending, "the refused batch inserted nothing")
}
