package roles_test

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/jq-dev/jq/internal/buildinfo"
	"github.com/jq-dev/jq/internal/testenv"
	"github.com/jq-dev/jq/roles"
)

type result struct {
	code           int
	stdout, stderr string
}

// runJQ runs roles.Main in-process with a controlled environment.
func runJQ(t *testing.T, environ []string, args ...string) result {
	t.Helper()
	var out, errb bytes.Buffer
	code := roles.Main(context.Background(), args, environ, roles.IO{Stdin: strings.NewReader(""), Stdout: &out, Stderr: &errb})
	return result{code: code, stdout: out.String(), stderr: errb.String()}
}

// freePort is a port nothing listens on, never handed out twice (testenv.PickPort).
func freePort(t *testing.T) int {
	t.Helper()
	port, err := testenv.PickPort()
	require.NoError(t, err)
	return port
}

func TestVersion(t *testing.T) {
	t.Parallel()
	r := runJQ(t, nil, "--version")
	require.Equal(t, 0, r.code, r.stderr)
	require.Contains(t, r.stdout, buildinfo.Get().Version)
	require.Contains(t, r.stdout, "commit ")
}

func TestHelpPerRole(t *testing.T) {
	t.Parallel()
	cases := map[string][]string{
		"":                {"--grpc-port", "--concurrency", "--queues", "--worker-metrics-port", "--dry-run", "--role", "--config", "--log-level", "--print-config", "Roles"},
		"--role=server":   {"--grpc-port", "--metrics-port", "--health-port", "--dry-run", "--log-level"},
		"--role=worker":   {"--server-addr", "--worker-id", "--concurrency", "--queues", "--metrics-port", "--health-port"},
		"--role=producer": {"--config"},
		"--role=admin": {"job", "queue", "worker", "status", "version", "stats", "peek", "purge-dlq", "bench", "events",
			"--server-addr", "--tls-cert", "--tls-key", "--tls-ca", "--output", "--timeout", "Exit codes: 0 ok, 1 error, 2 usage, 3 not found"},
	}
	for role, want := range cases {
		args := []string{"--help"}
		if role != "" {
			args = append([]string{role}, args...)
		}
		r := runJQ(t, nil, args...)
		require.Equal(t, 0, r.code, "%v: %s", args, r.stderr)
		for _, w := range want {
			require.Contains(t, r.stdout, w, "%v --help lacks %q", args, w)
		}
	}
	// The worker's grammar has no server flags and vice versa.
	require.NotContains(t, runJQ(t, nil, "--role=worker", "--help").stdout, "--grpc-port")
	require.NotContains(t, runJQ(t, nil, "--role=server", "--help").stdout, "--concurrency")
	// Subcommand help lists its flags.
	r := runJQ(t, nil, "--role=admin", "job", "submit", "--help")
	require.Equal(t, 0, r.code)
	for _, w := range []string{"--queue", "--payload", "--priority", "--max-retries", "--ttl", "--run-at", "--delay", "--idempotency-key", "--label", "--job-timeout"} {
		require.Contains(t, r.stdout, w)
	}
}

func TestUsageErrorsExit2WithOneLine(t *testing.T) {
	t.Parallel()
	for _, args := range [][]string{
		{"--role=bogus"},
		{"--role", "bogus", "--help"},
		{"--role"},
		{"--role=server", "--no-such-flag"},
		{"--role=server", "--grpc-port=abc"},
		{"--role=admin", "no-such-command"},
		{"--role=admin"},
	} {
		r := runJQ(t, nil, args...)
		require.Equal(t, roles.ExitUsage, r.code, "%v: %s", args, r.stderr)
		require.Equal(t, 1, strings.Count(r.stderr, "\n"), "%v: want one line, got %q", args, r.stderr)
		require.True(t, strings.HasPrefix(r.stderr, "jq: "), r.stderr)
		require.Empty(t, r.stdout)
	}
	r := runJQ(t, nil, "--role=bogus")
	require.Equal(t, "jq: unknown role \"bogus\" (want server, worker, producer, admin or all)\n", r.stderr)
	// JQ_ROLE selects the role when no flag does, and is validated the same way.
	r = runJQ(t, []string{"JQ_ROLE=nope"})
	require.Equal(t, roles.ExitUsage, r.code)
	require.Contains(t, r.stderr, `unknown role "nope"`)
	r = runJQ(t, []string{"JQ_ROLE=admin"}, "--help")
	require.Contains(t, r.stdout, "purge-dlq")
}

func TestEventsTailWithoutServerSaysSo(t *testing.T) {
	t.Parallel()
	addr := "127.0.0.1:" + strconv.Itoa(freePort(t))
	r := runJQ(t, nil, "--role=admin", "--server-addr", addr, "events", "tail")
	require.Equal(t, roles.ExitError, r.code)
	require.Regexp(t, `^jq: cannot reach the jq server at `+regexp.QuoteMeta(addr)+`: [^\n]+\n$`, r.stderr)
}

func TestPrintConfigRedactsAndLayers(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	file := filepath.Join(dir, "jq.yaml")
	require.NoError(t, os.WriteFile(file, []byte("grpc:\n  port: 6000\nscheduler:\n  batch_size: 50\n"), 0o600))
	r := runJQ(t, []string{"JQ_DB_PASSWORD=s3cret-canary", "JQ_SCHEDULER_BATCH_SIZE=70"},
		"--role=server", "--config", file, "--print-config", "--grpc-port=7000")
	require.Equal(t, 0, r.code, r.stderr)
	require.NotContains(t, r.stdout, "s3cret-canary")
	require.Contains(t, r.stdout, "[REDACTED]")
	require.Contains(t, r.stdout, "port: 7000", "flag beats file")
	require.Contains(t, r.stdout, "batch_size: 70", "env beats file")
}

func TestInvalidConfigReportsEveryProblem(t *testing.T) {
	t.Parallel()
	r := runJQ(t, []string{"JQ_SCHEDULER_BATCH_SIZE=0", "JQ_GRPC_PORT=70000"}, "--role=server", "--print-config")
	require.Equal(t, roles.ExitError, r.code)
	require.Contains(t, r.stderr, "scheduler.batch_size")
	require.Contains(t, r.stderr, "grpc.port")
}

func TestProducerNeedsScanDir(t *testing.T) {
	t.Parallel()
	r := runJQ(t, nil, "--role=producer", "--log-level=error")
	require.Equal(t, roles.ExitError, r.code)
	require.Contains(t, r.stderr, "producer.scan_dir is not set")
}

// TestAllRoleListsOnLoopback: local development needs no credentials because --role=all listens
// on 127.0.0.1 unless grpc.host says otherwise; a server keeps "" (every interface, auth on).
// The token never shows in --print-config.
func TestAllRoleListsOnLoopback(t *testing.T) {
	t.Parallel()
	r := runJQ(t, []string{"JQ_TOKEN=jq_canary-token"}, "--role=all", "--print-config")
	require.Equal(t, 0, r.code, r.stderr)
	require.Regexp(t, `(?m)^\s+host: 127\.0\.0\.1$`, r.stdout)
	require.NotContains(t, r.stdout, "jq_canary-token")
	r = runJQ(t, []string{"JQ_GRPC_HOST=0.0.0.0"}, "--role=all", "--print-config")
	require.Regexp(t, `(?m)^\s+host: 0\.0\.0\.0$`, r.stdout)
	r = runJQ(t, nil, "--role=server", "--print-config")
	require.Regexp(t, `(?m)^\s+host: ""$`, r.stdout)
}

// TestAbuseAllRoleRefusesHostHandlersWithoutAuth: --role=all on loopback with authentication off lets
// every local account submit, and its in-process worker runs jobs as jq's user. So it refuses to
// start with any handler that reaches the host configured: exec (programs), file (reading and
// moving files: the hash of /etc/shadow, a root-only file moved) and http (requests from jq's
// network, signed with its secret); one line names every setting at fault.
func TestAbuseAllRoleRefusesHostHandlersWithoutAuth(t *testing.T) {
	t.Parallel()
	exec := []string{"JQ_WORKER_EXEC_ENABLED=true", "JQ_WORKER_EXEC_ALLOW=/bin/echo"}
	file := []string{"JQ_WORKER_FILE_ROOTS=/etc"}
	http := []string{"JQ_WORKER_HTTP_ALLOW=http://127.0.0.1:9/hook", "JQ_WORKER_HTTP_SIGNING_SECRET=s3cret"}
	for name, c := range map[string]struct {
		env  []string
		want string
	}{
		"exec":             {exec, "worker.exec.enabled with authentication off"},
		"file":             {file, "worker.file.roots with authentication off"},
		"http":             {http, "worker.http.allow with authentication off"},
		"all three":        {append(append(append([]string{}, exec...), file...), http...), "worker.exec.enabled, worker.file.roots, worker.http.allow with authentication off"},
		"auth.enabled off": {append([]string{"JQ_AUTH_ENABLED=false"}, file...), "worker.file.roots with authentication off"},
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			// Bounded: were the rule missing, jq would start and serve until the context ends.
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			var out, errb bytes.Buffer
			env := []string{"JQ_STORE_DATA_DIR=" + t.TempDir(), "JQ_UI_ENABLED=false"}
			for _, port := range []string{"GRPC_PORT", "HEALTH_PORT", "METRICS_PORT", "WORKER_HEALTH_PORT", "WORKER_METRICS_PORT"} {
				env = append(env, "JQ_"+port+"="+strconv.Itoa(freePort(t)))
			}
			env = append(env, c.env...)
			code := roles.Main(ctx, []string{"--role=all"}, env, roles.IO{Stdin: strings.NewReader(""), Stdout: &out, Stderr: &errb})
			r := result{code: code, stdout: out.String(), stderr: errb.String()}
			require.Equal(t, 1, r.code, r.stderr)
			require.Contains(t, r.stderr, c.want)
			require.Equal(t, 1, strings.Count(r.stderr, "\n"), r.stderr)
			require.NotContains(t, r.stderr, "s3cret")
		})
	}
}

func TestHelpCommandAndSections(t *testing.T) {
	t.Parallel()
	require.Equal(t, runJQ(t, nil, "--help"), runJQ(t, nil, "help"))
	sub := runJQ(t, nil, "help", "job", "submit")
	require.Equal(t, 0, sub.code, sub.stderr)
	require.Equal(t, runJQ(t, nil, "job", "submit", "--help"), sub)
	// The command's own flags come first, the global ones in their own section after them.
	own, global := strings.Index(sub.stdout, "--payload"), strings.Index(sub.stdout, "Global flags:")
	require.Positive(t, own)
	require.Greater(t, global, own, sub.stdout)
	require.Greater(t, strings.Index(sub.stdout, "--server-addr"), global)
	require.Greater(t, strings.Index(sub.stdout, "--log-level"), global)

	// jq --help names the operator commands of the admin grammar, in its usage line too.
	top := runJQ(t, nil, "--help").stdout
	require.True(t, strings.HasPrefix(top, "Usage: jq [flags]\n       jq <operator command> [flags]\n"), top)
	i := strings.Index(top, "Operator commands")
	require.Positive(t, i, top)
	for _, c := range []string{"job", "queue", "worker", "status", "purge-dlq", "bench", "events", "token", "help", "completion"} {
		require.Regexp(t, regexp.MustCompile(`(?m)^\s+`+regexp.QuoteMeta(c)+`\s`), top[i:], "jq --help lacks %s", c)
	}
}

func TestCommandGroupAloneListsEveryCommand(t *testing.T) {
	t.Parallel()
	r := runJQ(t, nil, "job")
	require.Equal(t, 2, r.code)
	require.Equal(t, "jq: job needs a command: submit, status, cancel, retry, delete, list, logs, wait, result (jq help job)\n", r.stderr)
}

func TestMistypedFirstWordGetsASuggestion(t *testing.T) {
	t.Parallel()
	for word, want := range map[string]string{"jbo": "job", "que": "queue", "stauts": "status", "hlep": "help"} {
		r := runJQ(t, nil, word, "list")
		require.Equal(t, 2, r.code, word)
		require.Equal(t, `jq: unknown command "`+word+`" (did you mean "`+want+`"?); `+"`jq help` lists the commands\n", r.stderr)
	}
	r := runJQ(t, nil, "zzzzzz")
	require.Equal(t, 2, r.code)
	require.Equal(t, `jq: unknown command "zzzzzz"; `+"`jq help` lists the commands\n", r.stderr)
}

func TestMistypedRoleGetsASuggestion(t *testing.T) {
	t.Parallel()
	for typed, want := range map[string]string{"wroker": "worker", "sever": "server", "admn": "admin", "producr": "producer"} {
		r := runJQ(t, nil, "--role="+typed)
		require.Equal(t, roles.ExitUsage, r.code, typed)
		require.Equal(t, `jq: unknown role "`+typed+`" (did you mean "`+want+`"? want server, worker, producer, admin or all)`+"\n", r.stderr)
	}
	r := runJQ(t, []string{"JQ_ROLE=wroker"})
	require.Contains(t, r.stderr, `unknown role "wroker" (did you mean "worker"?`)
}

func TestOperatorWordWithoutItsNounGetsTheCommand(t *testing.T) {
	t.Parallel()
	for word, want := range map[string]string{
		"submit":  `(did you mean "job submit"?)`,
		"wait":    `(did you mean "job wait"?)`,
		"drain":   `(did you mean "worker drain"?)`,
		"trigger": `(did you mean "schedule trigger"?)`,
		"list":    `(did you mean one of "job list", "queue list", "worker list", "schedule list", "constraint list"?)`,
		"pause":   `(did you mean one of "queue pause", "schedule pause"?)`,
	} {
		r := runJQ(t, nil, word)
		require.Equal(t, 2, r.code, word)
		require.Equal(t, `jq: unknown command "`+word+`" `+want+"; `jq help` lists the commands\n", r.stderr)
	}
}

func TestCommandWithoutItsArgumentSaysWhatItNeeds(t *testing.T) {
	t.Parallel()
	for args, want := range map[string]string{
		"job status":      "jq: job status needs <id>: jq job status <id> (jq job list shows recent jobs)\n",
		"queue pause":     "jq: queue pause needs <name>: jq queue pause <name> (jq queue list shows the queues)\n",
		"schedule show":   "jq: schedule show needs <name>: jq schedule show <name> (jq schedule list shows the schedules)\n",
		"constraint show": "jq: constraint show needs <name>: jq constraint show <name> (jq constraint list shows the constraints)\n",
		"worker drain":    "jq: worker drain needs <id>: jq worker drain <id> (jq worker list shows the workers)\n",
	} {
		r := runJQ(t, nil, strings.Fields(args)...)
		require.Equal(t, 2, r.code, args)
		require.Equal(t, want, r.stderr, args)
	}
}

func TestUnknownJQVariableIsWarned(t *testing.T) {
	t.Parallel()
	r := runJQ(t, []string{"JQ_WORKER_CONCURENCY=3", "JQ_ROLE=all"}, "--print-config")
	require.Equal(t, 0, r.code, r.stderr)
	require.Equal(t, "jq: warning: JQ_WORKER_CONCURENCY is not a jq setting (did you mean JQ_WORKER_CONCURRENCY?); ignored\n", r.stderr)
	require.Empty(t, runJQ(t, []string{"JQ_WORKER_CONCURRENCY=3", "JQ_SERVER_ADDR=x:1"}, "--print-config").stderr)
}

func TestBareJQWithPipedStdinPointsToTheJSONProcessor(t *testing.T) {
	t.Parallel()
	pr, pw, err := os.Pipe()
	require.NoError(t, err)
	t.Cleanup(func() { _ = pr.Close() })
	_, err = pw.WriteString("{}\n")
	require.NoError(t, err)
	require.NoError(t, pw.Close())
	var out, errb bytes.Buffer
	code := roles.Main(context.Background(), nil, nil, roles.IO{Stdin: pr, Stdout: &out, Stderr: &errb})
	require.Equal(t, 2, code)
	require.Empty(t, out.String())
	require.Contains(t, errb.String(), "not the JSON processor")
	require.Equal(t, 1, strings.Count(errb.String(), "\n"))
}

func TestCompletion(t *testing.T) {
	t.Parallel()
	for shell, want := range map[string]string{"bash": "complete -C ", "zsh": "bashcompinit", "fish": "complete -f -c jq"} {
		r := runJQ(t, nil, "completion", shell)
		require.Equal(t, 0, r.code, r.stderr)
		require.Contains(t, r.stdout, want)
	}
	r := runJQ(t, nil, "completion", "tcsh")
	require.Equal(t, 2, r.code)
	require.Equal(t, "jq: completion for \"tcsh\" is not supported; the shells are bash, zsh and fish (e.g. source <(jq completion bash))\n", r.stderr)
	r = runJQ(t, nil, "completion", "powershell")
	require.Equal(t, 2, r.code)
	require.Contains(t, r.stderr, `completion for "powershell" is not supported`)
	r = runJQ(t, nil, "completion")
	require.Equal(t, 2, r.code)
	require.Contains(t, r.stderr, "completion needs a shell: jq completion bash|zsh|fish")

	complete := func(line string) []string {
		r := runJQ(t, []string{"COMP_LINE=" + line, "COMP_POINT=" + strconv.Itoa(len(line))}, "jq", "x", "y")
		require.Equal(t, 0, r.code, r.stderr)
		require.Empty(t, r.stderr)
		return strings.Fields(r.stdout)
	}
	require.ElementsMatch(t, []string{"job"}, complete("jq jo"))
	require.ElementsMatch(t, []string{"submit", "status"}, complete("jq job s"))
	require.Contains(t, complete("jq job submit --"), "--payload")
	require.Contains(t, complete("jq job submit --"), "--server-addr")
	require.ElementsMatch(t, []string{"queue"}, complete("jq --role=admin qu"))
	require.Contains(t, complete("jq --"), "--grpc-port")
	require.ElementsMatch(t, []string{"bash"}, complete("jq completion b"))
}
