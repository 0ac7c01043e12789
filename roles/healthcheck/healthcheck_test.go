package healthcheck

import (
	"bytes"
	"context"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/jq-dev/jq/config"
)

func run(t *testing.T, role string, environ []string, args ...string) (int, string) {
	t.Helper()
	var stderr bytes.Buffer
	code := Run(context.Background(), role, args, environ, &stderr)
	return code, stderr.String()
}

func TestHealthcheckExitCodes(t *testing.T) {
	t.Parallel()
	status := http.StatusOK
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		require.Equal(t, "/readyz", r.URL.Path)
		w.WriteHeader(status)
	}))
	t.Cleanup(srv.Close)

	code, stderr := run(t, "server", nil, "healthcheck", "--url", srv.URL+"/readyz")
	require.Equal(t, 0, code, stderr)

	status = http.StatusServiceUnavailable
	code, stderr = run(t, "server", nil, "--role=server", "healthcheck", "--url", srv.URL+"/readyz")
	require.Equal(t, 1, code)
	require.Contains(t, stderr, "503")

	// Nothing listens: refused, exit 1.
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	addr := ln.Addr().String()
	require.NoError(t, ln.Close())
	code, _ = run(t, "server", nil, "healthcheck", "--url", "http://"+addr+"/readyz", "--timeout", "1s")
	require.Equal(t, 1, code)

	code, _ = run(t, "server", nil, "healthcheck", "extra")
	require.Equal(t, 2, code)
}

// TestHealthcheckDefaultTarget probes the port the configuration gives the role: environment
// overrides and the config file are both read, as the container's process reads them.
func TestHealthcheckDefaultTarget(t *testing.T) {
	t.Parallel()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/readyz" {
			w.WriteHeader(http.StatusNotFound)
		}
	}))
	t.Cleanup(srv.Close)
	_, port, err := net.SplitHostPort(srv.Listener.Addr().String())
	require.NoError(t, err)

	code, stderr := run(t, "server", []string{"JQ_HEALTH_PORT=" + port}, "healthcheck")
	require.Equal(t, 0, code, stderr)
	code, stderr = run(t, "worker", []string{"JQ_WORKER_HEALTH_PORT=" + port}, "healthcheck")
	require.Equal(t, 0, code, stderr)

	file := filepath.Join(t.TempDir(), "jq.yaml")
	require.NoError(t, os.WriteFile(file, []byte("health:\n  port: "+port+"\n"), 0o600))
	code, stderr = run(t, "all", []string{"JQ_CONFIG=" + file}, "healthcheck")
	require.Equal(t, 0, code, stderr)
	code, stderr = run(t, "all", nil, "--config", file, "healthcheck")
	require.Equal(t, 0, code, stderr)

	code, stderr = run(t, "server", []string{"JQ_HEALTH_PORT=not-a-port"}, "healthcheck")
	require.Equal(t, 1, code)
	require.Contains(t, stderr, "health.port")
}

func TestHealthURL(t *testing.T) {
	t.Parallel()
	cfg := config.Default()
	require.Equal(t, "http://127.0.0.1:8080/readyz", healthURL("server", &cfg))
	require.Equal(t, "http://127.0.0.1:8080/readyz", healthURL("all", &cfg))
	require.Equal(t, "http://127.0.0.1:8081/readyz", healthURL("worker", &cfg))
	require.Equal(t, "http://127.0.0.1:9092/healthz", healthURL("producer", &cfg))
	cfg.Worker.BindHost = "10.0.0.7"
	require.Equal(t, "http://10.0.0.7:8081/readyz", healthURL("worker", &cfg))
}
