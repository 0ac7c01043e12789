package roles_test

import (
	"bufio"
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/jq-dev/jq/internal/testenv"
)

// shellBlock returns the lines of the first ```sh block after heading in a Markdown file.
func shellBlock(t *testing.T, file, heading string) []string {
	t.Helper()
	b, err := os.ReadFile(file)
	require.NoError(t, err)
	_, rest, ok := strings.Cut(string(b), "\n"+heading+"\n")
	require.True(t, ok, "%s has no heading %q", file, heading)
	_, rest, ok = strings.Cut(rest, "```sh\n")
	require.True(t, ok, "no sh block under %q", heading)
	block, _, ok := strings.Cut(rest, "```")
	require.True(t, ok, "unterminated sh block under %q", heading)
	var lines []string
	sc := bufio.NewScanner(strings.NewReader(block))
	for sc.Scan() {
		line := sc.Text()
		if i := strings.Index(line, "  #"); i >= 0 { // the trailing comments of the README's blocks
			line = line[:i]
		}
		if line = strings.TrimSpace(line); line != "" {
			lines = append(lines, line)
		}
	}
	return lines
}

// The README's "Running it yourself" block runs as a reader would type it, line by line, in a
// directory holding bin/jq and examples/: background lines (&) keep running, every other line
// must succeed (retried for a while: a reader waits for the server to come up). Only the
// environment differs, making it private: a database and Redis prefix of its own, free ports
// (JQ_ variables win over the config file, as the README says). The build line is skipped: the
// test built bin/jq already.
func TestReadmeRunningItYourselfE2E(t *testing.T) {
	t.Parallel()
	lines := shellBlock(t, "../README.md", "## Running it yourself")
	require.NotEmpty(t, lines)

	dir := t.TempDir()
	require.NoError(t, os.Mkdir(filepath.Join(dir, "bin"), 0o755))
	require.NoError(t, os.Symlink(jqBin, filepath.Join(dir, "bin", "jq")))
	examples, err := filepath.Abs("../examples")
	require.NoError(t, err)
	require.NoError(t, os.Symlink(examples, filepath.Join(dir, "examples")))

	_, prefix := testenv.NewRedis(t)
	se := newServerEnv(t, testenv.NewDatabase(t))
	env := append(os.Environ(), se.env...)
	env = append(env, "JQ_REDIS_KEY_PREFIX="+prefix, "JQ_SERVER_ADDR="+se.addr(), "JQ_WORKER_SERVER_ADDR="+se.addr(),
		"JQ_WORKER_HEALTH_PORT="+strconv.Itoa(freePort(t)), "JQ_WORKER_METRICS_PORT="+strconv.Itoa(freePort(t)),
		"GORACE=atexit_sleep_ms=0")

	var ran []string
	for _, line := range lines {
		if strings.HasPrefix(line, "go tool ") {
			continue
		}
		if bg, ok := strings.CutSuffix(line, "&"); ok {
			cmd := exec.Command("bash", "-c", strings.TrimSpace(bg))
			cmd.Dir, cmd.Env = dir, env
			var out bytes.Buffer
			cmd.Stdout, cmd.Stderr = &out, &out
			cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
			require.NoError(t, cmd.Start(), line)
			done := make(chan struct{})
			go func() { _ = cmd.Wait(); close(done) }() // stopped on purpose: its exit status says nothing
			t.Cleanup(func() {
				_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGTERM)
				select {
				case <-done:
				case <-time.After(30 * time.Second):
					_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
					<-done
				}
				if t.Failed() {
					t.Logf("output of %q:\n%s", line, out.String())
				}
			})
			ran = append(ran, line)
			t.Logf("started: %s", line)
			continue
		}
		var out []byte
		testenv.Eventually(t, 60*time.Second, func() error {
			cmd := exec.Command("bash", "-c", line)
			cmd.Dir, cmd.Env = dir, env
			var err error
			if out, err = cmd.CombinedOutput(); err != nil {
				return fmt.Errorf("%s: %w: %s", line, err, out)
			}
			return nil
		})
		ran = append(ran, line)
		t.Logf("ran: %s\n%s", line, firstLines(string(out), 3))
	}
	require.Contains(t, strings.Join(ran, "\n"), "job submit --wait", "the block ends with a job that runs")
}

func firstLines(s string, n int) string {
	lines := strings.SplitN(s, "\n", n+1)
	return strings.Join(lines[:min(n, len(lines))], "\n")
}
