package docs

import (
	"bufio"
	"bytes"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/jq-dev/jq/internal/testenv"
	"github.com/jq-dev/jq/test/internal/jqbin"
)

// The shell blocks of README.md and docs/*.md are executed, so they cannot rot: each one
// either runs here against a private jq — the test's own processes, database, Redis prefix and
// ports — or is listed in docBlocks with the reason it cannot. A new block fails the test until it
// is one or the other; so does an entry that no block matches any more, and a fenced block without
// a language (commands are `sh`, pictures `text`).

// docRun says how the test treats one shell block.
type docRun struct {
	// skip, when set, is why the block does not run here (reviewed: a cluster, Docker, a
	// benchmark of tens of minutes, the network). Nothing else applies then.
	skip string
	// server starts a server of the reader's (jq --role=server on loopback, no worker: jobs stay
	// where the block's text expects them) before the block, as its text assumes one runs.
	server bool
	// env is added to the block's environment.
	env []string
	// replace lists old, new, old, new, …: applied to the block's text before it runs — the
	// placeholders a reader fills in (`<id>`, `jq_…`) and the few sizes the suite cannot afford.
	// In new, {id}, {token}, {entry} are what an earlier line of the page printed (a job id, a
	// token, an auth.tokens entry) and {dir} the block's working directory.
	replace []string
	// expect lists strings the block's output contains.
	expect []string
}

// docBlocks is every shell block of the docs, by file and first command line.
var docBlocks = map[string]docRun{
	// README.md
	"README.md: go build -buildvcs=auto -o bin/jq . && bin/jq --role=all --config examples/config.yaml": {skip: "the build and " +
		"jq --role=all until Ctrl-C: what TestFreshClone runs (scripts/fresh-clone.sh); the second line, " +
		"`task test`, is the suite this test runs in"},
	"README.md: go tool -modfile=tools/go.mod task build": {
		// bin/jq is the binary TestMain built from this tree.
		replace: []string{"go tool -modfile=tools/go.mod task build", ":"},
		expect:  []string{"jq v"},
	},
	"README.md: bin/jq --role=all > jq.log 2>&1 &": {
		replace: []string{"<id>", "{id}"},
		expect: []string{"reachable", "1 active", "\tDONE", "queue reports created", "PENDING",
			"no connected worker serves queue reports", "submitted"},
	},

	// docs/api.md
	"docs/api.md: curl -sS -H 'Content-Type: application/json' -H \"Authorization: Bearer $JQ_TOKEN\" \\": {
		server:  true,
		replace: []string{"6f1c2b8e-8a4e-4d43-9a3c-0d5e8f7a1b2c", "{id}"},
		expect:  []string{`"jobId":"`, `"type":"email.send"`, `"state":"JOB_STATE_`},
	},
	"docs/api.md: grpcurl -plaintext -d '{\"spec\":{\"job_type\":\"resize\",\"work_duration_ms\":200,\"payload_size_bytes\":1024},\"client_request_id\":\"order-42\"}' \\": {
		server:  true,
		replace: []string{"<id>", "{id}"},
		expect:  []string{`"jobId"`, `"status": "QUEUED"`},
	},
	"docs/api.md: curl -s -H 'Content-Type: application/json' -d '{\"job_id\":\"<id>\",\"reason\":\"no longer needed\"}' \\": {
		server:  true,
		replace: []string{"<id>", "{id}"},
		expect:  []string{`"accepted":true`},
	},

	// docs/dependencies.md
	"docs/dependencies.md: go list -m -u -f '{{.Path}} {{.Version}}{{with .Update}} -> {{.Version}}{{end}}' \\": {
		skip: "asks the module proxy for newer versions: the network, and an answer that changes by the day"},

	// docs/deploy.md
	"docs/deploy.md: docker build -t jq:dev \\": {skip: "needs a Docker daemon and base images from a registry; " +
		"internal/deploytest builds the same Dockerfile with buildah (`task deploy:check`)"},
	"docs/deploy.md: docker compose up -d --build": {skip: "needs Docker Compose and images; " +
		"internal/deploytest loads and checks compose.yaml"},
	"docs/deploy.md: bin/jq --role=admin token new --name compose-worker --roles worker": {
		expect: []string{"token:             jq_", "auth.tokens entry: name=compose-worker;roles=worker;sha256="},
	},
	"docs/deploy.md: kubectl create secret generic jq-secrets \\": {skip: "needs a Kubernetes cluster and a registry; " +
		"internal/deploytest renders and lints the chart (`task deploy:check`)"},

	// docs/embedded.md
	"docs/embedded.md: go tool -modfile=tools/go.mod task run": {skip: "`task run` (build, then jq --role=all " +
		"until Ctrl-C) is what TestFreshClone runs (scripts/fresh-clone.sh), on the embedded store, in a network namespace"},

	// docs/evaluation.md
	"docs/evaluation.md: go tool -modfile=tools/go.mod task eval": {skip: "the topology evaluation: real processes " +
		"under load for minutes on both cores (`task eval`, not part of the suite)"},
	"docs/evaluation.md: go build -trimpath -o bin/jq . && go build -o /tmp/jqeval ./internal/eval": {
		skip: "a 32 s load run on both cores, writing into docs/eval: an evaluation, not a test"},

	// docs/performance.md: benchmarks at 1M-10M rows, tens of minutes each; CI runs every benchmark once
	// (-benchtime=1x) at its default size.
	"docs/performance.md: JQ_BENCH_ROWS=10000000 go test -run '^$' -bench BenchmarkStatementsAtSize -benchtime 100x -timeout 25m ./store/postgres": {
		skip: "benchmarks at 10M rows and 1M jobs (~25 and ~40 min)"},

	// docs/producer.md
	"docs/producer.md: bin/jq --role=producer --scan-dir /data/inbox --once": {
		server: true,
		replace: []string{
			"--scan-dir /data/inbox --once", "--scan-dir {dir}/inbox --once",
			// The other two serve until Ctrl-C: the watch runs in the background (up when its
			// /healthz answers), the all-in-one is checked with --dry-run (config, connections).
			"--scan-dir /data/inbox ", "--scan-dir {dir}/inbox & ",
			"--scan-dir ./data ", "--scan-dir ./data --dry-run ",
		},
		expect: []string{"submitted"},
	},

	// docs/flow-control.md
	"docs/flow-control.md: bin/jq queue create notifications": {
		server: true,
		expect: []string{"constraint email-per-tenant created: queue=notifications type=email key={{.labels.tenant}} concurrency=5 rate=100/m",
			"constraint partner-api created: queue=partner rate=10/s,burst=50", "concurrency=10", "KEYS", "constraint partner-api deleted"},
	},
	"docs/flow-control.md: grpcurl -plaintext -d '{\"name\":\"reports\"}' localhost:50051 jq.v1.QueueService/CreateQueue": {
		server: true,
		expect: []string{`"name": "reports-per-customer"`, `"usage"`},
	},

	// docs/reliability.md
	"docs/reliability.md: go tool -modfile=tools/go.mod task test-faults -- -v": {skip: "the fault-injection " +
		"tests: they run in the suite already (go test ./test/faults/ runs every TestFault…)"},

	// docs/schedules.md
	"docs/schedules.md: bin/jq queue create reports": {
		server: true,
		expect: []string{"nightly", "Europe/Berlin", "paused", "resumed", "deleted"},
	},

	// docs/security.md
	"docs/security.md: bin/jq --role=admin token new --name ingest --roles producer --queues emails,images": {
		expect: []string{"auth.tokens entry: name=ingest;roles=producer;sha256="},
	},
	"docs/security.md: openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -days 365 -subj /CN=jq-ca -keyout ca.key -out ca.pem": {
		skip: "its last line needs a TLS server named jq.internal; mTLS with such certificates: TestAuthTLSE2E"},
}

// shellLangs are the info strings of fenced blocks that hold commands.
var shellLangs = []string{"sh", "bash", "console", "shell"}

// docBlock is one fenced code block of a Markdown file.
type docBlock struct {
	file string // relative to the repository root
	line int    // of the opening fence
	lang string
	text string
}

// key names the block in docBlocks: its file and first line.
func (b docBlock) key() string {
	var first string
	if cmds := shellCommands(b.text); len(cmds) > 0 {
		first, _, _ = strings.Cut(cmds[0], "\n")
	}
	first, _, _ = strings.Cut(first, "  #") // a trailing comment
	return b.file + ": " + strings.TrimSpace(first)
}

// markdownBlocks returns the fenced blocks of a Markdown file (indented ones, in lists, too).
func markdownBlocks(t *testing.T, root, file string) []docBlock {
	t.Helper()
	f, err := os.Open(filepath.Join(root, file))
	require.NoError(t, err)
	defer f.Close()
	var (
		blocks []docBlock
		open   *docBlock
		indent string
		body   strings.Builder
	)
	sc := bufio.NewScanner(f)
	for n := 1; sc.Scan(); n++ {
		line := sc.Text()
		trimmed := strings.TrimLeft(line, " ")
		if !strings.HasPrefix(trimmed, "```") {
			if open != nil {
				body.WriteString(strings.TrimPrefix(line, indent) + "\n")
			}
			continue
		}
		if open == nil {
			indent = line[:len(line)-len(trimmed)]
			open = &docBlock{file: file, line: n, lang: strings.TrimSpace(strings.TrimPrefix(trimmed, "```"))}
			body.Reset()
			continue
		}
		open.text = body.String()
		blocks = append(blocks, *open)
		open = nil
	}
	require.NoError(t, sc.Err())
	require.Nil(t, open, "%s: a fenced block is not closed", file)
	return blocks
}

// docShellBlocks returns the shell blocks of README.md and docs/*.md, failing on a fence without a
// language.
func docShellBlocks(t *testing.T, root string) []docBlock {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(root, "docs", "*.md"))
	require.NoError(t, err)
	names := []string{"README.md"}
	for _, f := range files {
		names = append(names, filepath.Join("docs", filepath.Base(f)))
	}
	var out []docBlock
	for _, name := range names {
		for _, b := range markdownBlocks(t, root, name) {
			require.NotEmpty(t, b.lang, "%s:%d: a fenced block without a language: sh for commands (then listed in "+
				"docBlocks), text for a picture", b.file, b.line)
			if slices.Contains(shellLangs, b.lang) {
				out = append(out, b)
			}
		}
	}
	return out
}

// TestDocsShellBlocksE2E runs every shell block of README.md and docs/*.md that docBlocks does not
// skip, each page in order in a directory holding bin/jq (also on PATH as `jq`) and examples/, with
// an environment that makes it private: JQ_ variables (which win over the config file, as the README
// says) for a database and Redis prefix of its own and free ports; `localhost:50051` in a block is
// the block's API port. A line ending in `&` is started in the background and waited for until its
// health endpoint answers (servers, workers); it is stopped when the block ends. Every other line
// must succeed. grpcurl is the one installed or, when there is none, this test binary acting as it.
func TestDocsShellBlocksE2E(t *testing.T) {
	t.Parallel()
	root, err := jqbin.ModuleRoot()
	require.NoError(t, err)
	blocks := docShellBlocks(t, root)
	byFile := map[string][]docBlock{}
	var files []string
	seen := map[string]bool{}
	for _, b := range blocks {
		k := b.key()
		run, ok := docBlocks[k]
		require.True(t, ok, "%s:%d: a shell block neither run nor skipped: add %q to docBlocks", b.file, b.line, k)
		require.False(t, seen[k], "%s:%d: two blocks named %q", b.file, b.line, k)
		seen[k] = true
		if run.skip != "" {
			t.Logf("skipped %s:%d: %s", b.file, b.line, run.skip)
			continue
		}
		if byFile[b.file] == nil {
			files = append(files, b.file)
		}
		byFile[b.file] = append(byFile[b.file], b)
	}
	for k := range docBlocks {
		require.True(t, seen[k], "docBlocks lists %q, which no shell block starts with any more", k)
	}

	bin := t.TempDir()
	require.NoError(t, os.Symlink(jqbin.Path(t), filepath.Join(bin, "jq")))
	if _, err := exec.LookPath("grpcurl"); err != nil {
		self, err := os.Executable()
		require.NoError(t, err)
		script := fmt.Sprintf("#!/bin/sh\n%s=1 exec %q \"$@\"\n", grpcurlEnv, self)
		require.NoError(t, os.WriteFile(filepath.Join(bin, "grpcurl"), []byte(script), 0o755))
	}
	for _, file := range files {
		t.Run(file, func(t *testing.T) {
			t.Parallel()
			p := &docPage{t: t, root: root, bin: bin, vars: map[string]string{}}
			p.dsn = testenv.NewDatabase(t)
			_, p.prefix = testenv.NewRedis(t)
			for _, b := range byFile[file] {
				start := time.Now()
				p.runBlock(b, docBlocks[b.key()])
				t.Logf("%s:%d ran in %s", b.file, b.line, time.Since(start).Round(time.Millisecond))
			}
		})
	}
}

// docPage runs the blocks of one page, in order: they share a database and Redis prefix, and the
// values their lines printed ({id}, {token}, {entry}).
type docPage struct {
	t           *testing.T
	root, bin   string
	dsn, prefix string
	vars        map[string]string
	server      *docEnv // the reader's jq --role=all, once a block asked for it
}

// docEnv is a set of ports and the environment that points jq at them.
type docEnv struct {
	api, health, workerHealth, producer int
	env                                 []string
}

func (p *docPage) newEnv() *docEnv {
	e := &docEnv{api: jqbin.FreePort(p.t), health: jqbin.FreePort(p.t), workerHealth: jqbin.FreePort(p.t), producer: jqbin.FreePort(p.t)}
	addr := "127.0.0.1:" + strconv.Itoa(e.api)
	e.env = []string{
		"PATH=" + p.bin + string(os.PathListSeparator) + os.Getenv("PATH"),
		"JQ_DB_URL=" + p.dsn, "JQ_REDIS_ADDR=" + testenv.RedisAddr(), "JQ_REDIS_KEY_PREFIX=" + p.prefix,
		"JQ_GRPC_PORT=" + strconv.Itoa(e.api), "JQ_HEALTH_PORT=" + strconv.Itoa(e.health),
		"JQ_METRICS_PORT=" + strconv.Itoa(jqbin.FreePort(p.t)), "JQ_UI_PORT=" + strconv.Itoa(jqbin.FreePort(p.t)),
		"JQ_WORKER_HEALTH_PORT=" + strconv.Itoa(e.workerHealth), "JQ_WORKER_METRICS_PORT=" + strconv.Itoa(jqbin.FreePort(p.t)),
		"JQ_PRODUCER_METRICS_PORT=" + strconv.Itoa(e.producer),
		"JQ_SERVER_ADDR=" + addr, "JQ_WORKER_SERVER_ADDR=" + addr, "JQ_PRODUCER_SERVER_ADDR=" + addr,
		"JQ_SCHEDULER_INTERVAL_MS=100", "GORACE=atexit_sleep_ms=0",
	}
	return e
}

// runBlock runs one block in a fresh working directory.
func (p *docPage) runBlock(b docBlock, run docRun) {
	t := p.t
	t.Helper()
	dir := t.TempDir()
	require.NoError(t, os.Mkdir(filepath.Join(dir, "bin"), 0o755))
	require.NoError(t, os.Symlink(jqbin.Path(t), filepath.Join(dir, "bin", "jq")))
	for _, d := range []string{"examples", "deploy"} {
		require.NoError(t, os.Symlink(filepath.Join(p.root, d), filepath.Join(dir, d)))
	}
	require.NoError(t, os.MkdirAll(filepath.Join(dir, "inbox"), 0o755))
	require.NoError(t, os.WriteFile(filepath.Join(dir, "inbox", "a.txt"), []byte("hello\n"), 0o600))
	require.NoError(t, os.MkdirAll(filepath.Join(dir, "data"), 0o755))
	p.vars["dir"] = dir

	env := p.newEnv()
	if run.server {
		if p.server == nil {
			p.server = env
			srv := p.start(dir, env.env, "JQ_GRPC_HOST=127.0.0.1 jq --role=server", "reader's server")
			t.Cleanup(srv.stop)
		}
		env = p.server
	}
	environ := append(append(os.Environ(), env.env...), run.env...)
	text := strings.ReplaceAll(b.text, "localhost:50051", "localhost:"+strconv.Itoa(env.api))
	require.Equal(t, 0, len(run.replace)%2, "%s: replace takes pairs", b.key())

	var out bytes.Buffer
	var background []*docProcess
	defer func() {
		for _, bg := range slices.Backward(background) {
			bg.stop()
		}
	}()
	for _, cmd := range shellCommands(text) {
		for i := 0; i < len(run.replace); i += 2 {
			cmd = strings.ReplaceAll(cmd, p.expand(run.replace[i]), p.expand(run.replace[i+1]))
		}
		if bg, ok := backgroundCommand(cmd); ok {
			background = append(background, p.start(dir, environ, bg, cmd))
			continue
		}
		c := exec.Command("bash", "-c", cmd)
		c.Dir, c.Env = dir, environ
		o, err := runWithin(c, 2*time.Minute)
		require.NoError(t, err, "%s:%d: %s\n%s", b.file, b.line, cmd, o)
		out.Write(o)
		p.capture(string(o))
		t.Logf("ran: %s\n%s", cmd, firstLines(string(o), 3))
	}
	compact := func(s string) string { return strings.Join(strings.Fields(s), "") }
	for _, want := range run.expect { // protojson spaces its output at random: compared without spaces too
		require.True(t, strings.Contains(out.String(), want) || strings.Contains(compact(out.String()), compact(want)),
			"%s:%d: the block's output lacks %q:\n%s", b.file, b.line, want, out.String())
	}
}

var (
	captureID    = regexp.MustCompile(`(?m)(?:"jobId": ?"|^)([0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12})`)
	captureToken = regexp.MustCompile(`(?m)^token: +(jq_\S+)`)
	captureEntry = regexp.MustCompile(`(?m)^auth\.tokens entry: +(\S+)`)
)

// capture remembers the values a reader would copy from a command's output into a later one.
func (p *docPage) capture(out string) {
	for name, re := range map[string]*regexp.Regexp{"id": captureID, "token": captureToken, "entry": captureEntry} {
		if m := re.FindStringSubmatch(out); m != nil {
			p.vars[name] = m[1]
		}
	}
}

func (p *docPage) expand(s string) string {
	for k, v := range p.vars {
		s = strings.ReplaceAll(s, "{"+k+"}", v)
	}
	return s
}

// shellCommands splits a block into commands: one a line, a line ending in `\` continued by the
// next; blank lines and comment lines dropped.
func shellCommands(text string) []string {
	var out []string
	var cur strings.Builder
	for line := range strings.Lines(text) {
		line = strings.TrimRight(line, "\n")
		if cur.Len() == 0 && (strings.TrimSpace(line) == "" || strings.HasPrefix(strings.TrimSpace(line), "#")) {
			continue
		}
		cur.WriteString(line)
		if strings.HasSuffix(line, `\`) {
			cur.WriteString("\n")
			continue
		}
		out = append(out, cur.String())
		cur.Reset()
	}
	if cur.Len() > 0 {
		out = append(out, cur.String())
	}
	return out
}

var backgroundRE = regexp.MustCompile(`(?s)^(.*\S)\s*&\s*(#[^\n]*)?$`)

// backgroundCommand returns a command that ends in `&` without it (and its trailing comment).
func backgroundCommand(cmd string) (string, bool) {
	if m := backgroundRE.FindStringSubmatch(cmd); m != nil && !strings.HasSuffix(m[1], "&") {
		return m[1], true
	}
	return "", false
}

// runWithin runs c and returns its combined output; it is killed after d.
func runWithin(c *exec.Cmd, d time.Duration) ([]byte, error) {
	var out bytes.Buffer
	c.Stdout, c.Stderr = &out, &out
	c.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := c.Start(); err != nil {
		return nil, err
	}
	done := make(chan error, 1)
	go func() { done <- c.Wait() }()
	select {
	case err := <-done:
		return out.Bytes(), err
	case <-time.After(d):
		_ = syscall.Kill(-c.Process.Pid, syscall.SIGKILL)
		return out.Bytes(), fmt.Errorf("still running after %s (%w)", d, <-done)
	}
}

// docProcess is a command of a block running in the background.
type docProcess struct {
	t    *testing.T
	cmd  *exec.Cmd
	name string
	out  bytes.Buffer // written by the process until done is closed
	done chan struct{}
}

// start runs cmd in the background in its own process group and waits until it serves: the
// readiness endpoint of the role it runs (server and all: the server's /readyz; worker: the worker's;
// producer: its /healthz).
func (p *docPage) start(dir string, environ []string, cmd, name string) *docProcess {
	t := p.t
	t.Helper()
	dp := &docProcess{t: t, name: name, done: make(chan struct{})}
	dp.cmd = exec.Command("bash", "-c", cmd)
	dp.cmd.Dir, dp.cmd.Env = dir, environ
	dp.cmd.Stdout, dp.cmd.Stderr = &dp.out, &dp.out
	dp.cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	require.NoError(t, dp.cmd.Start(), cmd)
	go func() { _ = dp.cmd.Wait(); close(dp.done) }() // stopped on purpose: its exit status says nothing
	t.Cleanup(dp.stop)

	port := func(name string) string {
		for _, kv := range slices.Backward(environ) {
			if v, ok := strings.CutPrefix(kv, name+"="); ok {
				return v
			}
		}
		return ""
	}
	var url string
	switch {
	case strings.Contains(cmd, "--role=server"), strings.Contains(cmd, "--role=all"):
		url = "http://127.0.0.1:" + port("JQ_HEALTH_PORT") + "/readyz"
	case strings.Contains(cmd, "--role=worker"):
		url = "http://127.0.0.1:" + port("JQ_WORKER_HEALTH_PORT") + "/readyz"
	case strings.Contains(cmd, "--role=producer"):
		url = "http://127.0.0.1:" + port("JQ_PRODUCER_METRICS_PORT") + "/healthz"
	default:
		t.Logf("started %s (no readiness to wait for)", cmd)
		return dp
	}
	testenv.Eventually(t, time.Minute, func() error {
		select {
		case <-dp.done:
			t.Fatalf("%s exited:\n%s", cmd, dp.output())
		default:
		}
		resp, err := http.Get(url)
		if err != nil {
			return err
		}
		_ = resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			return fmt.Errorf("%s: %s", url, resp.Status)
		}
		return nil
	})
	t.Logf("started: %s", cmd)
	return dp
}

// output is what the process printed; only read once it is done.
func (dp *docProcess) output() string {
	<-dp.done
	return dp.out.String()
}

// stop ends the process group (SIGTERM, then SIGKILL after 30 s); idempotent.
func (dp *docProcess) stop() {
	select {
	case <-dp.done:
		return
	default:
	}
	_ = syscall.Kill(-dp.cmd.Process.Pid, syscall.SIGTERM)
	select {
	case <-dp.done:
	case <-time.After(30 * time.Second):
		_ = syscall.Kill(-dp.cmd.Process.Pid, syscall.SIGKILL)
		<-dp.done
	}
	if dp.t.Failed() {
		dp.t.Logf("output of %s:\n%s", dp.name, dp.out.String())
	}
}

func firstLines(s string, n int) string {
	lines := strings.SplitN(s, "\n", n+1)
	return strings.Join(lines[:min(n, len(lines))], "\n")
}
