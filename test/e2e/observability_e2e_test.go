package e2e

// End-to-end tests of health (NFR-013) and logs (FR-041) with the real
// binary: /readyz follows Postgres and declares a Redis outage as degraded,
// the worker's /readyz follows its registration, both turn 503 on SIGTERM;
// log lines are JSON with the required fields and a job's context, and a
// canary secret never reaches them.

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"connectrpc.com/connect"
	"github.com/stretchr/testify/require"

	jqv1 "github.com/jq-dev/jq/api/gen/jq/v1"
	"github.com/jq-dev/jq/api/rpcclient"
	"github.com/jq-dev/jq/internal/health"
	"github.com/jq-dev/jq/internal/testenv"
	"github.com/jq-dev/jq/test/internal/jqbin"
)

// readyz fetches GET /readyz on 127.0.0.1:port.
func readyz(port int) (int, health.Body, error) {
	c := http.Client{Timeout: 5 * time.Second}
	resp, err := c.Get(fmt.Sprintf("http://127.0.0.1:%d/readyz", port))
	if err != nil {
		return 0, health.Body{}, err
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(resp.Body)
	if err != nil {
		return 0, health.Body{}, err
	}
	var b health.Body
	if err := json.Unmarshal(raw, &b); err != nil {
		return resp.StatusCode, b, fmt.Errorf("readyz body is not JSON: %w: %q", err, raw)
	}
	return resp.StatusCode, b, nil
}

// waitReadyz polls /readyz until it answers code and ok accepts the body.
func waitReadyz(t *testing.T, port, code int, ok func(health.Body) error) health.Body {
	t.Helper()
	var last health.Body
	testenv.Eventually(t, 60*time.Second, func() error {
		got, b, err := readyz(port)
		if err != nil {
			return err
		}
		last = b
		if got != code {
			return fmt.Errorf("readyz answered %d, want %d: %+v", got, code, b)
		}
		if ok != nil {
			return ok(b)
		}
		return nil
	})
	return last
}

// checkIs returns a body predicate: the named check has this status.
func checkIs(name, status string) func(health.Body) error {
	return func(b health.Body) error {
		if c := b.Checks[name]; c.Status != status {
			return fmt.Errorf("check %s is %q, want %q: %+v", name, c.Status, status, b)
		}
		return nil
	}
}

// adminStatus runs `jq --role=admin status` and returns its output and exit code.
func adminStatus(t *testing.T, addr string) (string, int) {
	t.Helper()
	out, err := exec.Command(jqbin.Path(t), "--role=admin", "--server-addr", addr, "--timeout=5s", "status").CombinedOutput()
	if ee := (*exec.ExitError)(nil); errors.As(err, &ee) {
		return string(out), ee.ExitCode()
	}
	require.NoError(t, err, string(out))
	return string(out), 0
}

// statusRow returns the line of the status table that starts with name.
func statusRow(out, name string) string {
	for l := range strings.Lines(out) {
		if f := strings.Fields(l); len(f) > 0 && f[0] == name {
			return strings.TrimSpace(l)
		}
	}
	return ""
}

// /readyz is 503 while Postgres is down and 200 again once it is back; the
// status command, from the same checks, agrees.
func TestReadyzFollowsPostgres(t *testing.T) {
	t.Parallel()
	jqbin.SkipWithoutServers(t)
	pg := testenv.StartPostgres(t)
	_, prefix := testenv.NewRedis(t)
	se := jqbin.NewServerEnv(t, pg.DSN())
	srv := jqbin.Start(t, append(se.Env, "JQ_REDIS_KEY_PREFIX="+prefix, "JQ_DB_CONNECT_TIMEOUT_MS=1000"), "--role=server")
	srv.WaitLog(t, "server started")

	b := waitReadyz(t, se.HealthPort, http.StatusOK, nil)
	require.Equal(t, health.StatusOK, b.Status)
	for _, name := range []string{"postgres", "migrations", "redis"} {
		require.Equal(t, health.StatusOK, b.Checks[name].Status, name)
	}
	require.True(t, b.Checks["postgres"].Critical)
	require.True(t, b.Checks["migrations"].Critical)
	require.False(t, b.Checks["redis"].Critical)
	out, code := adminStatus(t, se.Addr())
	require.Equal(t, 0, code, out)
	// FR-042: reachability and version, every check, workers, queue depths.
	require.Contains(t, statusRow(out, "server"), "reachable", out)
	require.Contains(t, statusRow(out, "server"), "version", out)
	for _, name := range []string{"postgres", "migrations", "redis"} {
		require.Contains(t, statusRow(out, name), "ok", out)
	}
	require.Contains(t, statusRow(out, "kafka"), "disabled", out)
	require.Contains(t, statusRow(out, "workers"), "0 active", out)
	require.Contains(t, statusRow(out, "default"), "0", out)

	pg.Stop()
	b = waitReadyz(t, se.HealthPort, http.StatusServiceUnavailable, checkIs("postgres", health.StatusFailing))
	require.Equal(t, health.StatusUnavailable, b.Status)
	require.NotEmpty(t, b.Checks["postgres"].Error)
	require.Equal(t, health.StatusOK, b.Checks["redis"].Status)
	out, code = adminStatus(t, se.Addr())
	require.Equal(t, 1, code, out)
	require.Contains(t, statusRow(out, "postgres"), "FAILING", out)
	require.False(t, srv.Exited(), "the server rides out the outage")

	pg.Start()
	b = waitReadyz(t, se.HealthPort, http.StatusOK, checkIs("postgres", health.StatusOK))
	require.Equal(t, health.StatusOK, b.Status)
	require.Empty(t, b.Checks["postgres"].Error)
}

// While Redis is down the server dispatches straight from Postgres, so it
// stays ready: 200 with redis "degraded". `status` shows the degradation and
// exits 1 (not everything is healthy).
func TestReadyzRedisDownIsDegraded(t *testing.T) {
	t.Parallel()
	jqbin.SkipWithoutServers(t)
	rds := testenv.StartRedis(t)
	se := jqbin.NewServerEnv(t, testenv.NewDatabase(t))
	srv := jqbin.Start(t, append(se.Env, "JQ_REDIS_ADDR="+rds.Addr(), "JQ_REDIS_CONNECT_TIMEOUT_MS=500"), "--role=server")
	srv.WaitLog(t, "server started")
	waitReadyz(t, se.HealthPort, http.StatusOK, checkIs("redis", health.StatusOK))

	rds.Stop()
	b := waitReadyz(t, se.HealthPort, http.StatusOK, checkIs("redis", health.StatusDegraded))
	require.Equal(t, health.StatusDegraded, b.Status)
	require.NotEmpty(t, b.Checks["redis"].Error)
	require.Equal(t, health.StatusOK, b.Checks["postgres"].Status)
	out, code := adminStatus(t, se.Addr())
	require.Equal(t, 1, code, out)
	require.Contains(t, statusRow(out, "redis"), "DEGRADED", out)
	require.Contains(t, statusRow(out, "postgres"), "ok", out)
	require.Contains(t, out, "QUEUE", "queue depths are still shown")

	rds.Start()
	b = waitReadyz(t, se.HealthPort, http.StatusOK, checkIs("redis", health.StatusOK))
	require.Equal(t, health.StatusOK, b.Status)
}

// The worker's /readyz is 503 until it is registered with its stream open,
// 200 then, and 503 again when its server is gone.
func TestWorkerReadyzFollowsRegistration(t *testing.T) {
	t.Parallel()
	_, prefix := testenv.NewRedis(t)
	se := jqbin.NewServerEnv(t, testenv.NewDatabase(t))
	se.Env = append(se.Env, "JQ_REDIS_KEY_PREFIX="+prefix)
	whealth := jqbin.FreePort(t)
	w := jqbin.Start(t, []string{
		"JQ_WORKER_HEALTH_PORT=" + strconv.Itoa(whealth), "JQ_WORKER_METRICS_PORT=" + strconv.Itoa(jqbin.FreePort(t)),
	}, "--role=worker", "--server-addr", se.Addr(), "--worker-id", "w-readyz")
	w.WaitLog(t, "worker health endpoints listening")

	// No server yet.
	b := waitReadyz(t, whealth, http.StatusServiceUnavailable, checkIs("registered", health.StatusFailing))
	require.Equal(t, health.StatusUnavailable, b.Status)
	require.Equal(t, "not registered with the server", b.Checks["registered"].Error)

	srv := jqbin.Start(t, se.Env, "--role=server")
	srv.WaitLog(t, "server started")
	b = waitReadyz(t, whealth, http.StatusOK, nil)
	require.Equal(t, health.StatusOK, b.Status)
	for _, name := range []string{"registered", "stream", "intake"} {
		require.Equal(t, health.StatusOK, b.Checks[name].Status, name)
	}

	// The server dies: the stream breaks.
	require.NoError(t, srv.Cmd.Process.Kill())
	<-srv.Done
	b = waitReadyz(t, whealth, http.StatusServiceUnavailable, checkIs("stream", health.StatusFailing))
	require.Equal(t, health.StatusUnavailable, b.Status)
	require.False(t, w.Exited(), "the worker keeps trying to reconnect")
}

// SIGTERM turns /readyz 503 at once, on the server and on the worker, while
// the stop is still in progress: in --role=all the worker drains a running
// job first, and the server is already out of rotation meanwhile.
func TestReadyzTurns503OnSIGTERM(t *testing.T) {
	t.Parallel()
	_, prefix := testenv.NewRedis(t)
	se := jqbin.NewServerEnv(t, testenv.NewDatabase(t))
	whealth := jqbin.FreePort(t)
	p := jqbin.Start(t, append(se.Env, "JQ_REDIS_KEY_PREFIX="+prefix,
		"JQ_WORKER_HEALTH_PORT="+strconv.Itoa(whealth), "JQ_WORKER_METRICS_PORT="+strconv.Itoa(jqbin.FreePort(t))), "--role=all")
	p.WaitLog(t, "server started")
	waitReadyz(t, se.HealthPort, http.StatusOK, nil)
	waitReadyz(t, whealth, http.StatusOK, nil)

	cl, err := rpcclient.New(rpcclient.Options{Addr: se.Addr()})
	require.NoError(t, err)
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	resp, err := cl.Jobs.SubmitJob(ctx, connect.NewRequest(&jqv1.SubmitJobRequest{Job: &jqv1.JobSpec{
		Queue: "default", Type: "sleep", Payload: []byte(`{"ms": 6000}`),
	}}))
	require.NoError(t, err)
	id := resp.Msg.GetJobId()
	waitJobState(t, ctx, cl, id, jqv1.JobState_JOB_STATE_RUNNING)

	p.Signal(t, syscall.SIGTERM)
	for _, port := range []int{se.HealthPort, whealth} {
		b := waitReadyz(t, port, http.StatusServiceUnavailable, nil)
		require.Equal(t, health.Body{Status: health.StatusUnavailable, Reason: "shutting down"}, b)
	}
	require.False(t, p.Exited(), "the 503s were seen during the stop, while the job still ran")
	require.Equal(t, 0, p.WaitExit(t, 60*time.Second))
	p.WaitLog(t, "server stopped")
}

// waitJobState polls GetJob until the job is in state.
func waitJobState(t *testing.T, ctx context.Context, cl *rpcclient.Client, id string, state jqv1.JobState) *jqv1.Job {
	t.Helper()
	var job *jqv1.Job
	testenv.Eventually(t, time.Minute, func() error {
		j, err := cl.Jobs.GetJob(ctx, connect.NewRequest(&jqv1.GetJobRequest{JobId: id}))
		if err != nil {
			return err
		}
		job = j.Msg.GetJob()
		if job.GetState() != state {
			return fmt.Errorf("job %s is %v, want %v", id, job.GetState(), state)
		}
		return nil
	})
	return job
}

// jsonLines parses every line of p as a JSON log line and requires the
// FR-041 fields on each.
func jsonLines(t *testing.T, p *jqbin.Process, service string) []map[string]any {
	t.Helper()
	var out []map[string]any
	for i, l := range p.Output() {
		var m map[string]any
		require.NoErrorf(t, json.Unmarshal([]byte(l), &m), "line %d is not JSON: %q", i, l)
		for _, k := range []string{"timestamp", "level", "service", "message"} {
			require.Containsf(t, m, k, "line %d lacks %s: %q", i, k, l)
		}
		require.Equalf(t, service, m["service"], "line %d: %q", i, l)
		_, err := time.Parse(time.RFC3339Nano, m["timestamp"].(string))
		require.NoErrorf(t, err, "line %d: timestamp", i)
		require.Containsf(t, []string{"trace", "debug", "info", "warn", "error"}, m["level"], "line %d: %q", i, l)
		out = append(out, m)
	}
	return out
}

// A canary secret — in the database and Redis passwords, the Kafka SASL
// password, a job's payload, a job's result and a job's error text — never
// appears in any log line of the server or the worker, even at trace level.
// Every line is JSON with timestamp, level, service and message, and the
// lines about a job carry its job_id and queue.
func TestLogsCarryContextAndNoSecrets(t *testing.T) {
	t.Parallel()
	jqbin.SkipWithoutServers(t)
	const canary = "canary-5f0c2a9e-d0-not-log-me"
	// A private Redis that really requires the canary as its password; the
	// shared Postgres trusts local connections and ignores the password, which
	// is still part of the DSN the server uses.
	rds := testenv.StartRedis(t)
	reply, err := jqbin.RedisCommand(rds.Addr(), "CONFIG", "SET", "requirepass", canary)
	require.NoError(t, err)
	require.Equal(t, "+OK", reply)
	secrets := []string{"JQ_DB_PASSWORD=" + canary, "JQ_REDIS_PASSWORD=" + canary, "JQ_KAFKA_SASL_PASSWORD=" + canary}

	se := jqbin.NewServerEnv(t, testenv.NewDatabase(t))
	srv := jqbin.Start(t, append(append(se.Env, secrets...), "JQ_REDIS_ADDR="+rds.Addr()), "--role=server", "--log-level=trace")
	srv.WaitLog(t, "server started")
	echo, sh := program(t, "echo"), program(t, "sh")
	w := jqbin.Start(t, append(append(secrets, "JQ_WORKER_HEALTH_PORT="+strconv.Itoa(jqbin.FreePort(t)),
		"JQ_WORKER_METRICS_PORT="+strconv.Itoa(jqbin.FreePort(t))), execEnv(echo, sh)...),
		"--role=worker", "--server-addr", se.Addr(), "--worker-id", "w-logs", "--queues", "logs", "--log-level=trace")
	w.WaitLog(t, "assignment stream open")

	cl, err := rpcclient.New(rpcclient.Options{Addr: se.Addr()})
	require.NoError(t, err)
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	_, err = cl.Queues.CreateQueue(ctx, connect.NewRequest(&jqv1.CreateQueueRequest{Name: "logs"}))
	require.NoError(t, err)
	noRetry := int32(0)
	submit := func(typ string, payload any) string {
		raw, err := json.Marshal(payload)
		require.NoError(t, err)
		resp, err := cl.Jobs.SubmitJob(ctx, connect.NewRequest(&jqv1.SubmitJobRequest{Job: &jqv1.JobSpec{
			Queue: "logs", Type: typ, Payload: raw, MaxRetries: &noRetry, KeepResult: true,
		}}))
		require.NoError(t, err)
		return resp.Msg.GetJobId()
	}
	inPayload := submit("noop", map[string]string{"secret": canary})
	inResult := submit("exec", map[string]any{"argv": []string{echo, canary}})
	inError := submit("exec", map[string]any{"argv": []string{sh, "-c", "echo " + canary + " >&2; exit 3"}})

	waitJobState(t, ctx, cl, inPayload, jqv1.JobState_JOB_STATE_DONE)
	done := waitJobState(t, ctx, cl, inResult, jqv1.JobState_JOB_STATE_DONE)
	require.Contains(t, string(done.GetResult().GetData()), canary, "the canary went through the result")
	dead := waitJobState(t, ctx, cl, inError, jqv1.JobState_JOB_STATE_DEAD_LETTERED)
	require.Contains(t, dead.GetLastError(), canary, "the error text is kept for the operator")

	// Stop both, so every line is flushed and the stop paths log too.
	w.Signal(t, syscall.SIGTERM)
	require.Equal(t, 0, w.WaitExit(t, 60*time.Second))
	srv.Signal(t, syscall.SIGTERM)
	require.Equal(t, 0, srv.WaitExit(t, 60*time.Second))

	for _, c := range []struct {
		p       *jqbin.Process
		service string
	}{{srv, "jq-server"}, {w, "jq-worker"}} {
		lines := jsonLines(t, c.p, c.service)
		for i, l := range c.p.Output() {
			require.NotContainsf(t, l, canary, "%s log line %d leaks the canary", c.service, i)
		}
		levels := map[string]bool{}
		for _, m := range lines {
			levels[m["level"].(string)] = true
		}
		require.True(t, levels["debug"], "%s logged at debug level", c.service)
		for _, id := range []string{inPayload, inResult, inError} {
			var about []map[string]any
			for _, m := range lines {
				if m["job_id"] == id {
					about = append(about, m)
				}
			}
			require.NotEmptyf(t, about, "%s has no line with job_id %s", c.service, id)
			for _, m := range about {
				require.Equalf(t, "logs", m["queue"], "%s line about job %s lacks its queue: %v", c.service, id, m)
				if c.service == "jq-worker" {
					require.Equal(t, "w-logs", m["worker_id"])
				}
			}
		}
		for _, m := range lines {
			if strings.HasPrefix(m["message"].(string), "worker ") {
				require.Equalf(t, "w-logs", m["worker_id"], "%s line about the worker lacks worker_id: %v", c.service, m)
			}
		}
	}
	// The failed job's line says why, without the error text.
	failed := slices.IndexFunc(jsonLines(t, w, "jq-worker"), func(m map[string]any) bool {
		return m["message"] == "job failed" && m["job_id"] == inError
	})
	require.GreaterOrEqual(t, failed, 0, "the worker logged the failure")
}

// --log-level=warn keeps info lines out; logging.format=text prints console
// lines rather than JSON.
func TestLogLevelAndFormat(t *testing.T) {
	t.Parallel()
	_, prefix := testenv.NewRedis(t)
	dsn := testenv.NewDatabase(t)

	se := jqbin.NewServerEnv(t, dsn)
	srv := jqbin.Start(t, append(se.Env, "JQ_REDIS_KEY_PREFIX="+prefix), "--role=server", "--log-level=warn")
	waitReadyz(t, se.HealthPort, http.StatusOK, nil)
	srv.Signal(t, syscall.SIGTERM)
	require.Equal(t, 0, srv.WaitExit(t, 60*time.Second))
	for _, m := range jsonLines(t, srv, "jq-server") {
		require.Contains(t, []string{"warn", "error"}, m["level"], "an info line at --log-level=warn: %v", m)
	}

	se = jqbin.NewServerEnv(t, dsn)
	srv = jqbin.Start(t, append(se.Env, "JQ_REDIS_KEY_PREFIX="+prefix, "JQ_LOGGING_FORMAT=text"), "--role=server")
	waitReadyz(t, se.HealthPort, http.StatusOK, nil)
	srv.Signal(t, syscall.SIGTERM)
	require.Equal(t, 0, srv.WaitExit(t, 60*time.Second))
	out := srv.Output()
	require.NotEmpty(t, out)
	started := slices.IndexFunc(out, func(l string) bool { return strings.Contains(l, "server started") })
	require.GreaterOrEqual(t, started, 0, strings.Join(out, "\n"))
	for _, l := range out {
		var m map[string]any
		require.Error(t, json.Unmarshal([]byte(l), &m), "a JSON line in text format: %q", l)
	}
	require.Contains(t, out[started], "info")
	require.Contains(t, out[started], "jq-server")
}
