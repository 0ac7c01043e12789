package e2e

// End-to-end tests of a Redis outage at start with the real binary: the server starts while Redis is
// down (dispatch from Postgres, /readyz degraded) and goes back through Redis when it returns;
// a normal start logs no warning, --role=all or a worker started before its server.

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os/exec"
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

// roleAllEnv is the environment of a jq --role=all on private ports (the worker's and the
// console's too), so that nothing it binds is taken.
func roleAllEnv(t *testing.T, se jqbin.ServerEnv, extra ...string) []string {
	t.Helper()
	return append(append(se.Env,
		"JQ_WORKER_HEALTH_PORT="+strconv.Itoa(jqbin.FreePort(t)),
		"JQ_WORKER_METRICS_PORT="+strconv.Itoa(jqbin.FreePort(t)),
		"JQ_UI_PORT="+strconv.Itoa(jqbin.FreePort(t))), extra...)
}

// submitAndWaitDone submits a noop job and waits until it is DONE.
func submitAndWaitDone(t *testing.T, cl *rpcclient.Client) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	resp, err := cl.Jobs.SubmitJob(ctx, connect.NewRequest(&jqv1.SubmitJobRequest{Job: &jqv1.JobSpec{Queue: "default", Type: "noop"}}))
	require.NoError(t, err)
	testenv.Eventually(t, time.Minute, func() error {
		j, err := cl.Jobs.GetJob(ctx, connect.NewRequest(&jqv1.GetJobRequest{JobId: resp.Msg.GetJobId()}))
		if err != nil {
			return err
		}
		if s := j.Msg.GetJob().GetState(); s != jqv1.JobState_JOB_STATE_DONE {
			return fmt.Errorf("job is %v", s)
		}
		return nil
	})
}

// warnings returns p's log lines at warn level or above.
func warnings(p *jqbin.Process) []string {
	var out []string
	for _, l := range p.Output() {
		var m map[string]any
		if json.Unmarshal([]byte(l), &m) != nil {
			continue
		}
		switch m["level"] {
		case "warn", "error", "dpanic", "panic", "fatal":
			out = append(out, l)
		}
	}
	return out
}

// stopCleanly sends SIGTERM and requires exit status 0.
func stopCleanly(t *testing.T, p *jqbin.Process) {
	t.Helper()
	require.NoError(t, p.Cmd.Process.Signal(syscall.SIGTERM))
	select {
	case <-p.Done:
		require.NoError(t, p.Err)
	case <-time.After(60 * time.Second):
		t.Fatal("jq did not exit within 60 s of SIGTERM")
	}
}

// jq --role=all with Redis down from the start: it starts (one warning saying so), /readyz is 200
// "degraded" with the redis check degraded, a job runs to DONE (dispatched from Postgres), and
// when Redis comes up the check turns ok and dispatch records in-flight entries again.
func TestStartWithoutRedisRoleAll(t *testing.T) {
	t.Parallel()
	jqbin.SkipWithoutServers(t)
	rds := testenv.StartRedis(t)
	rds.Stop() // its port is closed until Start
	se := jqbin.NewServerEnv(t, testenv.NewDatabase(t))
	p := jqbin.Start(t, roleAllEnv(t, se, "JQ_REDIS_ADDR="+rds.Addr(), "JQ_REDIS_CONNECT_TIMEOUT_MS=500"))
	p.WaitLog(t, "server started")
	w := p.WaitLog(t, "redis unreachable at start; dispatch continues from postgres")
	require.Equal(t, "warn", w["level"])
	require.Equal(t, rds.Addr(), w["redis_addr"])

	b := waitReadyz(t, se.HealthPort, http.StatusOK, checkIs("redis", health.StatusDegraded))
	require.Equal(t, health.StatusDegraded, b.Status)
	require.NotEmpty(t, b.Checks["redis"].Error)
	require.Equal(t, health.StatusOK, b.Checks["postgres"].Status)

	cl, err := rpcclient.New(rpcclient.Options{Addr: se.Addr()})
	require.NoError(t, err)
	defer cl.Close()
	submitAndWaitDone(t, cl)

	rds.Start()
	b = waitReadyz(t, se.HealthPort, http.StatusOK, checkIs("redis", health.StatusOK))
	require.Equal(t, health.StatusOK, b.Status)
	submitAndWaitDone(t, cl)
	p.WaitLog(t, "redis reachable again: in-flight records resumed")
	stopCleanly(t, p)
}

// jq --role=server with Redis at a closed port starts, answers /readyz 200 "degraded", and the
// status command shows redis DEGRADED (exit 1: not everything is healthy) beside the queues.
func TestStartWithoutRedisRoleServer(t *testing.T) {
	t.Parallel()
	closed := jqbin.FreePort(t) // nothing listens there
	se := jqbin.NewServerEnv(t, testenv.NewDatabase(t))
	srv := jqbin.Start(t, append(se.Env, "JQ_REDIS_ADDR=127.0.0.1:"+strconv.Itoa(closed)), "--role=server")
	srv.WaitLog(t, "server started")
	require.Equal(t, 1, srv.LogCount("redis unreachable at start; dispatch continues from postgres"))

	b := waitReadyz(t, se.HealthPort, http.StatusOK, checkIs("redis", health.StatusDegraded))
	require.Equal(t, health.StatusDegraded, b.Status)
	require.False(t, b.Checks["redis"].Critical)
	out, code := adminStatus(t, se.Addr())
	require.Equal(t, 1, code, out)
	require.Contains(t, statusRow(out, "redis"), "DEGRADED", out)
	require.Contains(t, out, "QUEUE", "queue depths are still shown")
	stopCleanly(t, srv)
}

// A Redis that answers but refuses the server's credentials is a configuration to fix, not an
// outage to wait out: the start still fails, exit 1, naming Redis.
func TestStartFailsWhenRedisRefusesTheClient(t *testing.T) {
	t.Parallel()
	se := jqbin.NewServerEnv(t, testenv.NewDatabase(t))
	srv := jqbin.Start(t, append(se.Env, "JQ_REDIS_USERNAME=jq-no-such-user", "JQ_REDIS_PASSWORD=x"), "--role=server")
	select {
	case <-srv.Done:
	case <-time.After(60 * time.Second):
		t.Fatal("jq did not exit within 60 s")
	}
	var ee *exec.ExitError
	require.ErrorAs(t, srv.Err, &ee)
	require.Equal(t, 1, ee.ExitCode())
	require.Zero(t, srv.LogCount("server started"))
	require.Zero(t, srv.LogCount("redis unreachable at start; dispatch continues from postgres"))
}

// A normal jq --role=all start, Redis up, logs nothing at warn level or above up to its first
// job DONE: no "cannot register with the server; retrying".
func TestRoleAllStartLogsNoWarning(t *testing.T) {
	t.Parallel()
	_, prefix := testenv.NewRedis(t)
	se := jqbin.NewServerEnv(t, testenv.NewDatabase(t))
	p := jqbin.Start(t, roleAllEnv(t, se, "JQ_REDIS_KEY_PREFIX="+prefix))
	p.WaitLog(t, "server started")
	cl, err := rpcclient.New(rpcclient.Options{Addr: se.Addr()})
	require.NoError(t, err)
	defer cl.Close()
	submitAndWaitDone(t, cl)
	require.Empty(t, warnings(p), "warnings at a normal start:\n%s", strings.Join(warnings(p), "\n"))
	stopCleanly(t, p)
}

// The README's start, `jq --role=server & jq --role=worker`: the worker is up first and its
// registrations fail until the server listens. That is the start-up grace, logged at debug level:
// neither process warns up to the first job DONE.
func TestWorkerBeforeServerLogsNoWarning(t *testing.T) {
	t.Parallel()
	_, prefix := testenv.NewRedis(t)
	se := jqbin.NewServerEnv(t, testenv.NewDatabase(t))
	w := jqbin.Start(t, []string{
		"JQ_WORKER_HEALTH_PORT=" + strconv.Itoa(jqbin.FreePort(t)), "JQ_WORKER_METRICS_PORT=" + strconv.Itoa(jqbin.FreePort(t)),
	}, "--role=worker", "--server-addr", se.Addr(), "--log-level=debug")
	testenv.Eventually(t, time.Minute, func() error {
		if n := w.LogCount("cannot register with the server; retrying"); n < 3 {
			return fmt.Errorf("%d failed registrations logged, want 3", n)
		}
		return nil
	})
	srv := jqbin.Start(t, append(se.Env, "JQ_REDIS_KEY_PREFIX="+prefix), "--role=server")
	srv.WaitLog(t, "server started")
	w.WaitLog(t, "worker registered")
	cl, err := rpcclient.New(rpcclient.Options{Addr: se.Addr()})
	require.NoError(t, err)
	defer cl.Close()
	submitAndWaitDone(t, cl)
	require.Empty(t, warnings(w), "worker warnings:\n%s", strings.Join(warnings(w), "\n"))
	require.Empty(t, warnings(srv), "server warnings:\n%s", strings.Join(warnings(srv), "\n"))
	stopCleanly(t, w)
	stopCleanly(t, srv)
}
