package e2e

// End to end with the real binary: a server with authentication on, tokens
// issued by `jq --role=admin token new`, a worker with a worker token, and the
// operator CLI with and without credentials.

import (
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"connectrpc.com/connect"
	"github.com/stretchr/testify/require"

	jqv1 "github.com/jq-dev/jq/api/gen/jq/v1"
	"github.com/jq-dev/jq/api/rpcclient"
	"github.com/jq-dev/jq/internal/testenv"
	"github.com/jq-dev/jq/test/internal/jqbin"
)

// issueToken runs `jq --role=admin token new` and returns the token and its auth.tokens entry.
func issueToken(t *testing.T, name string, roles ...string) (token, entry string) {
	t.Helper()
	r := jqbin.Run(t, nil, "--role=admin", "token", "new", "--name", name, "--roles", strings.Join(roles, ","), "-o", "json")
	require.Equal(t, 0, r.Code, r.Stderr)
	var out map[string]string
	require.NoError(t, json.Unmarshal([]byte(r.Stdout), &out))
	require.True(t, strings.HasPrefix(out["token"], "jq_"))
	require.NotContains(t, out["auth_tokens_entry"], out["token"], "the entry holds only the hash")
	return out["token"], out["auth_tokens_entry"]
}

func TestAuthE2E(t *testing.T) {
	t.Parallel()
	workerTok, workerEntry := issueToken(t, "workers", "worker")
	otherTok, otherEntry := issueToken(t, "other-workers", "worker")
	adminTok, adminEntry := issueToken(t, "ops", "admin")
	producerTok, producerEntry := issueToken(t, "ingest", "producer")

	c := newCluster(t)
	// auth.tokens from the environment (comma-separated) and from a file.
	tokensFile := filepath.Join(t.TempDir(), "tokens")
	require.NoError(t, os.WriteFile(tokensFile, []byte("# issued by jq --role=admin token new\n"+producerEntry+"\n\n"), 0o600))
	se := c.startServer("JQ_AUTH_ENABLED=true",
		"JQ_AUTH_TOKENS="+strings.Join([]string{workerEntry, otherEntry, adminEntry}, ","),
		"JQ_AUTH_TOKENS_FILE="+tokensFile,
		"JQ_SCHEDULER_REAPER_INTERVAL_MS=200")
	addr := se.Addr()
	cli := func(token string, args ...string) jqbin.Result {
		var env []string
		if token != "" {
			env = []string{"JQ_TOKEN=" + token}
		}
		return jqbin.Run(t, env, append([]string{"--role=admin", "--server-addr", addr}, args...)...)
	}

	// Without credentials: one clear line, exit 1.
	r := cli("", "job", "list")
	require.Equal(t, 1, r.Code)
	require.Equal(t, "jq: the server requires a token (set JQ_TOKEN or --token-file) or a client certificate (--tls-cert, --tls-key)\n", r.Stderr)
	r = cli("jq_wrong", "job", "list")
	require.Equal(t, 1, r.Code)
	require.Contains(t, r.Stderr, "did not accept these credentials: invalid token")

	// A worker without a token stops at once with the reason.
	lone := jqbin.Start(t, []string{"JQ_WORKER_HEALTH_PORT=" + strconv.Itoa(jqbin.FreePort(t)), "JQ_WORKER_METRICS_PORT=" + strconv.Itoa(jqbin.FreePort(t))},
		"--role=worker", "--server-addr", addr, "--worker-id", "w-lone")
	select {
	case <-lone.Done:
	case <-time.After(time.Minute):
		t.Fatal("a worker without a token kept running")
	}
	require.Error(t, lone.Err)
	require.Contains(t, strings.Join(lone.Output(), "\n"), "the server requires a token")

	// A worker with its token registers and runs jobs submitted by a producer.
	workerEnv := func(token string) []string {
		return []string{"JQ_TOKEN=" + token,
			"JQ_WORKER_HEALTH_PORT=" + strconv.Itoa(jqbin.FreePort(t)), "JQ_WORKER_METRICS_PORT=" + strconv.Itoa(jqbin.FreePort(t))}
	}
	jqbin.Start(t, workerEnv(workerTok), "--role=worker", "--server-addr", addr, "--worker-id", "w-1").WaitLog(t, "worker registered")
	other := jqbin.Start(t, workerEnv(otherTok), "--role=worker", "--server-addr", addr, "--worker-id", "w-2", "--queues", "other")
	other.WaitLog(t, "worker registered")
	r = cli(producerTok, "job", "submit", "--payload", "{}")
	require.Equal(t, 0, r.Code, r.Stderr)
	id := strings.TrimSpace(r.Stdout)
	testenv.Eventually(t, time.Minute, func() error {
		r := cli(producerTok, "job", "status", id, "-o", "json")
		if !strings.Contains(r.Stdout, `"JOB_STATE_DONE"`) {
			return errors.New("not DONE yet: " + r.Stdout + r.Stderr)
		}
		return nil
	})

	// The worker token cannot purge, nor act as the other principal's worker.
	r = cli(workerTok, "purge-dlq", "--yes")
	require.Equal(t, 1, r.Code)
	require.Contains(t, r.Stderr, "jq: permission denied: token:workers (roles worker) may not call jq.v1.AdminService/PurgeDeadLetters")
	cl, err := rpcclient.New(rpcclient.Options{Addr: addr, Token: workerTok})
	require.NoError(t, err)
	defer cl.Close()
	ctx := c.ctx()
	_, err = cl.Workers.ReportJobs(ctx, connect.NewRequest(&jqv1.ReportJobsRequest{WorkerId: "w-2", Reports: []*jqv1.JobReport{{
		JobId: id, Attempt: 1, Outcome: &jqv1.JobReport_Success{Success: &jqv1.JobSuccess{}},
	}}}))
	require.Equal(t, connect.CodePermissionDenied, connect.CodeOf(err), "%v", err)
	_, err = cl.Workers.Heartbeat(ctx, connect.NewRequest(&jqv1.HeartbeatRequest{WorkerId: "w-2"}))
	require.Equal(t, connect.CodePermissionDenied, connect.CodeOf(err), "%v", err)

	// The admin token can; a token file works like JQ_TOKEN.
	adminFile := filepath.Join(t.TempDir(), "admin-token")
	require.NoError(t, os.WriteFile(adminFile, []byte(adminTok+"\n"), 0o600))
	r = jqbin.Run(t, nil, "--role=admin", "--server-addr", addr, "--token-file", adminFile, "purge-dlq", "--yes")
	require.Equal(t, 0, r.Code, r.Stderr)
	r = jqbin.Run(t, nil, "--role=admin", "--server-addr", addr, "--token-file", adminFile, "worker", "list")
	require.Equal(t, 0, r.Code, r.Stderr)
	require.Contains(t, r.Stdout, "w-2")
}

// TestAbuseServerRefusesUnsafeAuthConfig: a server that would listen beyond loopback with
// authentication off, or on without TLS, or with authentication on and no credential, does not
// start.
func TestAbuseServerRefusesUnsafeAuthConfig(t *testing.T) {
	t.Parallel()
	se := jqbin.NewServerEnv(t, "postgres://127.0.0.1:1/none") // never reached: the server stops first
	for _, tc := range []struct {
		env  []string
		want string
	}{
		{[]string{"JQ_GRPC_HOST=0.0.0.0", "JQ_AUTH_ENABLED=false"}, "with authentication off"},
		{[]string{"JQ_GRPC_HOST=0.0.0.0"}, "but no credential is configured"},
		{[]string{"JQ_AUTH_ENABLED=true", "JQ_AUTH_TOKENS=name=x;roles=admin;sha256=abc"}, "auth.tokens[0]: sha256"},
		// Tokens in cleartext beyond loopback.
		{[]string{"JQ_GRPC_HOST=0.0.0.0", "JQ_AUTH_TOKENS=name=x;roles=admin;sha256=" + strings.Repeat("ab", 32)}, "would take tokens in cleartext"},
	} {
		r := jqbin.Run(t, append(append([]string{}, se.Env...), tc.env...), "--role=server")
		require.Equal(t, 1, r.Code, "%v: %s", tc.env, r.Stderr)
		require.Contains(t, r.Stderr, tc.want)
		require.Equal(t, 1, strings.Count(r.Stderr, "\n"), r.Stderr)
	}
}
