package e2e

// End-to-end tests of the operator CLI: a real server and real
// worker processes, driven only through `jq --role=admin` commands of the
// real binary. `task test-e2e` runs them (-run E2E).

import (
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/jq-dev/jq/internal/testenv"
	"github.com/jq-dev/jq/test/internal/jqbin"
)

// adminCLI runs admin commands against one server.
type adminCLI struct {
	t    *testing.T
	addr string
}

// run runs `jq --role=admin --server-addr <addr> args…`.
func (a adminCLI) run(args ...string) jqbin.Result {
	a.t.Helper()
	return jqbin.Run(a.t, nil, append([]string{"--role=admin", "--server-addr", a.addr}, args...)...)
}

// ok runs a command that must succeed and returns its stdout.
func (a adminCLI) ok(args ...string) string {
	a.t.Helper()
	r := a.run(args...)
	require.Equal(a.t, 0, r.Code, "jq %v: %s", args, r.Stderr)
	return r.Stdout
}

// fails runs a command that must exit with code and print one line on
// stderr containing want; nothing goes to stdout.
func (a adminCLI) fails(code int, want string, args ...string) {
	a.t.Helper()
	r := a.run(args...)
	require.Equal(a.t, code, r.Code, "jq %v: stdout %q stderr %q", args, r.Stdout, r.Stderr)
	require.Equal(a.t, 1, strings.Count(r.Stderr, "\n"), "one line on stderr: %q", r.Stderr)
	require.True(a.t, strings.HasPrefix(r.Stderr, "jq: "), r.Stderr)
	require.Contains(a.t, r.Stderr, want)
}

// json runs a command with --output json, checks that the output parses
// and carries every field in fields, and returns it.
func (a adminCLI) json(fields []string, args ...string) map[string]any {
	a.t.Helper()
	out := a.ok(append(args, "--output", "json")...)
	var m map[string]any
	require.NoError(a.t, json.Unmarshal([]byte(out), &m), "jq %v --output json: %s", args, out)
	for _, f := range fields {
		require.Contains(a.t, m, f, "jq %v --output json lacks %q: %s", args, f, out)
	}
	return m
}

// The documented fields of the JSON answers (the protobuf messages, with
// proto field names and every field present).
var (
	jobFields   = []string{"id", "queue", "type", "payload", "priority", "state", "max_retries", "retry_count", "attempt", "worker_id", "last_error", "failure_reason", "created_at", "updated_at", "started_at", "completed_at", "result"}
	queueFields = []string{"name", "max_retries", "ttl", "priority_weights", "backoff_base", "backoff_max", "paused", "created_at", "updated_at"}
	statsFields = []string{"queue", "pending", "assigned", "running", "done", "failed", "dead_lettered", "total_processed", "avg_processing_time", "error_rate", "oldest_pending_age"}
	eventFields = []string{"job_id", "queue", "seq", "from_state", "to_state", "timestamp", "worker_id", "reason", "attempt", "type"}
	wrkFields   = []string{"id", "hostname", "status", "concurrency", "queues", "running_jobs", "version", "started_at", "last_heartbeat_at"}
)

func requireFields(t *testing.T, v any, fields []string) map[string]any {
	t.Helper()
	m, ok := v.(map[string]any)
	require.True(t, ok, "not an object: %v", v)
	for _, f := range fields {
		require.Contains(t, m, f)
	}
	return m
}

func jsonList(t *testing.T, m map[string]any, key string) []map[string]any {
	t.Helper()
	raw, ok := m[key].([]any)
	require.True(t, ok, "%q is not a list: %v", key, m[key])
	out := make([]map[string]any, len(raw))
	for i, v := range raw {
		out[i] = requireFields(t, v, nil)
	}
	return out
}

func jsonIDs(jobs []map[string]any) []string {
	out := make([]string, len(jobs))
	for i, j := range jobs {
		out[i] = j["id"].(string)
	}
	return out
}

// jsonNum reads a JSON number; 64-bit integers arrive as strings (proto3
// JSON mapping).
func jsonNum(t *testing.T, v any) float64 {
	t.Helper()
	switch n := v.(type) {
	case float64:
		return n
	case string:
		f, err := strconv.ParseFloat(n, 64)
		require.NoError(t, err)
		return f
	}
	t.Fatalf("not a number: %#v", v)
	return 0
}

var uuidLine = regexp.MustCompile(`^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}\n$`)

// submit runs `job submit` and checks that stdout is the job id and nothing
// else (FR-008).
func (a adminCLI) submit(args ...string) string {
	a.t.Helper()
	out := a.ok(append([]string{"job", "submit"}, args...)...)
	require.Regexp(a.t, uuidLine, out, "job submit prints the id and nothing else")
	return strings.TrimSpace(out)
}

// waitState polls `job status` until the job is in state and returns it.
func (a adminCLI) waitState(id, state string) map[string]any {
	a.t.Helper()
	var job map[string]any
	testenv.Eventually(a.t, 30*time.Second, func() error {
		m := a.json([]string{"job"}, "job", "status", id)
		job = requireFields(a.t, m["job"], jobFields)
		if job["state"] != "JOB_STATE_"+state {
			return fmt.Errorf("job %s is %v, want %s", id, job["state"], state)
		}
		return nil
	})
	return job
}

func newAdminE2E(t *testing.T) (*cluster, adminCLI) {
	t.Helper()
	c := newCluster(t)
	se := c.startServer("JQ_SCHEDULER_REAPER_INTERVAL_MS=200")
	return c, adminCLI{t: t, addr: se.Addr()}
}

func (c *cluster) startFastWorker(id, queues string, extraEnv ...string) *jqbin.Process {
	c.t.Helper()
	env := []string{
		"JQ_WORKER_HEALTH_PORT=" + fmt.Sprint(jqbin.FreePort(c.t)),
		"JQ_WORKER_METRICS_PORT=" + fmt.Sprint(jqbin.FreePort(c.t)),
		"JQ_WORKER_HEARTBEAT_INTERVAL_S=1",
	}
	env = append(env, extraEnv...)
	return jqbin.Start(c.t, env, "--role=worker", "--server-addr", c.servers[0].Addr(), "--worker-id", id,
		"--concurrency", "4", "--queues", queues)
}

// Jobs: submit → DONE with its result; a failing exec job dead-letters and is
// listed; logs, retry and cancel (pending and running).
func TestAdminJobsE2E(t *testing.T) {
	t.Parallel()
	c, a := newAdminE2E(t)
	q := a.json([]string{"queue"}, "queue", "create", "e2e", "--max-retries", "0", "--backoff-base", "100ms")
	requireFields(t, q["queue"], queueFields)
	a.fails(1, `queue "e2e" already exists`, "queue", "create", "e2e")
	echo, fail := program(t, "echo"), program(t, "false")
	c.startFastWorker("w-jobs", "default,e2e", execEnv(echo, fail)...)

	// Submit → DONE, with the handler's output as the result.
	payload := fmt.Sprintf(`{"argv":[%q,"hello"]}`, echo)
	id := a.submit("--queue", "e2e", "--type", "exec", "--payload", payload, "--label", "team=ops", "--keep-result")
	job := a.waitState(id, "DONE")
	res := requireFields(t, job["result"], []string{"data", "checksum_sha256", "runtime", "completed_at"})
	data, err := base64.StdEncoding.DecodeString(res["data"].(string))
	require.NoError(t, err)
	require.Equal(t, "hello\n", string(data))
	require.Equal(t, "w-jobs", job["worker_id"])
	table := a.ok("job", "status", id)
	for _, w := range []string{id, "e2e", "exec", "DONE", "hello", payload, "CREATED", "STARTED", "COMPLETED"} {
		require.Contains(t, table, w)
	}
	require.Regexp(t, `COMPLETED +\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ \((just now|\d+[smhd] ago)\)`, table, "absolute and relative times")

	// A failing exec job with no retries ends DEAD_LETTERED and is listed.
	bad := a.submit("--queue", "e2e", "--type", "exec", "--payload", fmt.Sprintf(`{"argv":[%q]}`, fail))
	dead := a.waitState(bad, "DEAD_LETTERED")
	require.Equal(t, "max_retries_exceeded", dead["failure_reason"], "no retries: out of retries at the first failure")
	listed := a.json([]string{"jobs", "next_page_token"}, "job", "list", "--status", "DEAD_LETTERED")
	require.Equal(t, []string{bad}, jsonIDs(jsonList(t, listed, "jobs")))
	require.Contains(t, a.ok("job", "list", "--queue", "e2e", "--status", "dead_lettered"), bad)

	// Type, label, time and scheduled filters.
	require.Equal(t, []string{bad, id}, jsonIDs(jsonList(t, a.json([]string{"jobs"}, "job", "list", "--queue", "e2e", "--type", "exec"), "jobs")))
	require.Equal(t, []string{id}, jsonIDs(jsonList(t, a.json([]string{"jobs"}, "job", "list", "--label", "team=ops"), "jobs")))
	require.Empty(t, jsonList(t, a.json([]string{"jobs"}, "job", "list", "--type", "exec", "--created-before", "1h"), "jobs"))
	require.Len(t, jsonList(t, a.json([]string{"jobs"}, "job", "list", "--queue", "e2e", "--completed-after", "10m",
		"--completed-before", time.Now().Add(time.Minute).UTC().Format(time.RFC3339)), "jobs"), 2)
	later := a.submit("--queue", "e2e", "--type", "noop", "--payload", "{}", "--run-at", time.Now().Add(time.Hour).UTC().Format(time.RFC3339))
	require.Equal(t, []string{later}, jsonIDs(jsonList(t, a.json([]string{"jobs"}, "job", "list", "--scheduled"), "jobs")))
	a.fails(2, "--created-after", "job", "list", "--created-after", "yesterday")

	// Its log: every transition in order.
	logs := a.json([]string{"events"}, "job", "logs", bad)
	var path []string
	for _, e := range jsonList(t, logs, "events") {
		requireFields(t, e, eventFields)
		path = append(path, strings.TrimPrefix(e["to_state"].(string), "JOB_STATE_"))
	}
	require.Equal(t, []string{"PENDING", "ASSIGNED", "RUNNING", "FAILED", "DEAD_LETTERED"}, path)
	require.Contains(t, a.ok("job", "logs", bad), "submitted")

	// Retry: PENDING again with a reset counter; it runs (and fails) again.
	retried := a.json([]string{"job"}, "job", "retry", bad)
	require.Equal(t, "JOB_STATE_PENDING", requireFields(t, retried["job"], jobFields)["state"])
	again := a.waitState(bad, "DEAD_LETTERED")
	require.EqualValues(t, 2, again["attempt"])
	a.fails(1, "cannot retry job "+id, "job", "retry", id) // DONE

	// Cancel a PENDING job (its queue paused), then a RUNNING one.
	requireFields(t, a.json([]string{"queue"}, "queue", "pause", "e2e")["queue"], queueFields)
	pending := a.submit("--queue", "e2e", "--type", "noop", "--payload", "{}")
	cancelled := a.json([]string{"job", "cancel_requested"}, "job", "cancel", pending)
	require.Equal(t, false, cancelled["cancel_requested"])
	require.Equal(t, "cancelled", requireFields(t, cancelled["job"], jobFields)["failure_reason"])
	a.fails(1, "cannot cancel job "+pending, "job", "cancel", pending)
	require.Contains(t, a.ok("job", "logs", pending), "cancelled (CANCELLED)", "FR-012's name beside jq's")
	require.Contains(t, a.ok("queue", "resume", "e2e"), "resumed")

	// A permanent failure is dead-lettered at once, and peek --dead says why.
	perm := a.submit("--queue", "e2e", "--type", "sleep", "--payload", `{"fail":true,"retryable":false}`)
	a.waitState(perm, "DEAD_LETTERED")
	require.Regexp(t, perm+` +sleep +\S.* permanent_failure +0/`, a.ok("peek", "e2e", "--dead"))

	running := a.submit("--queue", "e2e", "--type", "sleep", "--payload", `{"ms":60000}`)
	a.waitState(running, "RUNNING")
	require.Contains(t, a.ok("job", "cancel", running), "asked to stop")
	stopped := a.waitState(running, "DEAD_LETTERED")
	require.Equal(t, "cancelled", stopped["failure_reason"])

	// Pagination: a page per --limit, with a hint on stderr.
	r := a.run("job", "list", "--queue", "e2e", "--limit", "2")
	require.Equal(t, 0, r.Code, r.Stderr)
	require.Contains(t, r.Stderr, "--page-token ")
	token := strings.TrimSpace(r.Stderr[strings.Index(r.Stderr, "--page-token ")+len("--page-token "):])
	page2 := a.json([]string{"jobs"}, "job", "list", "--queue", "e2e", "--limit", "2", "--page-token", token)
	page1 := a.json([]string{"jobs", "next_page_token"}, "job", "list", "--queue", "e2e", "--limit", "2")
	require.Len(t, jsonList(t, page1, "jobs"), 2)
	require.NotEmpty(t, jsonList(t, page2, "jobs"))
	require.NotContains(t, jsonIDs(jsonList(t, page2, "jobs")), jsonIDs(jsonList(t, page1, "jobs"))[0])

	// Errors: one line, the documented exit codes.
	missing := "0b0e7f5e-6a53-4b0e-9f0a-3d4b8a3b1c2d"
	a.fails(3, `job "`+missing+`" not found`, "job", "status", missing)
	a.fails(3, `queue "nope" not found`, "job", "submit", "--queue", "nope", "--payload", "{}")
	a.fails(2, "not a UUID", "job", "status", "not-a-uuid")
	a.fails(2, "--payload is not valid JSON", "job", "submit", "--payload", "{oops")
	a.fails(2, "--limit 0", "job", "list", "--limit", "0")
	a.fails(2, "--status", "job", "list", "--status", "SLEEPING")
	a.fails(1, "no answer from", "--timeout", "1ns", "job", "status", id)
	a.json([]string{"job_id", "existing"}, "job", "submit", "--queue", "e2e", "--type", "noop", "--payload", "{}")
}

// Queues and the S4 admin commands: stats figures match what was submitted,
// delete refuses a non-empty queue, peek, stats, purge-dlq.
func TestAdminQueuesE2E(t *testing.T) {
	t.Parallel()
	c, a := newAdminE2E(t)
	require.Contains(t, a.ok("queue", "create", "counted", "--max-retries", "0", "--ttl", "1h", "--priority-weights", "9=5,0=1",
		"--max-wait", "10m"), "priority weights 9=5,0=1, max wait 10m0s")
	a.ok("queue", "create", "peeked")
	queues := a.json([]string{"queues"}, "queue", "list")
	var names []string
	for _, q := range jsonList(t, queues, "queues") {
		requireFields(t, q, queueFields)
		names = append(names, q["name"].(string))
	}
	require.Equal(t, []string{"counted", "default", "peeked"}, names)
	require.Contains(t, a.ok("queue", "list"), "9=5,0=1")
	require.Contains(t, a.ok("queue", "list", "--output", "yaml"), "name: counted\n")
	// Update: only the flags given change; refused as create refuses, nothing changed.
	require.Contains(t, a.ok("queue", "update", "counted", "--priority-weights", "9=3,0=1", "--max-wait", "0"),
		"queue counted updated: max retries 0, ttl 1h0m0s")
	require.Contains(t, a.ok("queue", "list"), "9=3,0=1")
	a.fails(2, "priority 9 is listed twice", "queue", "update", "counted", "--priority-weights", "9=3,9=1")
	a.fails(2, "priority 9 is listed twice", "queue", "create", "twice", "--priority-weights", "9=3,9=1")
	a.fails(2, "nothing to change", "queue", "update", "counted")
	a.fails(2, "backoff_max 5m0s is below backoff_base 1h0m0s", "queue", "update", "counted", "--backoff-base", "1h")
	a.fails(3, `queue "nope" not found`, "queue", "update", "nope", "--max-retries", "1")
	require.Contains(t, a.ok("queue", "list"), "9=3,0=1", "a refused update changes nothing")
	c.startFastWorker("w-queues", "counted")

	var jobs []string
	for range 3 {
		jobs = append(jobs, a.submit("--queue", "counted", "--type", "noop", "--payload", "{}"))
	}
	bad := a.submit("--queue", "counted", "--type", "sleep", "--payload", `{"fail":true}`)
	for _, id := range jobs {
		a.waitState(id, "DONE")
	}
	a.waitState(bad, "DEAD_LETTERED")
	st := requireFields(t, a.json([]string{"stats"}, "queue", "stats", "counted")["stats"], statsFields)
	require.EqualValues(t, 3, jsonNum(t, st["done"]))
	require.EqualValues(t, 1, jsonNum(t, st["dead_lettered"]))
	require.EqualValues(t, 0, jsonNum(t, st["pending"]))
	require.EqualValues(t, 4, jsonNum(t, st["total_processed"]))
	require.InDelta(t, 0.25, st["error_rate"], 1e-9)
	require.Equal(t, false, st["done_estimated"], "4 jobs are counted, not estimated")
	require.EqualValues(t, 4, jsonNum(t, st["finished"]))
	require.EqualValues(t, 1, jsonNum(t, st["failed_attempts"]))
	statsTable := a.ok("queue", "stats", "counted")
	for _, w := range []string{"25.0%", "RECENT WINDOW", "FINISHED ATTEMPTS", "4 (1 failed)", "THROUGHPUT", "DONE + DEAD_LETTERED"} {
		require.Contains(t, statsTable, w)
	}

	// Peek: the next jobs in dispatch order (nothing serves "peeked"), and the dead-letter tail.
	low := a.submit("--queue", "peeked", "--payload", "{}", "--priority", "1")
	high := a.submit("--queue", "peeked", "--payload", "{}", "--priority", "9")
	a.submit("--queue", "peeked", "--payload", "{}", "--priority", "0")
	peek := a.json([]string{"jobs"}, "peek", "peeked", "-n", "2")
	require.Equal(t, []string{high, low}, jsonIDs(jsonList(t, peek, "jobs")))
	require.Contains(t, a.ok("peek", "peeked"), high)
	deadPeek := a.json([]string{"jobs"}, "peek", "counted", "--dead")
	require.Equal(t, []string{bad}, jsonIDs(jsonList(t, deadPeek, "jobs")))
	require.Contains(t, a.ok("peek", "counted", "--dead"), "max_retries_exceeded", "why it was dead-lettered, not the plain error")
	a.fails(3, `queue "nope" not found`, "peek", "nope")
	a.fails(2, "-n 0", "peek", "peeked", "-n", "0")

	// Stats: Redis counters per queue, Postgres dead letters, live heartbeats.
	stats := a.json([]string{"queues", "inflight", "live_heartbeats"}, "stats")
	require.EqualValues(t, 1, jsonNum(t, stats["live_heartbeats"]))
	for _, q := range jsonList(t, stats, "queues") {
		requireFields(t, q, []string{"queue", "ready", "inflight", "dead_lettered"})
		if q["queue"] == "counted" {
			require.EqualValues(t, 1, jsonNum(t, q["dead_lettered"]))
		}
	}
	require.Contains(t, a.ok("stats"), "live heartbeats: 1")

	// Delete refuses a non-empty queue; --force deletes it with its jobs.
	a.fails(1, `queue "counted" is not empty`, "queue", "delete", "counted")
	// redrive-dlq refuses without --yes, then retries the dead letters (bad fails again: it is
	// dead-lettered again with max-retries 0); job delete deletes a finished job.
	a.fails(2, "add --yes", "redrive-dlq", "--queue", "counted")
	require.Contains(t, a.ok("redrive-dlq", "--queue", "counted", "--yes"), "retried 1 of 1 dead-lettered jobs of queue counted (0 failed)")
	a.waitState(bad, "DEAD_LETTERED")
	a.fails(2, "is not a UUID", "job", "delete", bad+"x")
	require.Contains(t, a.ok("job", "delete", jobs[0]), "job "+jobs[0]+" deleted (it was DONE)")
	a.fails(3, `job "`+jobs[0]+`" not found`, "job", "status", jobs[0])
	// purge-dlq refuses without --yes, then deletes the dead letters.
	a.fails(2, "add --yes", "purge-dlq", "--queue", "counted")
	a.waitState(bad, "DEAD_LETTERED")
	purged := a.json([]string{"deleted"}, "purge-dlq", "--queue", "counted", "--yes")
	require.EqualValues(t, 1, jsonNum(t, purged["deleted"]))
	a.fails(3, `job "`+bad+`" not found`, "job", "status", bad)
	require.Contains(t, a.ok("purge-dlq", "--yes"), "deleted 0 dead-lettered jobs of every queue")
	deleted := a.json([]string{"deleted_jobs"}, "queue", "delete", "counted", "--force")
	require.EqualValues(t, 2, jsonNum(t, deleted["deleted_jobs"]), "one DONE job was deleted by job delete")
	a.fails(3, `queue "counted" not found`, "queue", "stats", "counted")
	a.ok("queue", "delete", "peeked", "--force")

	// Status and version.
	status := a.json([]string{"server_version", "healthy", "components", "active_workers", "queues"}, "status")
	require.Equal(t, true, status["healthy"])
	require.EqualValues(t, 1, status["active_workers"])
	a.json([]string{"version", "commit", "go_version", "build_time"}, "version")
	require.Contains(t, a.ok("version"), "client: ")
}

// Workers: list, drain (no new jobs, the process stays), shutdown (the
// process deregisters and exits).
func TestAdminWorkersE2E(t *testing.T) {
	t.Parallel()
	c, a := newAdminE2E(t)
	p := c.startFastWorker("w-drain", "default")
	testenv.Eventually(t, 30*time.Second, func() error {
		for _, w := range jsonList(t, a.json([]string{"workers"}, "worker", "list"), "workers") {
			requireFields(t, w, wrkFields)
			if w["id"] == "w-drain" && w["status"] == "WORKER_STATUS_ONLINE" && w["last_heartbeat_at"] != nil {
				return nil
			}
		}
		return errors.New("w-drain is not ONLINE yet")
	})
	require.Contains(t, a.ok("worker", "list"), "ONLINE")

	drained := a.json([]string{"worker"}, "worker", "drain", "w-drain")
	require.Equal(t, "WORKER_STATUS_DRAINING", requireFields(t, drained["worker"], wrkFields)["status"])
	require.Contains(t, a.ok("worker", "list"), "DRAINING")
	// A drained worker takes no new job: the next one stays PENDING while
	// the worker keeps heartbeating.
	id := a.submit("--payload", "{}")
	before := a.json([]string{"workers"}, "worker", "list")
	testenv.Eventually(t, 10*time.Second, func() error {
		now := a.json([]string{"workers"}, "worker", "list")
		if jsonList(t, now, "workers")[0]["last_heartbeat_at"] == jsonList(t, before, "workers")[0]["last_heartbeat_at"] {
			return errors.New("no heartbeat since the submit yet")
		}
		return nil
	})
	require.Equal(t, "JOB_STATE_PENDING", requireFields(t, a.json([]string{"job"}, "job", "status", id)["job"], jobFields)["state"])
	select {
	case <-p.Done:
		t.Fatal("a drained worker must keep running")
	default:
	}

	// Resumed, the same process takes jobs again: the waiting one runs.
	require.Equal(t, "worker w-drain is ONLINE: it takes new jobs again\n", a.ok("worker", "resume", "w-drain"))
	a.waitState(id, "DONE")

	shut := a.json([]string{"worker"}, "worker", "shutdown", "w-drain")
	requireFields(t, shut["worker"], wrkFields)
	select {
	case <-p.Done:
		require.NoError(t, p.Err, "the worker exits cleanly")
	case <-time.After(30 * time.Second):
		t.Fatal("the worker did not exit within 30 s of shutdown")
	}
	testenv.Eventually(t, 10*time.Second, func() error {
		w := jsonList(t, a.json([]string{"workers"}, "worker", "list"), "workers")[0]
		if w["status"] != "WORKER_STATUS_OFFLINE" {
			return fmt.Errorf("w-drain is %v", w["status"])
		}
		return nil
	})
	a.fails(3, `worker "nope" not found`, "worker", "drain", "nope")
	a.fails(3, `worker "nope" not found`, "worker", "shutdown", "nope")
	a.fails(3, `worker "nope" not found`, "worker", "resume", "nope")
	a.fails(1, "cannot resume worker", "worker", "resume", "w-drain") // OFFLINE: it must register again
}

// Type-aware dispatch through the binary: a stock worker registers its built-in
// types, so a job of another type waits PENDING with no attempt — never dead-lettered as unknown —
// while the worker runs the jobs behind it, and job status, status and worker list say why.
func TestAdminTypeAwareE2E(t *testing.T) {
	t.Parallel()
	c, a := newAdminE2E(t)
	c.startFastWorker("w-builtin", "default")
	greet := a.submit("--type", "greet", "--payload", `{"name":"Ada"}`)
	noop := a.submit("--type", "noop", "--payload", "{}")
	a.waitState(noop, "DONE") // the worker's claims passed over the greet job ahead of it

	job := requireFields(t, a.json([]string{"job"}, "job", "status", greet)["job"], jobFields)
	require.Equal(t, "JOB_STATE_PENDING", job["state"])
	require.EqualValues(t, 0, jsonNum(t, job["attempt"]))
	require.Equal(t, "no connected worker handles type greet", job["waiting"])
	require.Regexp(t, `(?m)^WAITING +no connected worker handles type greet$`, a.ok("job", "status", greet))
	require.Contains(t, a.ok("status"), "default: waiting: no connected worker handles type greet\n")
	require.Regexp(t, `(?m)^w-builtin .* exec,file,http,noop,sleep,synthetic `, a.ok("worker", "list"))
}

// Every command answers --help, without a server.
func TestAdminHelpE2E(t *testing.T) {
	t.Parallel()
	a := adminCLI{t: t, addr: "127.0.0.1:1"}
	for _, cmd := range [][]string{
		{}, {"job"}, {"job", "submit"}, {"job", "status"}, {"job", "cancel"}, {"job", "retry"}, {"job", "list"}, {"job", "logs"},
		{"queue"}, {"queue", "list"}, {"queue", "create"}, {"queue", "delete"}, {"queue", "stats"}, {"queue", "pause"}, {"queue", "resume"},
		{"worker"}, {"worker", "list"}, {"worker", "drain"}, {"worker", "shutdown"}, {"worker", "resume"},
		{"status"}, {"version"}, {"stats"}, {"peek"}, {"purge-dlq"}, {"bench"}, {"events", "tail"},
	} {
		out := a.ok(append(cmd, "--help")...)
		require.Contains(t, out, "Usage: jq "+strings.Join(cmd, " "), "%v --help", cmd)
		require.Contains(t, out, "--output", "%v --help lists the global flags", cmd)
	}
	require.Contains(t, a.ok("--help"), "Exit codes: 0 ok, 1 error, 2 usage, 3 not found")
}

// TestAdminFirstHourE2E: what a new user types first works without guessing: an admin command
// without --role, submit without a payload, bare seconds, submit --wait and job wait with exit
// codes by final state, events tail --job ending with the job, and a JSON filter pointed to the
// other jq.
func TestAdminFirstHourE2E(t *testing.T) {
	t.Parallel()
	c, a := newAdminE2E(t)
	c.startFastWorker("w-first", "default,first")

	// No --role: the command names it. Its help says admin, not all.
	r := jqbin.Run(t, nil, "job", "submit", "--help")
	require.Equal(t, 0, r.Code, r.Stderr)
	require.Contains(t, r.Stdout, `--role="admin"`)
	require.Contains(t, r.Stdout, "Built-in: noop, sleep")
	r = jqbin.Run(t, nil, "--server-addr", a.addr, "job", "submit", "--wait")
	require.Equal(t, 0, r.Code, "submit --wait of a noop without --payload: %s", r.Stderr)
	require.Regexp(t, `^[0-9a-f-]{36}\s+DONE\n$`, r.Stdout)

	// Bare seconds wherever a duration is asked for.
	q := a.json([]string{"queue"}, "queue", "create", "first", "--ttl", "600", "--max-retries", "0", "--backoff-base", "1")
	require.Equal(t, "600s", q["queue"].(map[string]any)["ttl"])

	// job wait: 0 when DONE, 1 when dead-lettered, 1 when still running at --wait-timeout (not
	// --timeout, the deadline of each request), 3 when unknown.
	done := a.submit("--queue", "first", "--type", "sleep", "--payload", `{"ms":50}`)
	require.Contains(t, a.ok("job", "wait", done, "--timeout", "30s"), "DONE")
	bad := a.submit("--queue", "first", "--type", "sleep", "--payload", `{"fail":true}`)
	a.fails(1, "DEAD_LETTERED", "job", "wait", bad, "--timeout", "30s")
	slow := a.submit("--queue", "first", "--type", "sleep", "--payload", `{"ms":60000}`)
	a.fails(1, "after 500ms (--wait-timeout)", "job", "wait", slow, "--wait-timeout", "500ms")
	a.fails(3, "not found", "job", "wait", "00000000-0000-4000-8000-000000000000")
	_ = a.ok("job", "cancel", slow)

	// events tail --job ends after the job's last event.
	tail := a.run("events", "tail", "--job", done, "--source", "postgres", "--interval", "100ms", "--timeout", "30s")
	require.Equal(t, 0, tail.Code, tail.Stderr)
	require.Contains(t, tail.Stdout, "DONE")

	// A JSON filter: the other jq.
	r = jqbin.Run(t, nil, ".a")
	require.Equal(t, 2, r.Code)
	require.Contains(t, r.Stderr, "JSON processor")
}

// TestAdminBenchBesideBusyQueueE2E: bench waits for and reads its own jobs through the queue's
// creation-time index over its run's window, not a label listing that walks every job of the
// queue (which, beside 20,000 others, ran out of its scan bound).
func TestAdminBenchBesideBusyQueueE2E(t *testing.T) {
	t.Parallel()
	c, a := newAdminE2E(t)
	a.ok("queue", "create", "busy")
	// 20,000 jobs of a type no worker handles: they stay PENDING in the queue.
	a.ok("bench", "--queue", "busy", "--type", "nobody-handles", "--jobs", "20000", "--batch", "1000", "-c", "4", "--no-wait")
	c.startFastWorker("w-busy", "busy")
	out := a.ok("bench", "--queue", "busy", "--jobs", "300", "--batch", "50", "-c", "4", "--output", "json")
	var rep struct{ Jobs, Completed, NotFinished, FinishedNotDone int }
	require.NoError(t, json.Unmarshal([]byte(out), &rep), out)
	require.Equal(t, 300, rep.Jobs)
	require.Equal(t, 300, rep.Completed, out)
	require.Zero(t, rep.NotFinished)
}

// TestAdminBenchSuiteE2E: `bench --suite` runs jq's rows of bench/compare against a server and its
// worker: the batch inserted with the queue paused (nothing starts meanwhile), the drain of that
// backlog, two offered rates and sequential submits — every job accounted for.
func TestAdminBenchSuiteE2E(t *testing.T) {
	t.Parallel()
	c, a := newAdminE2E(t)
	a.ok("queue", "create", "suite")
	c.startFastWorker("w-suite", "suite")
	out := a.ok("bench", "--suite", "--queue", "suite", "--jobs", "200", "--duration", "200ms", "--output", "json")
	var rows []struct {
		Workload string
		Report   struct {
			Jobs, Completed, NotFinished, FinishedNotDone int
			SubmitErrors                                  int64   `json:"submit_errors"`
			WaitP50Ms                                     float64 `json:"wait_p50_ms"`
			ExecPerSec                                    float64 `json:"exec_per_sec"`
		}
	}
	require.NoError(t, json.Unmarshal([]byte(out), &rows), out)
	var names []string
	for _, r := range rows {
		names = append(names, r.Workload)
		require.Zero(t, r.Report.SubmitErrors, r.Workload)
	}
	require.Equal(t, []string{"batch", "drain", "rate1000", "rate5000", "submit"}, names)
	require.Equal(t, 200, rows[0].Report.Jobs)
	require.Equal(t, 200, rows[1].Report.Completed, "the batch drained")
	require.Positive(t, rows[1].Report.ExecPerSec)
	require.Equal(t, 200, rows[2].Report.Jobs, "1,000/s for 200 ms")
	require.Equal(t, 1000, rows[3].Report.Jobs, "5,000/s for 200 ms")
	for _, r := range rows[2:4] {
		require.Equal(t, r.Report.Jobs, r.Report.Completed, "%s: every offered job ran", r.Workload)
	}
	require.Equal(t, 200, rows[4].Report.Jobs)
	table := a.ok("bench", "--suite", "--queue", "suite", "--jobs", "20", "--duration", "50ms")
	for _, w := range []string{"batch", "drain", "rate1000", "rate5000", "submit"} {
		require.Contains(t, table, "\n"+w+" ", "the table names every workload")
	}
}
