package postgres

import (
	"context"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/jq-dev/jq/internal/testenv"
	"github.com/jq-dev/jq/migrations"
	"github.com/jq-dev/jq/queue"
	"github.com/jq-dev/jq/store"
)

// statsJobs is a history too long to count: a queue "big" with 60,000 DONE jobs, 3,000 PENDING
// (one in three delayed), 300 DEAD_LETTERED and 30 FAILED, beside a queue "small" of 500 DONE jobs;
// and 30,000 events, the newest of them finishing attempts of "big".
const statsJobs = `
INSERT INTO queues (name) VALUES ('big'), ('small');
INSERT INTO jobs (id, queue, type, state, max_retries, spec_hash, not_before, created_at,
                  started_at, completed_at)
SELECT gen_random_uuid(), q, 't', st, 3, '\x00',
       CASE WHEN st = 'PENDING' AND g % 3 = 0 THEN now() + interval '1 hour' ELSE now() - interval '1 minute' END,
       now() - interval '1 day' + g * interval '1 millisecond',
       now() - interval '1 day' + g * interval '1 millisecond',
       now() - interval '1 day' + g * interval '1 millisecond' + interval '20 ms'
FROM (SELECT g, CASE WHEN g <= 500 THEN 'small' ELSE 'big' END AS q,
             CASE WHEN g <= 60500 THEN 'DONE' WHEN g <= 63500 THEN 'PENDING'
                  WHEN g <= 63800 THEN 'DEAD_LETTERED' ELSE 'FAILED' END AS st
      FROM generate_series(1, 63830) g) s;
INSERT INTO job_events (job_id, seq, queue, type, from_state, to_state, created_at)
SELECT gen_random_uuid(), 2, 'big', 't', 'RUNNING', CASE WHEN g % 10 = 0 THEN 'FAILED' ELSE 'DONE' END,
       now() - interval '300 s' + g * interval '10 ms'
FROM generate_series(1, 30000) g;
ANALYZE jobs;
ANALYZE job_events;`

// TestQueueStatsOverLongHistory: past queue.ExactDoneLimit DONE jobs the count is an estimate (and
// says so) close to the truth, the live counts stay exact, the recent figures read at most
// queue.RecentEventsLimit events, and the statement never scans jobs.
func TestQueueStatsOverLongHistory(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	dsn := testenv.NewDatabase(t)
	require.NoError(t, migrations.Up(ctx, dsn))
	conn, err := pgx.Connect(ctx, dsn)
	require.NoError(t, err)
	defer conn.Close(context.WithoutCancel(ctx))
	_, err = conn.Exec(ctx, statsJobs)
	require.NoError(t, err)
	s, err := New(ctx, Config{DSN: dsn, MaxConns: 2})
	require.NoError(t, err)
	defer s.Close()

	st, err := s.QueueStats(ctx, "big")
	require.NoError(t, err)
	require.True(t, st.DoneEstimated)
	require.InEpsilon(t, 60000, st.Done, 0.1, "the estimate is near the 60,000 DONE jobs")
	require.EqualValues(t, 3000, st.Pending)
	require.EqualValues(t, 300, st.DeadLettered)
	require.EqualValues(t, 30, st.Failed)
	require.Equal(t, st.Done+st.DeadLettered, st.TotalProcessed)
	require.Positive(t, st.OldestPendingAge)
	// The newest RecentEventsLimit events, all finished attempts of "big", one in ten failed; the
	// sample is full, so the window is what it covers (200 s of the 300 s), not the hour.
	require.EqualValues(t, queue.RecentEventsLimit, st.Finished)
	require.EqualValues(t, queue.RecentEventsLimit/10, st.FailedAttempts)
	require.InDelta(t, 0.1, st.ErrorRate, 1e-9)
	require.Greater(t, st.Window, 150*time.Second)
	require.Less(t, st.Window, 250*time.Second)

	small, err := s.QueueStats(ctx, "small")
	require.NoError(t, err)
	require.False(t, small.DoneEstimated)
	require.EqualValues(t, 500, small.Done, "below the limit the count is exact")
	require.Zero(t, small.Finished)

	for _, q := range []string{"big", "small"} {
		var plan string
		rows, err := conn.Query(ctx, "EXPLAIN (COSTS OFF) "+sqlQueueStats, q, queue.ExactDoneLimit,
			queue.RecentEventsLimit, queue.RecentWindow.Microseconds(), queue.RecentRunTimesLimit)
		require.NoError(t, err)
		lines, err := pgx.CollectRows(rows, pgx.RowTo[string])
		require.NoError(t, err)
		for _, l := range lines {
			plan += l + "\n"
		}
		t.Logf("QueueStats(%s):\n%s", q, plan)
		require.NotContains(t, plan, "Seq Scan on jobs", q)
		require.NotContains(t, plan, "Seq Scan on job_events", q)
		for _, idx := range []string{"jobs_dispatch_idx", "jobs_worker_active_idx", "jobs_failed_idx", "jobs_dead_lettered_idx", "job_events_pkey"} {
			require.Contains(t, plan, idx, q)
		}
	}
}

// TestJobListScanBound: a list whose filters have no index stops at its bound with
// queue.ErrLimitReached and a message that says what to do; an indexed one is not bounded.
func TestJobListScanBound(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	dsn := testenv.NewDatabase(t)
	require.NoError(t, migrations.Up(ctx, dsn))
	conn, err := pgx.Connect(ctx, dsn)
	require.NoError(t, err)
	defer conn.Close(context.WithoutCancel(ctx))
	_, err = conn.Exec(ctx, statsJobs)
	require.NoError(t, err)
	s, err := New(ctx, Config{DSN: dsn, MaxConns: 2})
	require.NoError(t, err)
	defer s.Close()

	// Within its bound, a label matching none of the 63,830 jobs is an empty page.
	s.listScanBound = time.Minute
	page, err := s.JobList(ctx, store.JobListParams{Labels: map[string]string{"tenant": "none"}})
	require.NoError(t, err)
	require.Empty(t, page.Jobs)

	s.listScanBound = time.Millisecond
	for _, p := range []store.JobListParams{
		{Labels: map[string]string{"tenant": "none"}},
		{Type: "none"},
		{Type: "none", WithData: true},
		{CompletedAfter: time.Now().Add(time.Hour)},
	} {
		_, err = s.JobList(ctx, p)
		require.ErrorIs(t, err, queue.ErrLimitReached, "%+v", p)
		require.ErrorContains(t, err, "narrow the listing")
	}
	page, err = s.JobList(ctx, store.JobListParams{Queue: "big", States: []queue.State{queue.StatePending}})
	require.NoError(t, err, "queue and state are index ranges: not bounded")
	require.NotEmpty(t, page.Jobs)
}
