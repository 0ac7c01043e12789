package worker_test

import (
	"context"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"
	"go.uber.org/zap"
	"go.uber.org/zap/zaptest"

	"github.com/jq-dev/jq/config"
	"github.com/jq-dev/jq/internal/health"
	"github.com/jq-dev/jq/queue"
	"github.com/jq-dev/jq/queue/executor"
	"github.com/jq-dev/jq/queue/executor/executortest"
	"github.com/jq-dev/jq/queue/handlers"
	"github.com/jq-dev/jq/roles/worker"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

type bundle struct {
	srv    *executortest.Server
	w      *worker.Worker
	cancel context.CancelFunc
	done   chan error
}

func setup(t *testing.T, grace int) *bundle {
	t.Helper()
	return setupWith(t, grace, nil)
}

func setupWith(t *testing.T, grace int, shutdown <-chan struct{}) *bundle {
	t.Helper()
	return setupDeps(t, func(cfg *config.Config, d *worker.Deps) {
		cfg.Worker.ShutdownGraceS = grace
		d.Shutdown = shutdown
	})
}

// setupDeps starts a worker whose config and deps tweak may change.
func setupDeps(t *testing.T, tweak func(*config.Config, *worker.Deps)) *bundle {
	t.Helper()
	cfg := config.Default()
	cfg.Worker.HealthPort = 0
	cfg.Worker.Concurrency = 2
	cfg.Worker.ID = "w-" + t.Name()
	srv := executortest.NewServer(executortest.Options{HeartbeatInterval: time.Hour})
	mux := queue.NewMux()
	handlers.Register(mux, handlers.Options{})
	deps := worker.Deps{
		Config: &cfg, Log: zaptest.NewLogger(t, zaptest.Level(zap.WarnLevel)), Handlers: mux, Conn: srv,
	}
	tweak(&cfg, &deps)
	w, err := worker.New(deps)
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	b := &bundle{srv: srv, w: w, cancel: cancel, done: make(chan error, 1)}
	go func() { b.done <- w.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		select {
		case err := <-b.done:
			b.done <- err
		case <-time.After(30 * time.Second):
			t.Error("worker did not stop")
		}
	})
	select {
	case <-w.Listening():
	case err := <-b.done:
		t.Fatalf("worker ended early: %v", err)
	}
	return b
}

func get(t *testing.T, url string) (int, string) {
	t.Helper()
	res, err := http.Get(url)
	require.NoError(t, err)
	defer res.Body.Close()
	body, _ := io.ReadAll(res.Body)
	return res.StatusCode, string(body)
}

func TestNewValidates(t *testing.T) {
	t.Parallel()
	_, err := worker.New(worker.Deps{})
	require.Error(t, err)
	cfg := config.Default()
	cfg.Worker.Concurrency = 0
	_, err = worker.New(worker.Deps{Config: &cfg, Log: zap.NewNop(), Handlers: queue.NewMux(), Conn: executortest.NewServer(executortest.Options{})})
	require.ErrorContains(t, err, "concurrency")
}

func TestHealthAndReadiness(t *testing.T) {
	t.Parallel()
	b := setup(t, 5)
	base := "http://" + b.w.HealthAddr()
	code, _ := get(t, base+"/healthz")
	require.Equal(t, http.StatusOK, code)
	require.Eventually(t, func() bool { c, _ := get(t, base+"/readyz"); return c == http.StatusOK }, 10*time.Second, 5*time.Millisecond)
	require.Equal(t, "w-"+t.Name(), b.w.Executor().WorkerID())

	// A sleep job runs through the built-in handler.
	j := &queue.Job{ID: "00000000-0000-4000-8000-000000000001", Queue: "default", Type: "sleep", Payload: []byte(`{"ms": 1}`)}
	b.srv.Submit(j)
	require.Eventually(t, func() bool { return len(b.srv.ReportsFor(j.ID)) == 1 }, 10*time.Second, 5*time.Millisecond)
	require.JSONEq(t, `{"slept_ms":1}`, string(b.srv.ReportsFor(j.ID)[0].Result))

	// The server drops the stream: not ready until it is back.
	b.srv.BreakStream(executor.ErrUnreachable)
	require.Eventually(t, func() bool { c, _ := get(t, base+"/readyz"); return c == http.StatusOK }, 10*time.Second, 5*time.Millisecond)
}

// TestStopTurnsReadinessOffFirst: during the stop, /readyz is 503 while the
// running job finishes; /healthz stays 200; Run returns nil.
func TestStopTurnsReadinessOffFirst(t *testing.T) {
	t.Parallel()
	b := setup(t, 30)
	base := "http://" + b.w.HealthAddr()
	require.Eventually(t, func() bool { c, _ := get(t, base+"/readyz"); return c == http.StatusOK }, 10*time.Second, 5*time.Millisecond)
	j := &queue.Job{ID: "00000000-0000-4000-8000-000000000002", Queue: "default", Type: "sleep", Payload: []byte(`{"ms": 1500}`)}
	b.srv.Submit(j)
	require.Eventually(t, func() bool { return b.w.Executor().Stats().Running == 1 }, 10*time.Second, 2*time.Millisecond)

	b.cancel()
	code, body := get(t, base+"/readyz")
	require.Equal(t, http.StatusServiceUnavailable, code)
	require.Contains(t, body, "shutting down")
	code, _ = get(t, base+"/healthz")
	require.Equal(t, http.StatusOK, code)

	select {
	case err := <-b.done:
		require.NoError(t, err)
		b.done <- err
	case <-time.After(20 * time.Second):
		t.Fatal("worker did not stop")
	}
	rs := b.srv.ReportsFor(j.ID)
	require.Len(t, rs, 1, "the running job finished within the grace period and was reported")
	require.True(t, rs[0].Success)
	require.Equal(t, 1, b.srv.Calls(executortest.MethodDeregister))
}

// TestShutdownSignalTurnsReadinessOff: the process's shutdown signal turns
// /readyz 503 at once, before the component itself is stopped; the body is
// the health package's JSON.
func TestShutdownSignalTurnsReadinessOff(t *testing.T) {
	t.Parallel()
	shutdown := make(chan struct{})
	b := setupWith(t, 5, shutdown)
	base := "http://" + b.w.HealthAddr()
	require.Eventually(t, func() bool { c, _ := get(t, base+"/readyz"); return c == http.StatusOK }, 10*time.Second, 5*time.Millisecond)
	_, body := get(t, base+"/readyz")
	var ready health.Body
	require.NoError(t, json.Unmarshal([]byte(body), &ready), body)
	require.Equal(t, health.StatusOK, ready.Status)
	require.Len(t, ready.Checks, 3)
	for _, name := range []string{"registered", "stream", "intake"} {
		require.Equal(t, health.StatusOK, ready.Checks[name].Status, name)
	}

	close(shutdown)
	code, body := get(t, base+"/readyz")
	require.Equal(t, http.StatusServiceUnavailable, code)
	require.JSONEq(t, `{"status":"unavailable","reason":"shutting down"}`, body)
	select {
	case err := <-b.done:
		t.Fatalf("the component stopped on its own: %v", err)
	default:
	}
}

// TestListenersBindHostAndPprof: the health and metrics listeners bind to
// worker.bind_host (all interfaces when empty), and /debug/pprof/ is served
// on the metrics port only with metrics.pprof.
func TestListenersBindHostAndPprof(t *testing.T) {
	t.Parallel()
	metrics := http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { _, _ = io.WriteString(w, "jq_up 1\n") })
	for _, tc := range []struct {
		name     string
		host     string
		pprof    bool
		wantHost string
		pprofAt  int
	}{
		{name: "defaults", pprofAt: http.StatusNotFound}, // all interfaces: "::" or "0.0.0.0"
		{name: "loopback and pprof", host: "127.0.0.1", pprof: true, wantHost: "127.0.0.1", pprofAt: http.StatusOK},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			b := setupDeps(t, func(cfg *config.Config, d *worker.Deps) {
				cfg.Worker.MetricsPort = 0
				cfg.Worker.BindHost = tc.host
				cfg.Metrics.Pprof = tc.pprof
				d.Metrics = metrics
			})
			for _, addr := range []string{b.w.HealthAddr(), b.w.MetricsAddr()} {
				host, _, err := net.SplitHostPort(addr)
				require.NoError(t, err)
				if tc.wantHost == "" {
					require.True(t, net.ParseIP(host).IsUnspecified(), addr)
				} else {
					require.Equal(t, tc.wantHost, host, addr)
				}
			}
			local := func(addr string) string { _, port, _ := net.SplitHostPort(addr); return "http://127.0.0.1:" + port }
			code, body := get(t, local(b.w.MetricsAddr())+"/metrics")
			require.Equal(t, http.StatusOK, code)
			require.Equal(t, "jq_up 1\n", body)
			code, _ = get(t, local(b.w.MetricsAddr())+"/debug/pprof/")
			require.Equal(t, tc.pprofAt, code)
			code, _ = get(t, local(b.w.HealthAddr())+"/debug/pprof/")
			require.Equal(t, http.StatusNotFound, code, "never on the health port")
		})
	}
}

// TestExecDisabledByDefault: the stock worker reports an exec job as a
// permanent failure that says why, so the server dead-letters it at once.
func TestExecDisabledByDefault(t *testing.T) {
	t.Parallel()
	b := setup(t, 5)
	j := &queue.Job{ID: "00000000-0000-4000-8000-000000000003", Queue: "default", Type: "exec", Payload: []byte(`{"argv": ["/bin/sh", "-c", "true"]}`)}
	b.srv.Submit(j)
	require.Eventually(t, func() bool { return len(b.srv.ReportsFor(j.ID)) == 1 }, 10*time.Second, 5*time.Millisecond)
	r := b.srv.ReportsFor(j.ID)[0]
	require.False(t, r.Success)
	require.True(t, r.Permanent)
	require.Equal(t, executor.ReasonError, r.Reason)
	require.Equal(t, "exec handler is disabled on this worker (worker.exec.enabled)", r.Error)
}
