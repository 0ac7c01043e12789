package serverrole

import (
	"context"
	"io"
	"net"
	"net/http"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.uber.org/zap"
	"go.uber.org/zap/zaptest/observer"

	"github.com/jq-dev/jq/config"
	"github.com/jq-dev/jq/internal/health"
)

func get(t *testing.T, url string) (int, string) {
	t.Helper()
	req, err := http.NewRequestWithContext(t.Context(), http.MethodGet, url, nil)
	require.NoError(t, err)
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	defer func() { _ = resp.Body.Close() }()
	b, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	return resp.StatusCode, string(b)
}

// The health listener is bound when built (a port in use fails the start, naming the listener),
// answers /readyz 503 while the graph says stopping, and stops when its context ends.
func TestHealthListener(t *testing.T) {
	t.Parallel()
	cfg := config.Default()
	cfg.GRPC.Host, cfg.Health.Port = "127.0.0.1", 0
	var stopping atomic.Bool
	stopping.Store(true) // the graph is still starting
	core, logs := observer.New(zap.InfoLevel)
	checks := []health.Check{{Name: "postgres", Critical: true, Probe: func(context.Context) error { return nil }}}
	l, err := NewHealth(&cfg, checks, nil, stopping.Load, nil, zap.New(core))
	require.NoError(t, err)

	taken := cfg
	_, port, err := net.SplitHostPort(l.Addr())
	require.NoError(t, err)
	taken.Health.Port, err = strconv.Atoi(port)
	require.NoError(t, err)
	_, err = NewHealth(&taken, checks, nil, stopping.Load, nil, zap.NewNop())
	require.ErrorContains(t, err, "listen health: ")

	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- l.Run(ctx) }()
	base := "http://" + l.Addr()
	code, body := get(t, base+"/readyz")
	require.Equal(t, http.StatusServiceUnavailable, code)
	require.Contains(t, body, "shutting down")
	code, _ = get(t, base+"/healthz")
	require.Equal(t, http.StatusOK, code)

	stopping.Store(false)
	code, body = get(t, base+"/readyz")
	require.Equal(t, http.StatusOK, code)
	require.Contains(t, body, `"postgres":{"status":"ok"`)

	cancel()
	select {
	case err := <-done:
		require.NoError(t, err)
	case <-time.After(10 * time.Second):
		t.Fatal("the health listener did not stop")
	}
	require.Equal(t, 1, logs.FilterMessage("server stopped").Len())
	_, err = net.DialTimeout("tcp", l.Addr(), time.Second)
	require.Error(t, err, "the port is closed")
}
