package faults

// Helpers of the fault tests (faults_test.go): a private PostgreSQL and
// redis-server per test (so a test may kill them), server and worker
// processes of the real binary with second-scale timeouts and the fault
// handler, and the verdict of internal/faultcheck.

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"connectrpc.com/connect"
	_ "github.com/jackc/pgx/v5/stdlib" // database/sql driver "pgx"
	"github.com/stretchr/testify/require"
	"google.golang.org/protobuf/types/known/durationpb"

	jqv1 "github.com/jq-dev/jq/api/gen/jq/v1"
	"github.com/jq-dev/jq/api/rpcclient"
	"github.com/jq-dev/jq/internal/faultcheck"
	"github.com/jq-dev/jq/internal/testenv"
	"github.com/jq-dev/jq/test/internal/jqbin"
)

// The second-scale timeouts every process of a fault test shares.
const (
	faultHeartbeatInterval = time.Second
	faultHeartbeatTimeout  = 3 * time.Second
	faultAssignmentTimeout = 3 * time.Second
	faultReaperInterval    = 200 * time.Millisecond
	faultTimeoutGrace      = time.Second
	faultWorkerGrace       = 2 * time.Second
	// faultSettle bounds the wait for every job of a test to end.
	faultSettle = 45 * time.Second
)

// rig is one fault test's system: private backends, servers, workers.
type rig struct {
	t       *testing.T
	pg      *testenv.PostgresProcess
	redis   *testenv.RedisProcess
	db      *sql.DB
	common  []string // the environment of every jq process
	servers []*rigServer
	workers map[string]*jqbin.Process
	marker  string // the fault handler's marker file
	logDir  string // where the process logs of a failed test go
}

type rigServer struct {
	se     jqbin.ServerEnv
	proc   *jqbin.Process
	client *rpcclient.Client
}

// newRig starts a private PostgreSQL and redis-server; extra is added to
// every jq process's environment.
func newRig(t *testing.T, extra ...string) *rig {
	t.Helper()
	jqbin.SkipWithoutServers(t)
	r := &rig{t: t, pg: testenv.StartPostgres(t), redis: testenv.StartRedis(t), workers: map[string]*jqbin.Process{}}
	r.marker = filepath.Join(t.TempDir(), "executions")
	db, err := sql.Open("pgx", r.pg.DSN())
	require.NoError(t, err)
	t.Cleanup(func() { _ = db.Close() })
	r.db = db
	r.common = append([]string{
		"JQ_DB_URL=" + r.pg.DSN(),
		"JQ_DB_CONNECT_TIMEOUT_MS=1000",
		"JQ_REDIS_ADDR=" + r.redis.Addr(),
		"JQ_REDIS_KEY_PREFIX=jq",
		"JQ_REDIS_CONNECT_TIMEOUT_MS=500",
		"JQ_SCHEDULER_INTERVAL_MS=100",
		"JQ_SCHEDULER_ASSIGNMENT_TIMEOUT_S=" + secs(faultAssignmentTimeout),
		"JQ_SCHEDULER_WORKER_HEARTBEAT_TIMEOUT_S=" + secs(faultHeartbeatTimeout),
		"JQ_SCHEDULER_REAPER_INTERVAL_MS=" + strconv.FormatInt(faultReaperInterval.Milliseconds(), 10),
		"JQ_SCHEDULER_TIMEOUT_GRACE_S=" + secs(faultTimeoutGrace),
		"JQ_WORKER_HEARTBEAT_INTERVAL_S=" + secs(faultHeartbeatInterval),
		"JQ_WORKER_SHUTDOWN_GRACE_S=" + secs(faultWorkerGrace),
		"JQ_SERVER_SHUTDOWN_GRACE_S=10",
		"JQ_WORKER_TEST_HANDLERS=true",
	}, extra...)
	return r
}

func secs(d time.Duration) string { return strconv.Itoa(int(d / time.Second)) }

// startServer starts one more server replica and waits until it serves; it
// returns the replica's index.
func (r *rig) startServer() int {
	r.t.Helper()
	se := jqbin.NewServerEnv(r.t, r.pg.DSN())
	se.Env = append(se.Env, r.common...)
	cl, err := rpcclient.New(rpcclient.Options{Addr: se.Addr()})
	require.NoError(r.t, err)
	r.t.Cleanup(cl.Close)
	s := &rigServer{se: se, client: cl}
	r.servers = append(r.servers, s)
	r.restartServer(len(r.servers) - 1)
	return len(r.servers) - 1
}

// restartServer starts replica i again, on the same ports, after it exited.
func (r *rig) restartServer(i int) {
	r.t.Helper()
	s := r.servers[i]
	s.proc = jqbin.Start(r.t, s.se.Env, "--role=server")
	r.keepLogOnFailure(s.proc, "server"+strconv.Itoa(i))
	s.proc.WaitLog(r.t, "server started")
}

func (r *rig) client() *rpcclient.Client { return r.servers[0].client }

// startWorker starts a worker process against server i.
func (r *rig) startWorker(server int, id string, concurrency int, queues string) *jqbin.Process {
	r.t.Helper()
	return r.startWorkerAt(r.servers[server].se.Addr(), id, concurrency, queues)
}

// startWorkerAt starts a worker process with --server-addr addrs (one address or a list).
func (r *rig) startWorkerAt(addrs, id string, concurrency int, queues string) *jqbin.Process {
	r.t.Helper()
	env := append(slices.Clone(r.common),
		"JQ_WORKER_HEALTH_PORT="+strconv.Itoa(jqbin.FreePort(r.t)),
		"JQ_WORKER_METRICS_PORT="+strconv.Itoa(jqbin.FreePort(r.t)))
	p := jqbin.Start(r.t, env, "--role=worker", "--server-addr", addrs, "--worker-id", id,
		"--concurrency", strconv.Itoa(concurrency), "--queues", queues)
	r.keepLogOnFailure(p, "worker-"+id)
	r.workers[id] = p
	return p
}

// keepLogOnFailure saves p's log to a file when the test fails; the test
// output names the file.
func (r *rig) keepLogOnFailure(p *jqbin.Process, name string) {
	r.t.Cleanup(func() {
		if !r.t.Failed() {
			return
		}
		if r.logDir == "" {
			dir, err := os.MkdirTemp("", "jq-fault-logs-")
			if err != nil {
				r.t.Logf("cannot keep the logs: %v", err)
				return
			}
			r.logDir = dir
			r.t.Logf("process logs of the failed test: %s", dir)
		}
		path := filepath.Join(r.logDir, fmt.Sprintf("%s-%d.log", name, p.Cmd.Process.Pid))
		if err := os.WriteFile(path, []byte(strings.Join(p.Output(), "\n")+"\n"), 0o644); err != nil {
			r.t.Logf("cannot keep the log of %s: %v", name, err)
		}
	})
}

func (r *rig) ctx() context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	r.t.Cleanup(cancel)
	return ctx
}

// createQueue creates a queue with a retry limit and backoff.
func (r *rig) createQueue(ctx context.Context, name string, maxRetries int32, base, maxDelay time.Duration) {
	r.t.Helper()
	_, err := r.client().Queues.CreateQueue(ctx, connect.NewRequest(&jqv1.CreateQueueRequest{
		Name: name, MaxRetries: &maxRetries, BackoffBase: durationpb.New(base), BackoffMax: durationpb.New(maxDelay),
	}))
	require.NoError(r.t, err)
}

// submit submits specs in batches through cl and returns the job ids in order.
func (r *rig) submit(ctx context.Context, cl *rpcclient.Client, specs []*jqv1.JobSpec) []string {
	r.t.Helper()
	var ids []string
	for off := 0; off < len(specs); off += 500 {
		resp, err := cl.Jobs.SubmitJobs(ctx, connect.NewRequest(&jqv1.SubmitJobsRequest{Jobs: specs[off:min(off+500, len(specs))]}))
		require.NoError(r.t, err)
		for _, res := range resp.Msg.GetResults() {
			ids = append(ids, res.GetJobId())
		}
	}
	require.Len(r.t, ids, len(specs))
	return ids
}

// fault is a spec of the fault handler on queue q.
type fault struct {
	Mode   string `json:"mode,omitempty"`
	MS     int    `json:"ms,omitempty"`
	Code   int    `json:"code,omitempty"`
	Marker string `json:"marker,omitempty"`
}

// faultJobs returns n fault-handler specs that record their executions in the
// rig's marker file.
func (r *rig) faultJobs(n int, q string, f fault) []*jqv1.JobSpec {
	f.Marker = r.marker
	payload, err := json.Marshal(f)
	require.NoError(r.t, err)
	specs := make([]*jqv1.JobSpec, n)
	for i := range specs {
		specs[i] = &jqv1.JobSpec{Queue: q, Type: "fault", Payload: payload}
	}
	return specs
}

// count runs a count(*) query against the rig's database.
func (r *rig) count(ctx context.Context, query string, args ...any) (int, error) {
	var n int
	err := r.db.QueryRowContext(ctx, query, args...).Scan(&n)
	return n, err
}

// unsettled counts the jobs among ids that are neither DONE nor DEAD_LETTERED.
func (r *rig) unsettled(ctx context.Context, ids []string) (int, error) {
	return r.count(ctx, `SELECT $2::int - count(*) FROM jobs WHERE id = ANY($1::uuid[]) AND state IN ('DONE', 'DEAD_LETTERED')`, ids, len(ids))
}

// waitSettled waits until every job of ids is DONE or DEAD_LETTERED, calling
// each (when not nil) on every poll, and returns how long that took.
func (r *rig) waitSettled(ctx context.Context, ids []string, timeout time.Duration, each func()) time.Duration {
	r.t.Helper()
	began := time.Now()
	testenv.Eventually(r.t, timeout, func() error {
		if each != nil {
			each()
		}
		n, err := r.unsettled(ctx, ids)
		if err != nil {
			return err
		}
		if n > 0 {
			return fmt.Errorf("%d of %d jobs not DONE or DEAD_LETTERED yet; %s", n, len(ids), r.states(ctx, ids))
		}
		return nil
	})
	return time.Since(began)
}

// states summarises the states of ids for failure messages.
func (r *rig) states(ctx context.Context, ids []string) string {
	rows, err := r.db.QueryContext(ctx, `SELECT state || '/' || coalesce(nullif(worker_id, ''), '-'), count(*) FROM jobs
WHERE id = ANY($1::uuid[]) GROUP BY 1 ORDER BY 1`, ids)
	if err != nil {
		return err.Error()
	}
	defer rows.Close()
	var parts []string
	for rows.Next() {
		var s string
		var n int
		if rows.Scan(&s, &n) == nil {
			parts = append(parts, fmt.Sprintf("%s=%d", s, n))
		}
	}
	if err := rows.Err(); err != nil {
		parts = append(parts, err.Error())
	}
	return "state/worker: " + strings.Join(parts, " ")
}

// check runs faultcheck over ids and requires no job lost, every event path
// legal, no stale result accepted and no handler run outside a lease.
func (r *rig) check(ctx context.Context, ids []string) *faultcheck.Report {
	r.t.Helper()
	rep, err := faultcheck.Check(ctx, r.db, ids)
	require.NoError(r.t, err)
	m, err := faultcheck.ReadMarker(r.marker)
	require.NoError(r.t, err)
	r.t.Logf("faultcheck: %v; handler starts in the marker file: %d", rep, m.Total())
	require.NoError(r.t, rep.Err())
	require.Empty(r.t, rep.Unleased(m), "handlers ran without a lease")
	return rep
}

// duplicateCauses returns, for the jobs that were assigned more than once, the
// reasons of the failures that made them run again (every re-run follows a
// RUNNING→FAILED event, or ASSIGNED→FAILED when the worker died before its
// start was acknowledged), and requires each to be among allowed: the causes
// the test's fault explains.
func duplicateCauses(t *testing.T, rep *faultcheck.Report, allowed ...string) map[string]int {
	t.Helper()
	causes := map[string]int{}
	for id := range rep.Duplicates() {
		for _, e := range rep.Histories[id].Events {
			if (e.From == "RUNNING" || e.From == "ASSIGNED") && e.To == "FAILED" {
				causes[e.Reason]++
			}
		}
	}
	for reason, n := range causes {
		require.Containsf(t, allowed, reason, "%d re-runs after a failure %q that this fault does not explain", n, reason)
	}
	return causes
}

// lostBy reports whether the job had an attempt of worker that the reaper failed as worker_lost.
func lostBy(h *faultcheck.History, worker string) bool {
	for _, e := range h.Events {
		if e.To == "FAILED" && e.Reason == "worker_lost" && e.WorkerID == worker {
			return true
		}
	}
	return false
}

// heldBy returns the jobs among ids that worker holds (ASSIGNED or RUNNING),
// with their attempts.
func (r *rig) heldBy(ctx context.Context, worker string) map[string]int {
	r.t.Helper()
	rows, err := r.db.QueryContext(ctx, `SELECT id::text, attempt FROM jobs WHERE worker_id = $1 AND state IN ('ASSIGNED', 'RUNNING')`, worker)
	require.NoError(r.t, err)
	defer rows.Close()
	held := map[string]int{}
	for rows.Next() {
		var id string
		var attempt int
		require.NoError(r.t, rows.Scan(&id, &attempt))
		held[id] = attempt
	}
	require.NoError(r.t, rows.Err())
	return held
}

// waitRerun waits until every job of held runs (or ran) again on another
// worker than from, under a newer attempt.
func (r *rig) waitRerun(ctx context.Context, held map[string]int, from string, timeout time.Duration) {
	r.t.Helper()
	testenv.Eventually(r.t, timeout, func() error {
		for id, attempt := range held {
			var state, worker string
			var now int
			if err := r.db.QueryRowContext(ctx, `SELECT state, worker_id, attempt FROM jobs WHERE id = $1`, id).Scan(&state, &worker, &now); err != nil {
				return err
			}
			if now <= attempt || worker == from || (state != "RUNNING" && state != "DONE") {
				return fmt.Errorf("job %s held by %s at attempt %d is %s on %q at attempt %d", id, from, attempt, state, worker, now)
			}
		}
		return nil
	})
}

// logLine decodes l when it is a JSON log line with this message.
func logLine(l, message string) map[string]any {
	m := map[string]any{}
	if err := json.Unmarshal([]byte(l), &m); err != nil || m["message"] != message {
		return nil
	}
	return m
}

// exitTime delivers the time p exits.
func exitTime(p *jqbin.Process) <-chan time.Time {
	ch := make(chan time.Time, 1)
	go func() {
		<-p.Done
		ch <- time.Now()
	}()
	return ch
}

// waitExitTime waits for an exit time from exitTime, at most timeout after
// since, and returns how long after since the process exited.
func waitExitTime(t *testing.T, exit <-chan time.Time, since time.Time, timeout time.Duration) time.Duration {
	t.Helper()
	select {
	case at := <-exit:
		return at.Sub(since)
	case <-time.After(time.Until(since.Add(timeout))):
		t.Fatalf("process did not exit within %v", timeout)
		return 0
	}
}
