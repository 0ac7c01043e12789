package e2e

import (
	"fmt"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/jq-dev/jq/internal/testenv"
	"github.com/jq-dev/jq/test/internal/jqbin"
)

// Waiting that waits: --wait and job wait follow the job past the request --timeout,
// give up only at --wait-timeout, say when no worker takes a job, show a live status line on a
// terminal (tmux), and worker shutdown --wait returns once the worker is OFFLINE.
func TestWaitingE2E(t *testing.T) {
	t.Parallel()
	c, a := newAdminE2E(t)
	c.startFastWorker("w-wait", "default")

	// A 2.5 s job outlives the 1 s request deadline; the wait does not.
	out := a.ok("--timeout", "1s", "job", "submit", "--type", "sleep", "--payload", `{"ms":2500}`, "--wait", "--wait-timeout", "2m")
	require.Regexp(t, `^[0-9a-f-]{36}\s+DONE\n$`, out)

	// --wait-timeout bounds the wait.
	long := a.submit("--type", "sleep", "--payload", `{"ms":60000}`)
	a.waitState(long, "RUNNING")
	a.fails(1, "has not ended after 1s (--wait-timeout)", "job", "wait", long, "--wait-timeout", "1s")

	// On a terminal, the wait shows state, attempt and elapsed time on one live line.
	if tmux, err := exec.LookPath("tmux"); err == nil {
		session := fmt.Sprintf("jq-wait-%d", time.Now().UnixNano())
		cmd := fmt.Sprintf("%s --role=admin --server-addr %s job wait %s; sleep 60", jqbin.Path(t), a.addr, long)
		require.NoError(t, exec.Command(tmux, "new-session", "-d", "-s", session, "-x", "200", "-y", "10", cmd).Run())
		t.Cleanup(func() { _ = exec.Command(tmux, "kill-session", "-t", session).Run() })
		testenv.Eventually(t, 20*time.Second, func() error {
			pane, err := exec.Command(tmux, "capture-pane", "-p", "-t", session).Output()
			if err != nil {
				return err
			}
			if !strings.Contains(string(pane), "job "+long+": RUNNING, attempt 1, ") {
				return fmt.Errorf("no live status line yet: %q", strings.TrimSpace(string(pane)))
			}
			return nil
		})
	} else {
		t.Log("tmux not found: the live status line is not checked")
	}

	// The long job is cancelled (its handler stops), so the worker can drain at once.
	a.ok("job", "cancel", long)
	r := a.run("job", "wait", long, "--wait-timeout", "2m")
	require.Equal(t, 1, r.Code, r.Stderr)
	require.Contains(t, r.Stderr, "DEAD_LETTERED")

	out = a.ok("worker", "shutdown", "w-wait", "--wait", "--wait-timeout", "2m")
	require.Equal(t, "worker w-wait is OFFLINE: it finished its jobs and deregistered\n", out)

	// With no worker left, a wait that gives up says why the job did not move.
	lonely := a.submit()
	r = a.run("job", "wait", lonely, "--wait-timeout", "6s")
	require.Equal(t, 1, r.Code, r.Stderr)
	require.Contains(t, r.Stderr, "has not ended after 6s (--wait-timeout); waiting: no connected worker serves queue default")
}
