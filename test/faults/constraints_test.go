package faults

// Constraints with the real binary: server replicas and worker processes over a
// private PostgreSQL and redis-server (faults_helpers_test.go). What a constraint promises is read
// back from the event log: a job holds its key's slot from its ASSIGNED event until the event that
// takes it out of ASSIGNED or RUNNING, and no instant may see more holders than the limit.

import (
	"context"
	"database/sql"
	"fmt"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"syscall"
	"testing"
	"time"

	"connectrpc.com/connect"
	"github.com/stretchr/testify/require"
	_ "modernc.org/sqlite" // the embedded store's file, read-only

	jqv1 "github.com/jq-dev/jq/api/gen/jq/v1"
	"github.com/jq-dev/jq/api/rpcclient"
	"github.com/jq-dev/jq/internal/testenv"
	"github.com/jq-dev/jq/queue"
	"github.com/jq-dev/jq/store"
	"github.com/jq-dev/jq/store/postgres"
	"github.com/jq-dev/jq/test/internal/jqbin"
)

// createConstraint creates c through the store (the servers read it within a scheduler interval;
// the tests create it before any worker claims).
func (r *rig) createConstraint(ctx context.Context, c queue.Constraint) {
	r.t.Helper()
	st, err := postgres.New(ctx, postgres.Config{DSN: r.pg.DSN(), MaxConns: 2, ConnectTimeout: 5 * time.Second})
	require.NoError(r.t, err)
	defer st.Close()
	_, err = st.ConstraintCreate(ctx, store.ConstraintCreateParams{Constraint: c})
	require.NoError(r.t, err)
}

// labelled returns specs with label k set to values[i % len(values)]... in blocks: the first n of
// values[0], then n of values[1], and so on (a backlog of one key ahead of the others).
func labelled(specs []*jqv1.JobSpec, k string, values ...string) []*jqv1.JobSpec {
	per := len(specs) / len(values)
	for i, s := range specs {
		s.Labels = map[string]string{k: values[min(i/per, len(values)-1)]}
	}
	return specs
}

// slotSpan is one attempt's hold of its key's slot, from the event log.
type slotSpan struct {
	key        string
	start, end time.Time
}

// slotSpans reads, for the jobs ids, every attempt's span from its ASSIGNED event to the event that
// ended it (to DONE, FAILED, PENDING or DEAD_LETTERED from ASSIGNED or RUNNING), keyed by the job's
// label k. An attempt still open has no end (a zero time).
func (r *rig) slotSpans(ctx context.Context, ids []string, k string) []slotSpan {
	r.t.Helper()
	rows, err := r.db.QueryContext(ctx, `
SELECT e.job_id::text, coalesce(j.labels->>$2, ''), e.to_state, e.created_at
FROM event_rows e JOIN jobs j ON j.id = e.job_id
WHERE e.job_id = ANY($1::uuid[])
ORDER BY e.job_id, e.seq`, ids, k)
	require.NoError(r.t, err)
	return spansOf(r.t, rows, func(v any) time.Time { return v.(time.Time) })
}

// spansOf reads event rows (job id, key, to_state, created_at in event order per job) into slot
// spans; at converts the store's created_at.
func spansOf(t *testing.T, rows *sql.Rows, at func(any) time.Time) []slotSpan {
	t.Helper()
	defer rows.Close()
	open := map[string]*slotSpan{}
	var spans []slotSpan
	for rows.Next() {
		var id, key, to string
		var created any
		require.NoError(t, rows.Scan(&id, &key, &to, &created))
		switch {
		case to == "ASSIGNED":
			open[id] = &slotSpan{key: key, start: at(created)}
		case to == "RUNNING":
		case open[id] != nil:
			s := *open[id]
			s.end = at(created)
			spans = append(spans, s)
			delete(open, id)
		}
	}
	require.NoError(t, rows.Err())
	for _, s := range open {
		spans = append(spans, *s)
	}
	return spans
}

// maxHeld is, per key, the most spans open at one instant (an end at the same instant as a start
// counts first: the start was decided after the end was written).
func maxHeld(spans []slotSpan) map[string]int {
	type edge struct {
		at    time.Time
		delta int
	}
	byKey := map[string][]edge{}
	for _, s := range spans {
		byKey[s.key] = append(byKey[s.key], edge{s.start, 1})
		if !s.end.IsZero() {
			byKey[s.key] = append(byKey[s.key], edge{s.end, -1})
		}
	}
	out := map[string]int{}
	for key, es := range byKey {
		sort.Slice(es, func(i, j int) bool {
			if !es[i].at.Equal(es[j].at) {
				return es[i].at.Before(es[j].at)
			}
			return es[i].delta < es[j].delta
		})
		n := 0
		for _, e := range es {
			n += e.delta
			out[key] = max(out[key], n)
		}
	}
	return out
}

// firstAndLast are, per key, the earliest start and the latest end of its spans.
func firstAndLast(spans []slotSpan) (first, last map[string]time.Time) {
	first, last = map[string]time.Time{}, map[string]time.Time{}
	for _, s := range spans {
		if f, ok := first[s.key]; !ok || s.start.Before(f) {
			first[s.key] = s.start
		}
		if s.end.After(last[s.key]) {
			last[s.key] = s.end
		}
	}
	return first, last
}

// Concurrency per key across two server replicas and four workers: 3 tenants × 200 jobs, at most 2
// of a tenant's jobs at once (checked from the event log), every job DONE once, and tenant C — whose
// jobs were submitted behind A's and B's backlogs — runs beside them from the start.
func TestConstraintConcurrencyPerTenant(t *testing.T) {
	t.Parallel()
	r := newRig(t)
	r.startServer()
	r.startServer()
	ctx := r.ctx()
	r.createQueue(ctx, "tenants", 3, fastBackoffBase, fastBackoffMax)
	r.createConstraint(ctx, queue.Constraint{Name: "per-tenant", Match: queue.JobMatcher{Queue: "tenants"},
		Key: "{{.labels.tenant}}", Concurrency: 2})

	ids := r.submit(ctx, r.client(), labelled(r.faultJobs(600, "tenants", fault{Mode: "ok", MS: 20}), "tenant", "a", "b", "c"))
	for i := range 4 {
		r.startWorker(i%2, fmt.Sprintf("tenant-w%d", i), 8, "tenants")
	}
	took := r.waitSettled(ctx, ids, faultSettle, nil)

	rep := r.check(ctx, ids)
	require.Equal(t, len(ids), rep.Done)
	require.Empty(t, rep.Duplicates())
	spans := r.slotSpans(ctx, ids, "tenant")
	held := maxHeld(spans)
	first, last := firstAndLast(spans)
	t.Logf("concurrency per tenant: 600 jobs of 20 ms on 4 workers x 8 over 2 replicas in %v; most held at once %v", took.Round(10*time.Millisecond), held)
	for _, k := range []string{"a", "b", "c"} {
		require.Equal(t, 2, held[k], "tenant %s: most jobs holding a slot at once", k)
	}
	// Each tenant runs 2 at a time from the first claims on: C's first start is as early as A's
	// (a few claims), and C finishes with the others, not after them. Waiting behind A's backlog
	// would put C's first start at the end of A's run; the bound is a quarter of that run (a
	// second at least), so a loaded machine, which stretches both, does not fail it.
	runA, runC := last["a"].Sub(first["a"]), last["c"].Sub(first["a"])
	require.Less(t, first["c"].Sub(first["a"]), max(time.Second, runA/4), "tenant c waited behind tenant a's backlog (a ran %v)", runA)
	require.Less(t, runC, runA*5/4+time.Second, "tenant c finished long after tenant a (a %v, c %v)", runA, runC)

	// The metrics: the jobs the constraint held back, counted by the replicas that met them, and
	// its usage, measured with the queue depth (every few seconds).
	throttled := 0.0
	for _, s := range r.servers {
		throttled += jqbin.ScrapeValues(t, s.se.MetricsPort)[`jq_constraint_throttled_total{constraint="per-tenant"}`]
	}
	require.Positive(t, throttled)
	testenv.Eventually(t, 15*time.Second, func() error {
		v, ok := jqbin.ScrapeValues(t, r.servers[1].se.MetricsPort)[`jq_constraint_running{constraint="per-tenant"}`]
		if !ok || v != 0 {
			return fmt.Errorf("jq_constraint_running: %v (present %v)", v, ok)
		}
		return nil
	})
	t.Logf("jq_constraint_throttled_total over both replicas: %v", throttled)
}

// A rate of 50 per second on a job type, 1,000 such jobs due, two replicas: the measured rate of
// starts stays within the limit (10 % for the clock's granularity), and moves.
func TestConstraintRateAcrossReplicas(t *testing.T) {
	if testing.Short() {
		t.Skip("20 s at the limit")
	}
	t.Parallel()
	r := newRig(t)
	r.startServer()
	r.startServer()
	ctx := r.ctx()
	r.createQueue(ctx, "rated", 3, fastBackoffBase, fastBackoffMax)
	r.createConstraint(ctx, queue.Constraint{Name: "fault-rate", Match: queue.JobMatcher{Type: "fau?t"},
		Rate: queue.RateLimit{Limit: 50, Interval: time.Second, Burst: 10}})
	ids := r.submit(ctx, r.client(), r.faultJobs(1000, "rated", fault{Mode: "ok", MS: 1}))
	for i := range 2 {
		r.startWorker(i, fmt.Sprintf("rate-w%d", i), 8, "rated")
	}
	r.waitSettled(ctx, ids, time.Minute, nil)
	rep := r.check(ctx, ids)
	require.Equal(t, len(ids), rep.Done)

	spans := r.slotSpans(ctx, ids, "none")
	starts := make([]time.Time, len(spans))
	for i, s := range spans {
		starts[i] = s.start
	}
	slices.SortFunc(starts, func(a, b time.Time) int { return a.Compare(b) })
	// The bucket starts full (10 starts at once); after it, one token per 20 ms.
	rate := float64(len(starts)-10) / starts[len(starts)-1].Sub(starts[0]).Seconds()
	t.Logf("rate limit 50/s (burst 10) over 2 replicas: %d starts in %v: %.2f/s", len(starts),
		starts[len(starts)-1].Sub(starts[0]).Round(time.Millisecond), rate)
	// The limit is the guarantee: at most 50/s with both replicas (one bucket each would reach 100).
	// How near the starts come to it from below depends on the machine's load: progress only.
	require.LessOrEqual(t, rate, 50*1.1, "the two replicas share the limit")
	require.GreaterOrEqual(t, rate, 50/4.0, "the jobs make progress")
}

// kill -9 of a worker holding limited jobs: the reaper fails them after the heartbeat timeout, which
// frees their slots; the key's other jobs run on the other worker, and the limit holds throughout.
func TestFaultConstraintWorkerKill(t *testing.T) {
	t.Parallel()
	r := newRig(t)
	r.startServer()
	ctx := r.ctx()
	r.createQueue(ctx, "limited", 3, fastBackoffBase, fastBackoffMax)
	r.createConstraint(ctx, queue.Constraint{Name: "two", Match: queue.JobMatcher{Queue: "limited"},
		Key: "{{.labels.tenant}}", Concurrency: 2})
	ids := r.submit(ctx, r.client(), labelled(r.faultJobs(6, "limited", fault{Mode: "ok", MS: 2000}), "tenant", "a"))
	victim := r.startWorker(0, "limit-victim", 4, "limited")
	testenv.Eventually(t, 20*time.Second, func() error {
		n, err := r.count(ctx, `SELECT count(*) FROM jobs WHERE worker_id = 'limit-victim' AND state IN ('ASSIGNED', 'RUNNING')`)
		if err == nil && n < 2 {
			err = fmt.Errorf("the victim holds %d jobs", n)
		}
		return err
	})
	other := r.startWorker(0, "limit-other", 4, "limited")
	other.WaitLog(t, "assignment stream open")
	victim.Signal(t, syscall.SIGKILL)
	killed := time.Now()
	victim.WaitExit(t, 10*time.Second)
	held := r.heldBy(ctx, "limit-victim")
	require.Len(t, held, 2, "the victim held the key's two slots (its jobs run 2 s)")

	// The dead worker's jobs hold the key's slots until the reaper fails them.
	testenv.Eventually(t, faultSettle, func() error {
		n, err := r.count(ctx, `SELECT count(*) FROM jobs WHERE worker_id = 'limit-victim' AND state IN ('ASSIGNED', 'RUNNING')`)
		if err == nil && n > 0 {
			err = fmt.Errorf("the dead worker still holds %d jobs", n)
		}
		return err
	})
	freed := time.Since(killed)
	r.waitRerun(ctx, held, "limit-victim", faultSettle)
	r.waitSettled(ctx, ids, faultSettle, nil)
	rep := r.check(ctx, ids)
	require.Equal(t, len(ids), rep.Done)
	duplicateCauses(t, rep, "worker_lost", "assignment_timeout")
	held2 := maxHeld(r.slotSpans(ctx, ids, "tenant"))
	t.Logf("constraint worker kill: the dead worker's 2 slots were freed %v after the kill (heartbeat timeout %v); most held at once %v",
		freed.Round(10*time.Millisecond), faultHeartbeatTimeout, held2)
	require.Equal(t, 2, held2["a"])
	require.Greater(t, freed, faultHeartbeatTimeout-time.Second, "the slots came back before the heartbeat timeout: they were not held")
	require.Less(t, freed, faultRecoveryBound()+2*time.Second)
}

// FLUSHALL of Redis in the middle of limited jobs: the limits live in Postgres, so they hold.
func TestFaultConstraintRedisFlush(t *testing.T) {
	t.Parallel()
	r := newRig(t)
	r.startServer()
	ctx := r.ctx()
	r.createQueue(ctx, "flushed", 3, fastBackoffBase, fastBackoffMax)
	r.createConstraint(ctx, queue.Constraint{Name: "per-tenant-flush", Match: queue.JobMatcher{Queue: "flushed"},
		Key: "{{.labels.tenant}}", Concurrency: 3})
	ids := r.submit(ctx, r.client(), labelled(r.faultJobs(200, "flushed", fault{Mode: "ok", MS: 20}), "tenant", "a", "b"))
	for i := range 2 {
		r.startWorker(0, fmt.Sprintf("flush-w%d", i), 8, "flushed").WaitLog(t, "assignment stream open")
	}
	testenv.Eventually(t, 20*time.Second, func() error {
		done, err := r.count(ctx, `SELECT count(*) FROM jobs WHERE id = ANY($1::uuid[]) AND state = 'DONE'`, ids)
		if err == nil && done < 30 {
			err = fmt.Errorf("%d DONE", done)
		}
		return err
	})
	reply, err := jqbin.RedisCommand(r.redis.Addr(), "FLUSHALL")
	require.NoError(t, err)
	require.Equal(t, "+OK", reply)
	r.waitSettled(ctx, ids, faultSettle, nil)
	rep := r.check(ctx, ids)
	require.Equal(t, len(ids), rep.Done)
	held := maxHeld(r.slotSpans(ctx, ids, "tenant"))
	t.Logf("constraint after FLUSHALL: most held at once %v", held)
	require.Equal(t, map[string]int{"a": 3, "b": 3}, held)
}

// The embedded store keeps and enforces constraints too: `jq --role=server` on SQLite with two
// worker processes, the constraint created with the CLI, 3 tenants × 20 jobs at 2 per tenant, read
// back from the SQLite event log.
func TestEmbeddedConstraint(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	closed := strconv.Itoa(jqbin.FreePort(t))
	se := jqbin.NewServerEnv(t, "postgres://nobody@127.0.0.1:"+closed+"/none")
	env := append(slices.Clone(se.Env), "JQ_STORE_DRIVER=sqlite", "JQ_STORE_DATA_DIR="+dir,
		"JQ_REDIS_ADDR=127.0.0.1:"+closed, "JQ_SCHEDULER_INTERVAL_MS=100")
	srv := jqbin.Start(t, env, "--role=server")
	srv.WaitLog(t, "server started")
	cli := func(args ...string) jqbin.Result {
		return jqbin.Run(t, nil, append([]string{"--role=admin", "--server-addr", se.Addr()}, args...)...)
	}
	r := cli("constraint", "create", "per-tenant", "--match", "queue=default", "--key", "{{.labels.tenant}}", "--concurrency", "2")
	require.Equal(t, 0, r.Code, "%s", r.Stderr)

	cl, err := rpcclient.New(rpcclient.Options{Addr: se.Addr()})
	require.NoError(t, err)
	defer cl.Close()
	specs := make([]*jqv1.JobSpec, 60)
	for i := range specs {
		specs[i] = &jqv1.JobSpec{Queue: "default", Type: "sleep", Payload: []byte(`{"ms": 20}`),
			Labels: map[string]string{"tenant": []string{"a", "b", "c"}[i/20]}}
	}
	resp, err := cl.Jobs.SubmitJobs(t.Context(), connect.NewRequest(&jqv1.SubmitJobsRequest{Jobs: specs}))
	require.NoError(t, err)
	var ids []string
	for _, res := range resp.Msg.GetResults() {
		ids = append(ids, res.GetJobId())
	}
	for i := range 2 {
		jqbin.Start(t, []string{
			"JQ_WORKER_HEALTH_PORT=" + strconv.Itoa(jqbin.FreePort(t)),
			"JQ_WORKER_METRICS_PORT=" + strconv.Itoa(jqbin.FreePort(t)),
		}, "--role=worker", "--server-addr", se.Addr(), "--worker-id", fmt.Sprintf("w-emb-%d", i), "--concurrency", "8")
	}
	db, err := sql.Open("sqlite", "file:"+filepath.Join(dir, "jq.db")+"?mode=ro")
	require.NoError(t, err)
	defer db.Close()
	testenv.Eventually(t, 30*time.Second, func() error {
		var done int
		if err := db.QueryRow(`SELECT count(*) FROM jobs WHERE state = 'DONE' AND type = 'sleep'`).Scan(&done); err != nil {
			return err
		}
		if done < len(ids) {
			return fmt.Errorf("%d of %d DONE", done, len(ids))
		}
		return nil
	})
	rows, err := db.Query(`
SELECT e.job_id, coalesce(json_extract(j.labels, '$.tenant'), ''), e.to_state, e.created_at
FROM job_events e JOIN jobs j ON j.n = e.job_n
WHERE j.type = 'sleep'
ORDER BY e.job_n, e.seq`)
	require.NoError(t, err)
	held := maxHeld(spansOf(t, rows, func(v any) time.Time { return time.UnixMicro(v.(int64)) }))
	t.Logf("embedded store, 2 per tenant: most held at once %v", held)
	require.Equal(t, map[string]int{"a": 2, "b": 2, "c": 2}, held)
	show := cli("constraint", "show", "per-tenant")
	require.Equal(t, 0, show.Code, "%s", show.Stderr)
	require.Contains(t, show.Stdout, "per-tenant")
}
