package postgres

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/jq-dev/jq/internal/testenv"
	"github.com/jq-dev/jq/migrations"
	"github.com/jq-dev/jq/queue"
	"github.com/jq-dev/jq/store"
	"github.com/jq-dev/jq/store/internal/sqlstore"
)

func TestDispatchEdgesAreLegal(t *testing.T) {
	t.Parallel()
	require.NoError(t, checkDispatchEdges())
}

// planJobs is a table of 200,000 jobs: a hot queue with 60,000 PENDING jobs (1 in 7 delayed) over a
// 100,000-job history, and 40,000 jobs spread over ten other queues.
const planJobs = `
INSERT INTO queues (name) SELECT 'q' || g FROM generate_series(0, 9) g;
INSERT INTO queues (name) VALUES ('hot');
INSERT INTO jobs (id, queue, type, priority, state, max_retries, spec_hash, not_before, created_at)
SELECT gen_random_uuid(), 'hot', 't', g % 10, 'PENDING', 3, '\x00',
       CASE WHEN g % 7 = 0 THEN now() + interval '1 hour' ELSE now() END,
       now() - g * interval '1 millisecond'
FROM generate_series(1, 60000) g;
INSERT INTO jobs (id, queue, type, priority, state, max_retries, spec_hash, created_at)
SELECT gen_random_uuid(), 'hot', 't', g % 10, 'DONE', 3, '\x00', now() - interval '1 day' - g * interval '1 millisecond'
FROM generate_series(1, 100000) g;
INSERT INTO jobs (id, queue, type, priority, state, max_retries, spec_hash, created_at)
SELECT gen_random_uuid(), 'q' || (g % 10), 't', g % 10, (ARRAY['PENDING', 'DONE', 'FAILED', 'RUNNING'])[g % 4 + 1],
       3, '\x00', now() - g * interval '1 millisecond'
FROM generate_series(1, 40000) g;
ANALYZE jobs;
ANALYZE queues;`

// TestDispatchPlans checks the plans of the dispatch statements on 200,000 jobs, with the custom
// plans a prepared statement starts with and with the generic plan it may switch to: JobDue walks
// jobs_dispatch_idx in order (no sort, no scan of the history); the batch statements reach each job
// through jobs_pkey and never scan the table; the depth snapshot reads only partial indexes.
func TestDispatchPlans(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	dsn := testenv.NewDatabase(t)
	require.NoError(t, migrations.Up(ctx, dsn))
	conn, err := pgx.Connect(ctx, dsn)
	require.NoError(t, err)
	defer conn.Close(context.WithoutCancel(ctx))
	_, err = conn.Exec(ctx, planJobs)
	require.NoError(t, err)

	explain := func(t *testing.T, query string) string {
		t.Helper()
		rows, err := conn.Query(ctx, query)
		require.NoError(t, err)
		lines, err := pgx.CollectRows(rows, pgx.RowTo[string])
		require.NoError(t, err)
		return strings.Join(lines, "\n")
	}
	ids := strings.Split(explain(t, `SELECT id::text FROM jobs WHERE queue = 'hot' LIMIT 1000`), "\n")
	idArray := "'{" + strings.Join(ids, ",") + "}'"
	repeat := func(v string) string { return "'{" + strings.Repeat(v+",", len(ids)-1) + v + "}'" }
	for _, stmt := range []string{
		"PREPARE due(text, integer) AS " + sqlJobDue,
		"PREPARE claim(text, text, integer, text[]) AS " + sqlJobClaim,
		"PREPARE assign(text, uuid[]) AS " + sqlJobAssignMany,
		"PREPARE ack(uuid[], integer[], text[], bigint[]) AS " + sqlJobAckMany,
		"PREPARE report(uuid[], integer[], text[], boolean[], bytea[], text[], text[], text[], boolean[], bigint[], bigint[], bigint[], text[]) AS " + sqlJobReportMany,
	} {
		_, err := conn.Exec(ctx, stmt)
		require.NoError(t, err)
	}

	for _, mode := range []string{"force_custom_plan", "force_generic_plan"} {
		_, err := conn.Exec(ctx, "SET plan_cache_mode = "+mode)
		require.NoError(t, err)

		plan := explain(t, "EXPLAIN (ANALYZE, BUFFERS, COSTS OFF, TIMING OFF) EXECUTE due('hot', 1000)")
		t.Logf("JobDue, %s:\n%s", mode, plan)
		require.Contains(t, plan, "Index Only Scan using jobs_dispatch_idx", mode)
		require.Contains(t, plan, "One-Time Filter", "the paused check runs once: %s", mode)
		require.NotContains(t, plan, "Sort", "the index gives the order: %s", mode)
		require.Contains(t, plan, "rows=1000 loops=1", mode)

		// The claim walks the same index in order and stops at its limit (EXPLAIN without ANALYZE:
		// executing it would assign the jobs), for a worker of every type and for a typed one.
		for _, types := range []string{"'{}'", "'{t,u}'"} {
			plan = explain(t, "EXPLAIN (COSTS OFF) EXECUTE claim('hot', 'w', 100, "+types+")")
			t.Logf("JobClaim, types %s, %s:\n%s", types, mode, plan)
			require.Contains(t, plan, "Index Scan using jobs_dispatch_idx", mode)
			require.Contains(t, plan, "LockRows", mode)
			require.NotContains(t, plan, "Seq Scan on jobs", mode)
			require.NotContains(t, claimedPart(plan), "Sort", "the index gives the order: %s", mode)
		}

		for name, execute := range map[string]string{
			"JobAssignMany": "EXECUTE assign('w', " + idArray + ")",
			"JobAckMany":    "EXECUTE ack(" + idArray + ", " + repeat("1") + ", " + repeat("w") + ", " + repeat("0") + ")",
			"JobReportMany": "EXECUTE report(" + idArray + ", " + repeat("1") + ", " + repeat("w") + ", " +
				repeat("true") + ", " + repeat(`\\x00`) + ", " + repeat("c") + ", " + repeat("e") + ", " + repeat("r") + ", " + repeat("false") + ", " + repeat("0") + ", " + repeat("0") + ", " + repeat("0") + ", " + repeat("RUNNING") + ")",
		} {
			plan := explain(t, "EXPLAIN (COSTS OFF) "+execute)
			t.Logf("%s, %s:\n%s", name, mode, plan)
			require.NotContains(t, plan, "Seq Scan on jobs", "%s, %s", name, mode)
			require.NotRegexp(t, `Index (Only )?Scan using jobs_(?:[a-z_]+_idx)`, plan, "only jobs_pkey: %s, %s", name, mode)
			require.Contains(t, plan, "Index Scan using jobs_pkey", "%s, %s", name, mode)
		}
	}

	// A job list filtered by live states (events tail, job list --status) reads their partial
	// indexes, not the history.
	liveList := "EXPLAIN (COSTS OFF) SELECT id FROM jobs WHERE " +
		sqlstore.StateFilterSQL([]queue.State{queue.StateAssigned, queue.StateRunning, queue.StateFailed}) +
		" ORDER BY created_at DESC, id DESC LIMIT 1001"
	plan := explain(t, liveList)
	t.Logf("JobList by live states:\n%s", plan)
	require.NotContains(t, plan, "Seq Scan on jobs")

	// The depth gauges' statement reads the live states' partial indexes, never the table.
	plan = explain(t, "EXPLAIN (COSTS OFF) "+sqlDepthSnapshot)
	t.Logf("DepthSnapshot:\n%s", plan)
	require.NotContains(t, plan, "Seq Scan on jobs")
	for _, idx := range []string{"jobs_dispatch_idx", "jobs_worker_active_idx", "jobs_failed_idx", "jobs_dead_lettered_idx"} {
		require.Contains(t, plan, idx)
	}

	// Last (it changes the data): with few live jobs in a long history the list combines the
	// partial indexes instead of walking the history.
	_, err = conn.Exec(ctx, `UPDATE jobs SET state = 'DONE' WHERE state IN ('RUNNING', 'FAILED') AND random() < 0.98;
ANALYZE jobs`)
	require.NoError(t, err)
	plan = explain(t, liveList)
	t.Logf("JobList by live states, few live jobs:\n%s", plan)
	require.NotContains(t, plan, "Seq Scan on jobs")
	require.Contains(t, plan, "BitmapOr")
	require.Contains(t, plan, "jobs_worker_active_idx")
	require.Contains(t, plan, "jobs_failed_idx")
}

// claimedPart is the part of JobClaim's plan that picks and locks the jobs (CTE locked); the
// statement's final sort of the at most Limit rows it returns is outside it.
func claimedPart(plan string) string {
	_, rest, _ := strings.Cut(plan, "CTE locked")
	locked, _, _ := strings.Cut(rest, "CTE updated")
	return locked
}

// TestHotPlansOnEmptyTable: right after the migrations the jobs table is empty and never analyzed.
// A prepared statement executed there more than five times may get a generic plan, made for that
// empty table: for the batch statements the planner's own choice scans jobs, and the plan stays in
// use as the table grows (shown first, on a connection of the main pool: the defect every fresh
// install had). The store runs those statements on its dispatch pool (dispatchParams): cached
// generic plans, made on the empty table here, that still reach jobs through its primary key once
// the table holds 20,000 jobs.
func TestHotPlansOnEmptyTable(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	dsn := testenv.NewDatabase(t)
	require.NoError(t, migrations.Up(ctx, dsn))
	st, err := New(ctx, Config{DSN: dsn, MaxConns: 1, DispatchConns: 1})
	require.NoError(t, err)
	defer st.Close()
	_, err = st.QueueCreate(ctx, store.QueueCreateParams{Name: "hot"})
	require.NoError(t, err)

	explain := func(conn *pgxpool.Conn, query string) string {
		rows, err := conn.Query(ctx, query)
		require.NoError(t, err)
		lines, err := pgx.CollectRows(rows, pgx.RowTo[string])
		require.NoError(t, err)
		return strings.Join(lines, "\n")
	}
	ids := "'{00000000-0000-4000-8000-000000000001,00000000-0000-4000-8000-000000000002}'"
	args := map[string]string{
		"job_claim":       "('hot', 'w', 100, '{}')",
		"job_assign_many": "('w', " + ids + ")",
		"job_ack_many":    "(" + ids + ", '{1,1}', '{w,w}', '{0,0}')",
		"job_report_many": `(` + ids + `, '{1,1}', '{w,w}', '{true,true}', '{"\\x00","\\x00"}', '{c,c}', '{e,e}', '{r,r}', '{false,false}', '{0,0}', '{0,0}', '{0,0}', '{ASSIGNED,ASSIGNED}')`,
	}

	// The store's statements, twenty times each on the empty table: cached on the dispatch pool's
	// one connection, generic plans only.
	none := []string{"00000000-0000-4000-8000-000000000001"}
	for i := range 20 {
		_, err := st.JobClaim(ctx, store.JobClaimParams{Queue: "hot", WorkerID: "w", Limit: 100, Types: [][]string{nil, {"t"}}[i%2]})
		require.NoError(t, err)
		_, err = st.JobAssignMany(ctx, store.JobAssignParams{WorkerID: "w", IDs: none})
		require.NoError(t, err)
		_, err = st.JobAckMany(ctx, []store.JobLease{{ID: none[0], Attempt: 1, WorkerID: "w"}})
		require.NoError(t, err)
		_, err = st.JobReportMany(ctx, []store.JobReportParams{{JobLease: store.JobLease{ID: none[0], Attempt: 1, WorkerID: "w"}, Success: true}})
		require.NoError(t, err)
	}
	hot, err := st.dispatch.Acquire(ctx)
	require.NoError(t, err)
	defer hot.Release()
	prepared := map[string]string{} // statement name (-- name: …) → prepared statement name
	rows, err := hot.Query(ctx, "SELECT name, statement, generic_plans, custom_plans FROM pg_prepared_statements")
	require.NoError(t, err)
	for rows.Next() {
		var name, sql string
		var generic, custom int64
		require.NoError(t, rows.Scan(&name, &sql, &generic, &custom))
		for stmt := range args {
			if strings.HasPrefix(sql, "-- name: "+stmt+"\n") {
				prepared[stmt] = name
				require.Zero(t, custom, "%s: planned per execution", stmt)
				require.Positive(t, generic, stmt)
			}
		}
	}
	require.NoError(t, rows.Err())
	require.Len(t, prepared, len(args), "every batch statement is a cached prepared statement: %v", prepared)

	// The defect, on the main pool's connection: the planner's generic plan for the empty table.
	main, err := st.pool.Acquire(ctx)
	require.NoError(t, err)
	defer main.Release()
	_, err = main.Exec(ctx, "SET plan_cache_mode = force_generic_plan")
	require.NoError(t, err)
	_, err = main.Exec(ctx, "PREPARE report(uuid[], integer[], text[], boolean[], bytea[], text[], text[], text[], boolean[], bigint[], bigint[], bigint[], text[]) AS "+sqlJobReportMany)
	require.NoError(t, err)
	_, err = main.Exec(ctx, "EXECUTE report"+args["job_report_many"])
	require.NoError(t, err)

	_, err = main.Exec(ctx, `INSERT INTO jobs (id, queue, type, priority, state, max_retries, spec_hash, created_at)
SELECT gen_random_uuid(), 'hot', 't', 0, 'RUNNING', 3, '\x00', now() FROM generate_series(1, 20000)`)
	require.NoError(t, err)
	plan := explain(main, "EXPLAIN (COSTS OFF) EXECUTE report"+args["job_report_many"])
	t.Logf("JobReportMany, the planner's generic plan made on the empty table, now on 20,000 jobs:\n%s", plan)
	require.Contains(t, plan, "Seq Scan on jobs", "the defect this test guards against")

	// The store's cached plans, made on the empty table, on 20,000 jobs: the primary key (the
	// claim: the dispatch index, in order).
	for stmt, name := range prepared {
		if stmt == "job_claim" {
			_, err := main.Exec(ctx, `INSERT INTO jobs (id, queue, type, priority, max_retries, spec_hash, created_at)
SELECT gen_random_uuid(), 'hot', 't', 0, 3, '\x00', now() FROM generate_series(1, 20000)`)
			require.NoError(t, err)
			// One generic plan for every worker, typed or not.
			for _, a := range []string{args[stmt], "('hot', 'w', 100, '{t}')"} {
				plan := explain(hot, "EXPLAIN (COSTS OFF) EXECUTE "+name+a)
				t.Logf("%s%s, generic plan made on the empty table, now on 40,000 jobs:\n%s", stmt, a, plan)
				require.NotContains(t, plan, "Seq Scan on jobs", stmt)
				require.Contains(t, plan, "Index Scan using jobs_dispatch_idx", stmt)
				require.NotContains(t, claimedPart(plan), "Sort", stmt)
			}
			continue
		}
		plan := explain(hot, "EXPLAIN (COSTS OFF) EXECUTE "+name+args[stmt])
		t.Logf("%s, generic plan made on the empty table, now on 20,000 jobs:\n%s", stmt, plan)
		require.NotContains(t, plan, "Seq Scan on jobs", stmt)
		require.NotContains(t, plan, "Hash", stmt)
		require.Contains(t, plan, "Index Scan using jobs_pkey", stmt)
	}
}
