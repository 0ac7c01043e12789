package main

import (
	"context"
	"fmt"
	"regexp"
	"slices"
	"strconv"
	"time"
)

type nfr012Result struct {
	Rows          int                `json:"rows"`
	Pending       int                `json:"pending_rows"`
	InsertSeconds float64            `json:"insert_seconds"`
	TableMiB      float64            `json:"table_and_indexes_mib"`
	ExecMs        map[string]float64 `json:"execution_ms_median_of_5"`
	Plans         map[string]string  `json:"plans"`
}

// The statements timed at size: the scheduler's due query (store/postgres/dispatch.go sqlJobDue,
// batch 100 = scheduler.batch_size's default) and the metrics depth snapshot (depth.go).
var nfr012Statements = map[string]string{
	"job_due": `SELECT j.id::text, j.priority, j.created_at FROM jobs j
WHERE j.queue = 'default' AND j.state = 'PENDING' AND j.not_before <= now()
  AND NOT EXISTS (SELECT 1 FROM queues WHERE name = 'default' AND paused)
ORDER BY j.priority DESC, j.created_at, j.id LIMIT 100`,
	"depth_snapshot": `SELECT 'queue', name, '', 0::bigint FROM queues
UNION ALL SELECT 'jobs', q.name, 'PENDING', p.n FROM queues q
CROSS JOIN LATERAL (SELECT count(*) AS n FROM jobs j WHERE j.queue = q.name AND j.state = 'PENDING') p WHERE p.n > 0
UNION ALL SELECT 'jobs', queue, state, count(*) FROM jobs WHERE state IN ('ASSIGNED', 'RUNNING') GROUP BY queue, state
UNION ALL SELECT 'jobs', queue, 'FAILED', count(*) FROM jobs WHERE state = 'FAILED' GROUP BY queue
UNION ALL SELECT 'jobs', queue, 'DEAD_LETTERED', count(*) FROM jobs WHERE state = 'DEAD_LETTERED' GROUP BY queue
UNION ALL SELECT 'workers', '', '', count(*) FROM workers WHERE status IN ('ONLINE', 'DRAINING')`,
}

var execTimeRE = regexp.MustCompile(`Execution Time: ([0-9.]+) ms`)

// NFR-012: the hot statements against a jobs table of cfg.rows rows, 10 % PENDING, the rest DONE.
// The schema is the server's own (one server start migrates the fresh database).
func runNFR012(_ context.Context, cfg *config) (any, error) {
	var out []nfr012Result
	for _, rows := range cfg.rows {
		e, err := newEnv(cfg, fmt.Sprintf("nfr012_%d", rows))
		if err != nil {
			return nil, err
		}
		if err := startServer(e); err != nil { // migrates, creates the default queue
			return nil, err
		}
		e.stopAll()
		t0 := time.Now()
		if _, err := e.sql(fmt.Sprintf(`INSERT INTO jobs (id, queue, type, payload, state, max_retries, spec_hash, attempt,
  created_at, updated_at, not_before, started_at, completed_at, worker_id)
SELECT gen_random_uuid(), 'default', 'sleep', '{"ms":0}'::bytea, s, 3, '\x00'::bytea, CASE WHEN s = 'DONE' THEN 1 ELSE 0 END,
  t, t, t, CASE WHEN s = 'DONE' THEN t END, CASE WHEN s = 'DONE' THEN t + interval '1 ms' END,
  CASE WHEN s = 'DONE' THEN 'eval-w' || (g %% 8) ELSE '' END
FROM (SELECT g, CASE WHEN g %% 10 = 0 THEN 'PENDING' ELSE 'DONE' END AS s,
             now() - interval '1 hour' + g * interval '1 ms' AS t FROM generate_series(1, %d) g) x`, rows)); err != nil {
			return nil, err
		}
		r := nfr012Result{Rows: rows, Pending: rows / 10, InsertSeconds: time.Since(t0).Seconds(),
			ExecMs: map[string]float64{}, Plans: map[string]string{}}
		if _, err := e.sql("VACUUM ANALYZE jobs"); err != nil {
			return nil, err
		}
		mib, err := e.sql("SELECT pg_total_relation_size('jobs') / 1048576.0")
		if err != nil {
			return nil, err
		}
		r.TableMiB, _ = strconv.ParseFloat(mib, 64)
		stmts := map[string]string{}
		for name, stmt := range nfr012Statements {
			stmts[name] = "EXPLAIN (ANALYZE, BUFFERS) " + stmt
			// The server's dispatch connections run with jit off (store/postgres/postgres.go);
			// the psql default (jit on) is timed too.
			stmts[name+"_jit_off"] = "SET jit = off; EXPLAIN (ANALYZE, BUFFERS) " + stmt
		}
		for name, stmt := range stmts {
			var times []float64
			for range 5 {
				plan, err := e.sql(stmt)
				if err != nil {
					return nil, err
				}
				m := execTimeRE.FindStringSubmatch(plan)
				if m == nil {
					return nil, fmt.Errorf("no execution time in %q", plan)
				}
				v, _ := strconv.ParseFloat(m[1], 64)
				times = append(times, v)
				r.Plans[name] = plan
			}
			slices.Sort(times)
			r.ExecMs[name] = times[len(times)/2]
		}
		fmt.Printf("  rows=%d insert=%.1f s size=%.0f MiB exec(ms)=%v\n", rows, r.InsertSeconds, r.TableMiB, r.ExecMs)
		out = append(out, r)
	}
	return out, nil
}
