package deploytest

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/jq-dev/jq/internal/testenv"
)

// freshCloneStep is one timed line of scripts/fresh-clone.sh (after an ANSI reset, should a
// coloured line of a tool end just before it).
var freshCloneStep = regexp.MustCompile(`(?m)^(?:\x1b\[[0-9;]*m)*fresh-clone: (.+?)\s+([0-9.]+) s$`)

// TestFreshClone runs scripts/fresh-clone.sh, a newcomer's first day from a clone: clone this
// repository (its HEAD: what is committed), build and start it with the README's run command
// (`go build`, then jq --role=all) — on the embedded store, in a network namespace where no Postgres
// or Redis can be reached when the machine allows one — wait for it to be ready and for the first
// job to be DONE with the admin CLI, kill -9 it, start it again and find the job DONE, and log
// each step's wall time. Go may not download anything (GOPROXY=off): the build uses the module
// cache the suite fills anyway. The ports are the test's own.
func TestFreshClone(t *testing.T) {
	if testing.Short() {
		t.Skip("clones and builds jq (a minute or more on a cold build cache): not with -short")
	}
	t.Parallel()
	root := repoRoot(t)
	// The clone goes to the same path at every run of this checkout's suite: without -trimpath a
	// package's directory is part of its build-cache key, and a fresh path would compile every
	// package of jq again (minutes on a loaded machine). A lock keeps two runs apart.
	sum := sha256.Sum256([]byte(root))
	work := filepath.Join(os.TempDir(), "jq-fresh-clone-"+hex.EncodeToString(sum[:6]))
	lock, err := os.OpenFile(work+".lock", os.O_RDWR|os.O_CREATE, 0o600)
	require.NoError(t, err)
	defer lock.Close()
	require.NoError(t, syscall.Flock(int(lock.Fd()), syscall.LOCK_EX))
	require.NoError(t, os.RemoveAll(work)) // left by a run that was killed
	env := append(os.Environ(), "GOPROXY=off", "TMPDIR="+t.TempDir(), "FRESH_CLONE_WORK="+work)
	for _, v := range []string{"JQ_GRPC_PORT", "JQ_HEALTH_PORT", "JQ_METRICS_PORT", "JQ_WORKER_HEALTH_PORT",
		"JQ_WORKER_METRICS_PORT", "JQ_UI_PORT"} {
		port, err := testenv.PickPort()
		require.NoError(t, err)
		env = append(env, v+"="+strconv.Itoa(port))
	}
	ctx, cancel := context.WithTimeout(context.Background(), 6*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "bash", "scripts/fresh-clone.sh", root)
	cmd.Dir, cmd.Env = root, env
	out, err := cmd.CombinedOutput()
	require.NoError(t, err, "scripts/fresh-clone.sh:\n%s", out)
	steps := map[string]float64{}
	for _, m := range freshCloneStep.FindAllStringSubmatch(string(out), -1) {
		s, err := strconv.ParseFloat(m[2], 64)
		require.NoError(t, err)
		steps[m[1]] = s
		t.Logf("%-28s %6.1f s", m[1], s)
	}
	for _, step := range []string{"clone", "build", "start (ready)", "first DONE", "restart after kill -9", "total (clone -> first DONE)"} {
		require.Contains(t, steps, step, "scripts/fresh-clone.sh did not time %q:\n%s", step, out)
	}
	// The build stamped the commit it was built from (go build's VCS stamps; no ldflags).
	head, err := exec.Command("git", "-C", root, "rev-parse", "HEAD").Output()
	require.NoError(t, err)
	require.Regexp(t, `fresh-clone: version jq \S+ \(commit `+strings.TrimSpace(string(head))+` of `, string(out))
	// Where a network namespace can be made, the run must have had one: jq reached no Postgres or
	// Redis because there was none to reach.
	if exec.Command("unshare", "-n", "true").Run() == nil {
		require.Contains(t, string(out), "fresh-clone: isolated network yes", "%s", out)
	}
}
