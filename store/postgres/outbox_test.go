package postgres_test

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/jq-dev/jq/store"
)

// Transactions commit out of id order: an event whose transaction is still open when later ids
// commit is neither skipped nor overtaken. The relay publishes nothing past it until it commits,
// then it and the later events in id order.
func TestOutboxWaitsForEarlierIDs(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	s := privateStore(t)
	drain := func() {
		require.Eventually(t, func() bool {
			c, err := s.EventsClaim(ctx, store.EventsClaimParams{Limit: store.MaxOutboxBatch, Lease: time.Minute})
			require.NoError(t, err)
			require.NoError(t, s.EventsMarkPublished(ctx, c))
			bl, err := s.OutboxBacklog(ctx)
			require.NoError(t, err)
			return bl.Events == 0
		}, 10*time.Second, 5*time.Millisecond)
	}
	drain()

	// An event written by a transaction that stays open: its id is drawn now.
	early, err := s.Pool().Begin(ctx)
	require.NoError(t, err)
	defer func() { _ = early.Rollback(ctx) }()
	var earlyID int64
	require.NoError(t, early.QueryRow(ctx, `INSERT INTO job_events (job_id, seq, queue, type, to_state)
		VALUES (gen_random_uuid(), 1, 'q', 'noop', 'PENDING') RETURNING id`).Scan(&earlyID))

	// Later ids, committed.
	_, err = s.QueueCreate(ctx, store.QueueCreateParams{Name: "order"})
	require.NoError(t, err)
	_, err = s.JobInsertMany(ctx, []store.JobInsertParams{{Queue: "order", Type: "noop"}, {Queue: "order", Type: "noop"}})
	require.NoError(t, err)

	for range 20 { // claims while the early transaction runs publish nothing at or past it
		c, err := s.EventsClaim(ctx, store.EventsClaimParams{Limit: 100, Lease: time.Minute})
		require.NoError(t, err)
		for _, e := range c.Events {
			require.Less(t, e.ID, earlyID, "an event after a still-open id was claimed")
		}
		require.NoError(t, s.EventsMarkPublished(ctx, c))
	}
	require.NoError(t, early.Commit(ctx))

	var ids []int64
	require.Eventually(t, func() bool {
		c, err := s.EventsClaim(ctx, store.EventsClaimParams{Limit: 100, Lease: time.Minute})
		require.NoError(t, err)
		for _, e := range c.Events {
			ids = append(ids, e.ID)
		}
		require.NoError(t, s.EventsMarkPublished(ctx, c))
		return len(ids) == 3
	}, 10*time.Second, 5*time.Millisecond)
	require.Equal(t, earlyID, ids[0], "the early event comes first")
	require.Less(t, ids[0], ids[1])
	require.Equal(t, ids[1], ids[2], "one statement's events share its batch's id")

	// A rolled-back id is a gap the cursor moves over.
	late, err := s.Pool().Begin(ctx)
	require.NoError(t, err)
	_, err = late.Exec(ctx, `INSERT INTO job_events (job_id, seq, queue, type, to_state)
		VALUES (gen_random_uuid(), 1, 'q', 'noop', 'PENDING')`)
	require.NoError(t, err)
	require.NoError(t, late.Rollback(ctx))
	_, err = s.JobInsertMany(ctx, []store.JobInsertParams{{Queue: "order", Type: "noop"}})
	require.NoError(t, err)
	drain()
}

// The schema keeps what the cursor relies on: one id at a time, the xid taken before the id.
func TestOutboxIDsDrawnAfterTheXID(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	var cache int64
	var def string
	require.NoError(t, testStore.Pool().QueryRow(ctx, `SELECT seqcache FROM pg_sequence WHERE seqrelid = 'job_events_id_seq'::regclass`).Scan(&cache))
	require.Equal(t, int64(1), cache)
	require.NoError(t, testStore.Pool().QueryRow(ctx, `SELECT pg_get_expr(adbin, adrelid) FROM pg_attrdef
		WHERE adrelid = 'job_events'::regclass AND adnum = (SELECT attnum FROM pg_attribute WHERE attrelid = 'job_events'::regclass AND attname = 'id')`).Scan(&def))
	require.Contains(t, def, "pg_current_xact_id()")
	require.Less(t, strings.Index(def, "pg_current_xact_id()"), strings.Index(def, "nextval"))
}

// Every event carries its job's trace context (a batch's traces element), so the relay reads no
// jobs row for it: NULL when the job has none. A job_events row written without the column (before
// the migration that added it, or by an older binary during a rolling upgrade) holds the column's
// default, JSON null, and the relay reads that row's trace context from its job.
func TestOutboxTraceContextInEventRows(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	s := privateStore(t)
	_, err := s.QueueCreate(ctx, store.QueueCreateParams{Name: "trace"})
	require.NoError(t, err)
	trace := map[string]string{"traceparent": "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"}
	res, err := s.JobInsertMany(ctx, []store.JobInsertParams{
		{Queue: "trace", Type: "noop", TraceContext: trace},
		{Queue: "trace", Type: "noop"},
		{Queue: "trace", Type: "noop", TraceContext: trace},
	})
	require.NoError(t, err)
	traced, plain, old := res[0].Job.ID, res[1].Job.ID, res[2].Job.ID

	element := func(id, col string) string {
		var v *string
		require.NoError(t, s.Pool().QueryRow(ctx, `SELECT (`+col+`[array_position(job_ids, $1::uuid)])::text
			FROM event_batches WHERE $1::uuid = ANY(job_ids)`, id).Scan(&v))
		if v == nil {
			return "NULL"
		}
		return *v
	}
	var stored map[string]string
	require.NoError(t, json.Unmarshal([]byte(element(traced, "traces")), &stored))
	require.Equal(t, trace, stored)
	require.Equal(t, "NULL", element(plain, "traces"), "a job without a trace context has a NULL element")
	// An older binary's rows: one per event in job_events, without the column. old's submission is
	// such a row here, and the batch's element goes (as a delete of the job would take it).
	_, err = s.Pool().Exec(ctx, `INSERT INTO job_events (job_id, seq, queue, type, to_state, reason)
		VALUES ($1, 1, 'trace', 'noop', 'PENDING', 'submitted')`, old)
	require.NoError(t, err)
	_, err = s.Pool().Exec(ctx, `UPDATE event_batches SET n = 2, job_ids = job_ids[1:2], seqs = seqs[1:2], queues = queues[1:2],
		types = types[1:2], to_states = to_states[1:2], reasons = reasons[1:2], ats = ats[1:2], traces = traces[1:2]
		WHERE $1::uuid = ANY(job_ids)`, old)
	require.NoError(t, err)

	got := map[string]map[string]string{}
	require.Eventually(t, func() bool {
		c, err := s.EventsClaim(ctx, store.EventsClaimParams{Limit: store.MaxOutboxBatch, Lease: time.Minute})
		require.NoError(t, err)
		for _, e := range c.Events {
			got[e.JobID] = e.TraceContext
		}
		require.NoError(t, s.EventsMarkPublished(ctx, c))
		return len(got) == 3
	}, 10*time.Second, 5*time.Millisecond)
	require.Equal(t, trace, got[traced])
	require.Empty(t, got[plain])
	require.Equal(t, trace, got[old], "an old writer's row takes the trace context from its job")
}
