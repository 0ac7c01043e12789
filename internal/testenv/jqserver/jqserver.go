// Package jqserver runs a real jq server inside a test binary: roles.Main with --role=server, the
// code of the jq binary, on a fresh Postgres database and a Redis key prefix of its own, on
// loopback ports without authentication unless the test's environment says otherwise. Tests of
// the Go client, of client/jqpgx and of the examples use it; the tests under test/ run the built
// binary instead.
package jqserver

import (
	"bytes"
	"context"
	"fmt"
	"net/http"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/jq-dev/jq/internal/testenv"
	"github.com/jq-dev/jq/roles"
)

// Server is one running jq server.
type Server struct {
	Addr        string // the API, host:port
	DSN         string // its database, for tests that write to it directly
	MetricsAddr string // its Prometheus endpoint, host:port (/metrics)
}

// Start runs a server until the test ends; env adds JQ_* settings (JQ_SCHEDULER_INTERVAL_MS=…).
// It returns once /readyz answers 200.
func Start(tb testing.TB, env ...string) *Server {
	tb.Helper()
	return StartRole(tb, "server", env...)
}

// StartRole is Start with another role: "all" runs the built-in worker in the same process too
// (JQ_WORKER_* settings in env).
func StartRole(tb testing.TB, role string, env ...string) *Server {
	tb.Helper()
	_, prefix := testenv.NewRedis(tb)
	dsn := testenv.NewDatabase(tb)
	grpcPort, healthPort, metricsPort := freePort(tb), freePort(tb), freePort(tb)
	environ := append([]string{
		"JQ_DB_URL=" + dsn,
		"JQ_REDIS_ADDR=" + testenv.RedisAddr(),
		"JQ_REDIS_KEY_PREFIX=" + prefix,
		"JQ_GRPC_HOST=127.0.0.1",
		"JQ_GRPC_PORT=" + strconv.Itoa(grpcPort),
		"JQ_HEALTH_PORT=" + strconv.Itoa(healthPort),
		"JQ_METRICS_PORT=" + strconv.Itoa(metricsPort),
		"JQ_LOGGING_LEVEL=warn",
	}, env...)
	if role == "all" {
		environ = append(environ, "JQ_WORKER_HEALTH_PORT="+strconv.Itoa(freePort(tb)), "JQ_WORKER_METRICS_PORT="+strconv.Itoa(freePort(tb)))
	}

	ctx, cancel := context.WithCancel(context.Background())
	var out logBuffer
	done := make(chan int, 1)
	go func() {
		done <- roles.Main(ctx, []string{"--role=" + role}, environ, roles.IO{Stdin: bytes.NewReader(nil), Stdout: &out, Stderr: &out})
	}()
	tb.Cleanup(func() {
		cancel()
		select {
		case code := <-done:
			if code != roles.ExitOK {
				tb.Errorf("jq server exited with %d:\n%s", code, out.String())
			}
		case <-time.After(30 * time.Second):
			tb.Errorf("jq server did not stop within 30s:\n%s", out.String())
		}
	})

	readyz := "http://127.0.0.1:" + strconv.Itoa(healthPort) + "/readyz"
	deadline := time.Now().Add(60 * time.Second)
	for {
		select {
		case code := <-done:
			tb.Fatalf("jq server exited with %d before it was ready:\n%s", code, out.String())
		default:
		}
		if ready(readyz) {
			return &Server{Addr: "127.0.0.1:" + strconv.Itoa(grpcPort), DSN: dsn, MetricsAddr: "127.0.0.1:" + strconv.Itoa(metricsPort)}
		}
		if time.Now().After(deadline) {
			tb.Fatalf("jq server not ready within 60s:\n%s", out.String())
		}
		time.Sleep(50 * time.Millisecond) // polling a port that is not open yet: nothing to wait on
	}
}

func ready(url string) bool {
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return false
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return false
	}
	_ = resp.Body.Close()
	return resp.StatusCode == http.StatusOK
}

// freePort is a port nobody listens on, below the ephemeral range (testenv.PickPort).
func freePort(tb testing.TB) int {
	tb.Helper()
	port, err := testenv.PickPort()
	if err != nil {
		tb.Fatalf("free port: %v", err)
	}
	return port
}

// logBuffer collects the server's output for failure messages.
type logBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *logBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *logBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// String describes the server, for messages.
func (s *Server) String() string { return fmt.Sprintf("jq server at %s", s.Addr) }
