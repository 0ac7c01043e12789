package roles_test

// End-to-end tests of the real jq binary against the real Postgres and Redis:
// start-up on an empty database, the API over three protocols, reflection and
// the gRPC health service (checked with grpc-go, an independent
// implementation), the admin CLI, --dry-run, and SIGTERM.

import (
	"bufio"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
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
)

var jqBin string

// parallelTests is this package's default -parallel. Its tests spend most of their time waiting
// on other processes (servers, workers, private Postgres and redis-server) and on wall-clock
// windows: at go test's default, GOMAXPROCS (2 on CI's machine), the package took 234 s alone
// while the test binary and its jq processes used 82 s of CPU. At 8 the package took 79 s alone,
// but beside the suite's other packages (task test runs them together) every test took two to
// three times as long and two throughput-bound tests missed their bounds; 4 keeps that margin.
// An explicit -parallel wins.
const parallelTests = 4

func TestMain(m *testing.M) {
	if os.Getenv(grpcurlEnv) == "1" { // the docs test's grpcurl, when none is installed
		os.Exit(grpcurlMain(os.Args[1:], os.Stdout, os.Stderr))
	}
	flag.Parse()
	explicit := false
	flag.Visit(func(f *flag.Flag) { explicit = explicit || f.Name == "test.parallel" })
	if !explicit {
		if err := flag.Set("test.parallel", strconv.Itoa(parallelTests)); err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
	}
	dir, err := os.MkdirTemp("", "jq-e2e-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	jqBin = filepath.Join(dir, "jq")
	args := []string{"build", "-race", "-o", jqBin, "../"}
	if os.Getenv("JQ_TEST_ABUSE") == "1" {
		// The abuse suite measures the server's memory and CPU: a race build multiplies both.
		args = []string{"build", "-o", jqBin, "../"}
	}
	build := exec.Command("go", args...)
	build.Stdout, build.Stderr = os.Stderr, os.Stderr
	if err := build.Run(); err != nil {
		fmt.Fprintln(os.Stderr, "build jq:", err)
		os.Exit(1)
	}
	code := m.Run()
	_ = os.RemoveAll(dir)
	os.Exit(code)
}

// freePort is a port for a process under test, never the same twice in this test binary.
func freePort(t *testing.T) int {
	t.Helper()
	port, err := testenv.PickPort() // below the kernel's ephemeral range: see there
	require.NoError(t, err)
	return port
}

// jqProcess is a running jq binary whose stdout lines are collected.
type jqProcess struct {
	cmd   *exec.Cmd
	mu    sync.Mutex
	lines []string
	done  chan struct{}
	err   error
}

func startJQ(t *testing.T, env []string, args ...string) *jqProcess {
	t.Helper()
	return startJQWith(t, nil, env, args...)
}

// startJQWith is startJQ with the command adjusted by setup first (nil: none).
func startJQWith(t *testing.T, setup func(*exec.Cmd), env []string, args ...string) *jqProcess {
	t.Helper()
	cmd := exec.Command(jqBin, args...)
	cmd.Env = append(os.Environ(), env...)
	if setup != nil {
		setup(cmd)
	}
	stdout, err := cmd.StdoutPipe()
	require.NoError(t, err)
	cmd.Stderr = os.Stderr
	require.NoError(t, cmd.Start())
	p := &jqProcess{cmd: cmd, done: make(chan struct{})}
	go func() {
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			p.mu.Lock()
			p.lines = append(p.lines, sc.Text())
			p.mu.Unlock()
		}
		p.err = cmd.Wait()
		close(p.done)
	}()
	t.Cleanup(func() {
		select {
		case <-p.done:
		default:
			_ = cmd.Process.Kill()
			<-p.done
		}
	})
	return p
}

func (p *jqProcess) output() []string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]string(nil), p.lines...)
}

// waitLog waits until a JSON log line with this message appears.
func (p *jqProcess) waitLog(t *testing.T, message string) map[string]any {
	t.Helper()
	var found map[string]any
	testenv.Eventually(t, 60*time.Second, func() error {
		exited := false
		select {
		case <-p.done: // all output has been read once done is closed
			exited = true
		default:
		}
		for _, l := range p.output() {
			var m map[string]any
			if json.Unmarshal([]byte(l), &m) == nil && m["message"] == message {
				found = m
				return nil
			}
		}
		if exited {
			t.Fatalf("jq exited (%v) without logging %q:\n%s", p.err, message, strings.Join(p.output(), "\n"))
		}
		return fmt.Errorf("no %q log line yet", message)
	})
	return found
}

type serverEnv struct {
	dsn         string
	grpcPort    int
	healthPort  int
	metricsPort int
	env         []string
}

func newServerEnv(t *testing.T, dsn string) serverEnv {
	t.Helper()
	s := serverEnv{dsn: dsn, grpcPort: freePort(t), healthPort: freePort(t), metricsPort: freePort(t)}
	s.env = []string{
		"JQ_DB_URL=" + dsn,
		"JQ_REDIS_ADDR=" + testenv.RedisAddr(),
		"JQ_GRPC_HOST=127.0.0.1",
		"JQ_GRPC_PORT=" + strconv.Itoa(s.grpcPort),
		"JQ_HEALTH_PORT=" + strconv.Itoa(s.healthPort),
		"JQ_METRICS_PORT=" + strconv.Itoa(s.metricsPort),
	}
	return s
}

func (s serverEnv) addr() string { return "127.0.0.1:" + strconv.Itoa(s.grpcPort) }

func TestServerStartsServesAndStops(t *testing.T) {
	t.Parallel()
	se := newServerEnv(t, testenv.NewDatabase(t))
	srv := startJQ(t, se.env, "--role=server")
	started := srv.waitLog(t, "server started")
	for _, k := range []string{"timestamp", "level", "service", "message"} {
		require.Contains(t, started, k)
	}
	require.Equal(t, "jq-server", started["service"])
	srv.waitLog(t, "queue created") // `default`, on the first start only

	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()

	// The schema is migrated and `default` exists.
	conn, err := pgx.Connect(ctx, se.dsn)
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
	cc, err := grpc.NewClient(se.addr(), grpc.WithTransportCredentials(insecure.NewCredentials()))
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
	resp, err := http.Post("http://"+se.addr()+"/jq.v1.QueueService/ListQueues", "application/json", strings.NewReader("{}"))
	require.NoError(t, err)
	body, _ := io.ReadAll(resp.Body)
	_ = resp.Body.Close()
	require.Equal(t, http.StatusOK, resp.StatusCode, string(body))
	require.Contains(t, string(body), `"name":"default"`)

	// Bad input: one clear line with the right code, and nothing changes.
	resp, err = http.Post("http://"+se.addr()+"/jq.v1.QueueService/CreateQueue", "application/json", strings.NewReader(`{"name":"Bad Name!"}`))
	require.NoError(t, err)
	body, _ = io.ReadAll(resp.Body)
	_ = resp.Body.Close()
	require.Equal(t, http.StatusBadRequest, resp.StatusCode)
	require.Contains(t, string(body), `"code":"invalid_argument"`)
	require.Contains(t, string(body), "Bad Name!")

	// Health endpoints.
	httpGetOK(t, se.healthPort, "/healthz", "ok")
	httpGetOK(t, se.healthPort, "/readyz", `"postgres":{"status":"ok"`)
	// Prometheus exposition on the metrics port.
	httpGetOK(t, se.metricsPort, "/metrics", "go_goroutines")

	// The admin CLI talks to it through the API.
	out, err := exec.Command(jqBin, "--role=admin", "--server-addr", se.addr(), "status").CombinedOutput()
	require.NoError(t, err, string(out))
	require.Contains(t, string(out), "reachable")
	require.Contains(t, string(out), "default")
	out, err = exec.Command(jqBin, "--role=admin", "--server-addr", se.addr(), "--output=json", "version").CombinedOutput()
	require.NoError(t, err, string(out))
	require.Contains(t, string(out), `"go_version"`)

	// SIGTERM: a clean exit 0 well within the 30 s grace period.
	require.NoError(t, srv.cmd.Process.Signal(syscall.SIGTERM))
	select {
	case <-srv.done:
		require.NoError(t, srv.err)
	case <-time.After(30 * time.Second):
		t.Fatal("server did not exit within 30 s of SIGTERM")
	}
	srv.waitLog(t, "server stopped")
}

// Two servers starting at once against one empty database both come up: the
// migration is serialised by golang-migrate's advisory lock and `default` is
// created exactly once.
func TestTwoServersStartTogether(t *testing.T) {
	t.Parallel()
	dsn := testenv.NewDatabase(t)
	a := startJQ(t, newServerEnv(t, dsn).env, "--role=server")
	b := startJQ(t, newServerEnv(t, dsn).env, "--role=server")
	a.waitLog(t, "server started")
	b.waitLog(t, "server started")

	created := 0
	for _, p := range []*jqProcess{a, b} {
		for _, l := range p.output() {
			if strings.Contains(l, `"message":"queue created"`) {
				created++
			}
		}
	}
	require.Equal(t, 1, created, "the default queue is created by exactly one server")
}

func TestAdminStatusFailsWhenServerIsDown(t *testing.T) {
	t.Parallel()
	addr := "127.0.0.1:" + strconv.Itoa(freePort(t))
	cmd := exec.Command(jqBin, "--role=admin", "--server-addr", addr, "--timeout=3s", "status")
	out, err := cmd.CombinedOutput()
	var ee *exec.ExitError
	require.ErrorAs(t, err, &ee, string(out))
	require.Equal(t, 1, ee.ExitCode())
	require.Contains(t, string(out), "cannot reach the jq server at "+addr)
}

func TestDryRun(t *testing.T) {
	t.Parallel()
	se := newServerEnv(t, testenv.NewDatabase(t))
	cmd := exec.Command(jqBin, "--role=server", "--dry-run")
	cmd.Env = append(os.Environ(), se.env...)
	out, err := cmd.CombinedOutput()
	require.NoError(t, err, string(out))
	for _, w := range []string{"CHECK", "config", "postgres", "redis", "ok", "kafka"} {
		require.Contains(t, string(out), w)
	}

	// Redis unreachable: reported in the table, exit 1.
	cmd = exec.Command(jqBin, "--role=server", "--dry-run")
	cmd.Env = append(os.Environ(), append(se.env, "JQ_REDIS_ADDR=127.0.0.1:"+strconv.Itoa(freePort(t)), "JQ_REDIS_CONNECT_TIMEOUT_MS=500")...)
	out, err = cmd.CombinedOutput()
	var ee *exec.ExitError
	require.ErrorAs(t, err, &ee, string(out))
	require.Equal(t, 1, ee.ExitCode())
	require.Contains(t, string(out), "FAIL")

	// A role Postgres does not know: its answer on the line, and the setting that picks another.
	u, err := url.Parse(se.dsn)
	require.NoError(t, err)
	u.User = url.User("jq_no_such_role")
	cmd = exec.Command(jqBin, "--role=server", "--dry-run")
	cmd.Env = append(os.Environ(), append(se.env, "JQ_DB_URL="+u.String())...)
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
	cmd := exec.Command(jqBin, "--role=server", "--config", file, "--dry-run")
	cmd.Env = append(os.Environ(), newServerEnv(t, testenv.NewDatabase(t)).env...)
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
	se := newServerEnv(t, testenv.NewDatabase(t))
	workerMetrics := freePort(t)
	p := startJQ(t, append(se.env, "JQ_REDIS_KEY_PREFIX="+prefix,
		"JQ_WORKER_METRICS_PORT="+strconv.Itoa(workerMetrics), "JQ_WORKER_HEALTH_PORT="+strconv.Itoa(freePort(t))))
	p.waitLog(t, "server started")

	cl, err := rpcclient.New(rpcclient.Options{Addr: se.addr()})
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
	httpGetOK(t, workerMetrics, "/metrics", "go_goroutines")

	require.NoError(t, p.cmd.Process.Signal(syscall.SIGTERM))
	select {
	case <-p.done:
		require.NoError(t, p.err)
	case <-time.After(60 * time.Second):
		t.Fatal("jq --role=all did not exit within 60 s of SIGTERM")
	}
}

// httpGetOK asserts that GET 127.0.0.1:port/path answers 200 with want in the body.
func httpGetOK(t *testing.T, port int, path, want string) {
	t.Helper()
	resp, err := http.Get(fmt.Sprintf("http://127.0.0.1:%d%s", port, path))
	require.NoError(t, err)
	body, _ := io.ReadAll(resp.Body)
	_ = resp.Body.Close()
	require.Equal(t, http.StatusOK, resp.StatusCode, "%s: %s", path, body)
	require.Contains(t, string(body), want, path)
}
