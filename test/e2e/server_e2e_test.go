package e2e

// End-to-end tests of the real jq binary against the real Postgres and Redis:
// start-up on an empty database, the API over three protocols, reflection and
// the gRPC health service (checked with grpc-go, an independent
// implementation), the admin CLI, --dry-run, and SIGTERM.

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"connectrpc.com/connect"
	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	reflectpb "google.golang.org/grpc/reflection/grpc_reflection_v1"

	jqv1 "github.com/jq-dev/jq/api/gen/jq/v1"
	"github.com/jq-dev/jq/api/rpcclient"
	"github.com/jq-dev/jq/internal/testenv"
	"github.com/jq-dev/jq/test/internal/jqbin"
)

func TestServerStartsServesAndStops(t *testing.T) {
	t.Parallel()
	se := jqbin.NewServerEnv(t, testenv.NewDatabase(t))
	srv := jqbin.Start(t, se.Env, "--role=server")
	started := srv.WaitLog(t, "server started")
	for _, k := range []string{"timestamp", "level", "service", "message"} {
		require.Contains(t, started, k)
	}
	require.Equal(t, "jq-server", started["service"])
	srv.WaitLog(t, "queue created") // `default`, on the first start only

	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()

	// The schema is migrated and `default` exists.
	conn, err := pgx.Connect(ctx, se.DSN)
	require.NoError(t, err)
	var version int
	var dirty bool
	require.NoError(t, conn.QueryRow(ctx, "SELECT version, dirty FROM schema_migrations").Scan(&version, &dirty))
	require.False(t, dirty)
	require.GreaterOrEqual(t, version, 1)
	var n int
	require.NoError(t, conn.QueryRow(ctx, "SELECT count(*) FROM queues WHERE name = 'default'").Scan(&n))
	require.Equal(t, 1, n)
	require.NoError(t, conn.Close(ctx))

	// gRPC (grpc-go): the standard health service and reflection.
	cc, err := grpc.NewClient(se.Addr(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	require.NoError(t, err)
	defer cc.Close()
	hresp, err := healthpb.NewHealthClient(cc).Check(ctx, &healthpb.HealthCheckRequest{})
	require.NoError(t, err)
	require.Equal(t, healthpb.HealthCheckResponse_SERVING, hresp.GetStatus())
	hresp, err = healthpb.NewHealthClient(cc).Check(ctx, &healthpb.HealthCheckRequest{Service: "jq.v1.JobService"})
	require.NoError(t, err)
	require.Equal(t, healthpb.HealthCheckResponse_SERVING, hresp.GetStatus())

	stream, err := reflectpb.NewServerReflectionClient(cc).ServerReflectionInfo(ctx)
	require.NoError(t, err)
	require.NoError(t, stream.Send(&reflectpb.ServerReflectionRequest{MessageRequest: &reflectpb.ServerReflectionRequest_ListServices{}}))
	rresp, err := stream.Recv()
	require.NoError(t, err)
	var names []string
	for _, s := range rresp.GetListServicesResponse().GetService() {
		names = append(names, s.GetName())
	}
	require.Subset(t, names, []string{"jq.v1.JobService", "jq.v1.QueueService", "jq.v1.WorkerService", "jq.v1.AdminService", "grpc.health.v1.Health"})
	require.NoError(t, stream.CloseSend())

	// Connect protocol: JSON over HTTP/1.1.
	resp, err := http.Post("http://"+se.Addr()+"/jq.v1.QueueService/ListQueues", "application/json", strings.NewReader("{}"))
	require.NoError(t, err)
	body, _ := io.ReadAll(resp.Body)
	_ = resp.Body.Close()
	require.Equal(t, http.StatusOK, resp.StatusCode, string(body))
	require.Contains(t, string(body), `"name":"default"`)

	// Bad input: one clear line with the right code, and nothing changes.
	resp, err = http.Post("http://"+se.Addr()+"/jq.v1.QueueService/CreateQueue", "application/json", strings.NewReader(`{"name":"Bad Name!"}`))
	require.NoError(t, err)
	body, _ = io.ReadAll(resp.Body)
	_ = resp.Body.Close()
	require.Equal(t, http.StatusBadRequest, resp.StatusCode)
	require.Contains(t, string(body), `"code":"invalid_argument"`)
	require.Contains(t, string(body), "Bad Name!")

	// Health endpoints.
	jqbin.HTTPGetOK(t, se.HealthPort, "/healthz", "ok")
	jqbin.HTTPGetOK(t, se.HealthPort, "/readyz", `"postgres":{"status":"ok"`)
	// Prometheus exposition on the metrics port.
	jqbin.HTTPGetOK(t, se.MetricsPort, "/metrics", "go_goroutines")

	// The admin CLI talks to it through the API.
	out, err := exec.Command(jqbin.Path(t), "--role=admin", "--server-addr", se.Addr(), "status").CombinedOutput()
	require.NoError(t, err, string(out))
	require.Contains(t, string(out), "reachable")
	require.Contains(t, string(out), "default")
	out, err = exec.Command(jqbin.Path(t), "--role=admin", "--server-addr", se.Addr(), "--output=json", "version").CombinedOutput()
	require.NoError(t, err, string(out))
	require.Contains(t, string(out), `"go_version"`)

	// SIGTERM: a clean exit 0 well within the 30 s grace period.
	require.NoError(t, srv.Cmd.Process.Signal(syscall.SIGTERM))
	select {
	case <-srv.Done:
		require.NoError(t, srv.Err)
	case <-time.After(30 * time.Second):
		t.Fatal("server did not exit within 30 s of SIGTERM")
	}
	srv.WaitLog(t, "server stopped")
}

// Two servers starting at once against one empty database both come up: the
// migration is serialised by golang-migrate's advisory lock and `default` is
// created exactly once.
func TestTwoServersStartTogether(t *testing.T) {
	t.Parallel()
	dsn := testenv.NewDatabase(t)
	a := jqbin.Start(t, jqbin.NewServerEnv(t, dsn).Env, "--role=server")
	b := jqbin.Start(t, jqbin.NewServerEnv(t, dsn).Env, "--role=server")
	a.WaitLog(t, "server started")
	b.WaitLog(t, "server started")

	created := 0
	for _, p := range []*jqbin.Process{a, b} {
		for _, l := range p.Output() {
			if strings.Contains(l, `"message":"queue created"`) {
				created++
			}
		}
	}
	require.Equal(t, 1, created, "the default queue is created by exactly one server")
}

func TestAdminStatusFailsWhenServerIsDown(t *testing.T) {
	t.Parallel()
	addr := "127.0.0.1:" + strconv.Itoa(jqbin.FreePort(t))
	cmd := exec.Command(jqbin.Path(t), "--role=admin", "--server-addr", addr, "--timeout=3s", "status")
	out, err := cmd.CombinedOutput()
	var ee *exec.ExitError
	require.ErrorAs(t, err, &ee, string(out))
	require.Equal(t, 1, ee.ExitCode())
	require.Contains(t, string(out), "cannot reach the jq server at "+addr)
}

func TestDryRun(t *testing.T) {
	t.Parallel()
	se := jqbin.NewServerEnv(t, testenv.NewDatabase(t))
	cmd := exec.Command(jqbin.Path(t), "--role=server", "--dry-run")
	cmd.Env = append(os.Environ(), se.Env...)
	out, err := cmd.CombinedOutput()
	require.NoError(t, err, string(out))
	for _, w := range []string{"CHECK", "config", "postgres", "redis", "ok", "kafka"} {
		require.Contains(t, string(out), w)
	}

	// Redis unreachable: reported in the table, exit 1.
	cmd = exec.Command(jqbin.Path(t), "--role=server", "--dry-run")
	cmd.Env = append(os.Environ(), append(se.Env, "JQ_REDIS_ADDR=127.0.0.1:"+strconv.Itoa(jqbin.FreePort(t)), "JQ_REDIS_CONNECT_TIMEOUT_MS=500")...)
	out, err = cmd.CombinedOutput()
	var ee *exec.ExitError
	require.ErrorAs(t, err, &ee, string(out))
	require.Equal(t, 1, ee.ExitCode())
	require.Contains(t, string(out), "FAIL")

	// A role Postgres does not know: its answer on the line, and the setting that picks another.
	u, err := url.Parse(se.DSN)
	require.NoError(t, err)
	u.User = url.User("jq_no_such_role")
	cmd = exec.Command(jqbin.Path(t), "--role=server", "--dry-run")
	cmd.Env = append(os.Environ(), append(se.Env, "JQ_DB_URL="+u.String())...)
	out, err = cmd.CombinedOutput()
	require.ErrorAs(t, err, &ee, string(out))
	require.Equal(t, 1, ee.ExitCode())
	require.Regexp(t, `postgres .* FAIL .*FATAL: role "jq_no_such_role" does not exist \(SQLSTATE 28000\); set JQ_DB_URL \(db.url\) `+
		`to a database and role that exist, e.g. JQ_DB_URL=postgres://postgres@127.0.0.1:5432/postgres, or run --role=all `+
		`without a database configured for the embedded store \(docs/embedded.md\)`, string(out))
}

func TestSecretInFileWarns(t *testing.T) {
	t.Parallel()
	file := filepath.Join(t.TempDir(), "jq.yaml")
	require.NoError(t, os.WriteFile(file, []byte("db:\n  password: in-the-file\n"), 0o600))
	cmd := exec.Command(jqbin.Path(t), "--role=server", "--config", file, "--dry-run")
	cmd.Env = append(os.Environ(), jqbin.NewServerEnv(t, testenv.NewDatabase(t)).Env...)
	out, _ := cmd.CombinedOutput()
	require.Contains(t, string(out), "configuration warning")
	require.Contains(t, string(out), "JQ_DB_PASSWORD")
	require.NotContains(t, string(out), "in-the-file")
}

// --role=all (the default) runs the server and a worker in one process: a
// submitted job runs to DONE, and SIGTERM stops both cleanly.
func TestRoleAllRunsServerAndWorker(t *testing.T) {
	t.Parallel()
	_, prefix := testenv.NewRedis(t)
	se := jqbin.NewServerEnv(t, testenv.NewDatabase(t))
	workerMetrics := jqbin.FreePort(t)
	p := jqbin.Start(t, append(se.Env, "JQ_REDIS_KEY_PREFIX="+prefix,
		"JQ_WORKER_METRICS_PORT="+strconv.Itoa(workerMetrics), "JQ_WORKER_HEALTH_PORT="+strconv.Itoa(jqbin.FreePort(t))))
	p.WaitLog(t, "server started")

	cl, err := rpcclient.New(rpcclient.Options{Addr: se.Addr()})
	require.NoError(t, err)
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	resp, err := cl.Jobs.SubmitJob(ctx, connect.NewRequest(&jqv1.SubmitJobRequest{Job: &jqv1.JobSpec{Queue: "default", Type: "noop"}}))
	require.NoError(t, err)
	testenv.Eventually(t, time.Minute, func() error {
		j, err := cl.Jobs.GetJob(ctx, connect.NewRequest(&jqv1.GetJobRequest{JobId: resp.Msg.GetJobId()}))
		if err != nil {
			return err
		}
		if j.Msg.GetJob().GetState() != jqv1.JobState_JOB_STATE_DONE {
			return fmt.Errorf("job is %v", j.Msg.GetJob().GetState())
		}
		return nil
	})

	// The in-process worker serves its own metrics.
	jqbin.HTTPGetOK(t, workerMetrics, "/metrics", "go_goroutines")

	require.NoError(t, p.Cmd.Process.Signal(syscall.SIGTERM))
	select {
	case <-p.Done:
		require.NoError(t, p.Err)
	case <-time.After(60 * time.Second):
		t.Fatal("jq --role=all did not exit within 60 s of SIGTERM")
	}
}
