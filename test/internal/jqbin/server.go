package jqbin

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/jq-dev/jq/internal/testenv"
)

// FreePort is a port for a process under test, this test binary's alone (testenv.PickPort): a
// server restarted on it finds it free.
func FreePort(t *testing.T) int {
	t.Helper()
	port, err := testenv.PickPort()
	require.NoError(t, err)
	return port
}

// ServerEnv is the environment of a jq server: its database, the shared Redis, and ports of its
// own on loopback. Every replica started with Env listens on the same ports, so a restart keeps them.
type ServerEnv struct {
	DSN         string
	GRPCPort    int
	HealthPort  int
	MetricsPort int
	Env         []string
}

// NewServerEnv is the environment of a server on the database dsn.
func NewServerEnv(t *testing.T, dsn string) ServerEnv {
	t.Helper()
	s := ServerEnv{DSN: dsn, GRPCPort: FreePort(t), HealthPort: FreePort(t), MetricsPort: FreePort(t)}
	s.Env = []string{
		"JQ_DB_URL=" + dsn,
		"JQ_REDIS_ADDR=" + testenv.RedisAddr(),
		"JQ_GRPC_HOST=127.0.0.1",
		"JQ_GRPC_PORT=" + strconv.Itoa(s.GRPCPort),
		"JQ_HEALTH_PORT=" + strconv.Itoa(s.HealthPort),
		"JQ_METRICS_PORT=" + strconv.Itoa(s.MetricsPort),
	}
	return s
}

// Addr is the server's API address, host:port.
func (s ServerEnv) Addr() string { return "127.0.0.1:" + strconv.Itoa(s.GRPCPort) }

// HTTPGetOK asserts that GET 127.0.0.1:port/path answers 200 with want in the body.
func HTTPGetOK(t *testing.T, port int, path, want string) {
	t.Helper()
	resp, err := http.Get(fmt.Sprintf("http://127.0.0.1:%d%s", port, path))
	require.NoError(t, err)
	body, _ := io.ReadAll(resp.Body)
	_ = resp.Body.Close()
	require.Equal(t, http.StatusOK, resp.StatusCode, "%s: %s", path, body)
	require.Contains(t, string(body), want, path)
}

// ScrapeValues reads a server's metrics: each sample's name with its labels → its value.
func ScrapeValues(t *testing.T, port int) map[string]float64 {
	t.Helper()
	resp, err := http.Get("http://127.0.0.1:" + strconv.Itoa(port) + "/metrics")
	require.NoError(t, err)
	defer func() { _ = resp.Body.Close() }()
	b, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	out := map[string]float64{}
	for _, l := range strings.Split(string(b), "\n") {
		if l == "" || strings.HasPrefix(l, "#") {
			continue
		}
		if i := strings.LastIndexByte(l, ' '); i > 0 {
			v, err := strconv.ParseFloat(l[i+1:], 64)
			if err == nil {
				out[l[:i]] = v
			}
		}
	}
	return out
}

// SkipWithoutServers skips when PostgreSQL or redis-server is not installed: the tests that kill
// their backends need processes of their own (testenv.StartPostgres, testenv.StartRedis).
func SkipWithoutServers(t *testing.T) {
	t.Helper()
	if _, err := exec.LookPath("redis-server"); err != nil {
		t.Skip("redis-server not installed; the test needs a private one")
	}
	dirs, _ := filepath.Glob("/usr/lib/postgresql/*/bin")
	if d := os.Getenv("JQ_TEST_PG_BINDIR"); d != "" {
		dirs = append(dirs, d)
	}
	if p, err := exec.LookPath("postgres"); err == nil {
		dirs = append(dirs, filepath.Dir(p))
	}
	for _, d := range dirs {
		if _, err := os.Stat(filepath.Join(d, "postgres")); err == nil {
			return
		}
	}
	t.Skip("PostgreSQL server binaries not installed; the test needs a private server")
}

// RedisCommand sends one command to the Redis at addr and returns its reply line.
func RedisCommand(addr string, args ...string) (string, error) {
	conn, err := net.DialTimeout("tcp", addr, 5*time.Second)
	if err != nil {
		return "", err
	}
	defer conn.Close()
	_ = conn.SetDeadline(time.Now().Add(10 * time.Second))
	var b strings.Builder
	fmt.Fprintf(&b, "*%d\r\n", len(args))
	for _, a := range args {
		fmt.Fprintf(&b, "$%d\r\n%s\r\n", len(a), a)
	}
	if _, err := conn.Write([]byte(b.String())); err != nil {
		return "", err
	}
	line, err := bufio.NewReader(conn).ReadString('\n')
	return strings.TrimSpace(line), err
}
