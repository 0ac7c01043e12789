// Package testenv gives integration tests real, isolated backends: a fresh PostgreSQL
// database per test (or per test package), a Redis key prefix per test, private
// PostgreSQL and Redis processes that fault tests may kill and restart, and a polling
// helper for waiting on conditions.
//
// The shared servers come from JQ_TEST_DATABASE_URL and JQ_TEST_REDIS_ADDR, which
// scripts/services.sh (behind `go tool -modfile=tools/go.mod task test`) sets, starting private servers when none
// run. An unreachable server fails the test: integration tests never skip.
//
// Helpers that take a testing.TB call FailNow on error, so call them from the test's own
// goroutine.
package testenv

import (
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"
)

const (
	// DefaultPostgresURL is used when JQ_TEST_DATABASE_URL is unset.
	DefaultPostgresURL = "postgres://postgres@127.0.0.1:5432/test?sslmode=disable"
	// DefaultRedisAddr is used when JQ_TEST_REDIS_ADDR is unset.
	DefaultRedisAddr = "127.0.0.1:6379"

	howToRun = "run the suite with `go tool -modfile=tools/go.mod task test` (it starts the services) or set %s"

	// readyTimeout bounds every wait for a server to accept connections or go away.
	readyTimeout = 30 * time.Second
	// opTimeout bounds a single administrative statement or command.
	opTimeout = 30 * time.Second
)

// PostgresURL returns the DSN of the shared test server: JQ_TEST_DATABASE_URL or
// DefaultPostgresURL.
func PostgresURL() string {
	if v := os.Getenv("JQ_TEST_DATABASE_URL"); v != "" {
		return v
	}
	return DefaultPostgresURL
}

// RedisAddr returns the host:port of the shared test Redis: JQ_TEST_REDIS_ADDR or
// DefaultRedisAddr.
func RedisAddr() string {
	if v := os.Getenv("JQ_TEST_REDIS_ADDR"); v != "" {
		return v
	}
	return DefaultRedisAddr
}

// Eventually calls f until it returns nil, failing the test with f's last error if that
// has not happened within timeout. f runs at least once; the pause between calls grows
// from 5 ms to 100 ms.
func Eventually(tb testing.TB, timeout time.Duration, f func() error) {
	tb.Helper()
	if err := poll(timeout, f); err != nil {
		tb.Fatalf("condition not met within %v: %v", timeout, err)
	}
}

// poll is Eventually without a testing.TB: it returns f's last error on timeout.
func poll(timeout time.Duration, f func() error) error {
	deadline := time.Now().Add(timeout)
	pause := 5 * time.Millisecond
	for {
		err := f()
		if err == nil {
			return nil
		}
		if !time.Now().Before(deadline) {
			return err
		}
		time.Sleep(min(pause, time.Until(deadline)))
		pause = min(2*pause, 100*time.Millisecond)
	}
}

func randomHex(nbytes int) string {
	b := make([]byte, nbytes)
	_, _ = rand.Read(b) // crypto/rand.Read never fails (Go ≥ 1.24)
	return hex.EncodeToString(b)
}

// sanitizeName turns a test name into at most maxLen characters of [a-z0-9_], with runs
// of other characters collapsed to one underscore.
func sanitizeName(name string, maxLen int) string {
	var sb strings.Builder
	underscore := false
	for _, r := range strings.ToLower(name) {
		if sb.Len() >= maxLen {
			break
		}
		if (r >= 'a' && r <= 'z') || (r >= '0' && r <= '9') {
			sb.WriteRune(r)
			underscore = false
		} else if !underscore && sb.Len() > 0 {
			sb.WriteByte('_')
			underscore = true
		}
	}
	return strings.TrimRight(sb.String(), "_")
}

func tail(b []byte, lines int) string {
	s := strings.TrimRight(string(b), "\n")
	parts := strings.Split(s, "\n")
	if len(parts) > lines {
		parts = parts[len(parts)-lines:]
	}
	return strings.Join(parts, "\n")
}

func logTail(path string) string {
	b, err := os.ReadFile(path)
	if err != nil {
		return fmt.Sprintf("(cannot read %s: %v)", path, err)
	}
	return tail(b, 20)
}
