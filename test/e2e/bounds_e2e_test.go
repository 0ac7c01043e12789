package e2e

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// The resource bounds on the real binary: with one-second connection bounds a worker's
// assignment stream outlives them without reconnecting, and `job list` and `peek` leave payloads
// out unless --payloads, in pages cut by server.max_page_bytes.
func TestResourceBoundsE2E(t *testing.T) {
	t.Parallel()
	c := newCluster(t)
	se := c.startServer("JQ_GRPC_IDLE_TIMEOUT_S=1", "JQ_GRPC_READ_BODY_TIMEOUT_S=1", "JQ_SERVER_MAX_PAGE_BYTES=65536")
	a := adminCLI{t: t, addr: se.Addr()}
	a.ok("queue", "create", "big")
	w := c.startFastWorker("w-bounds", "default")

	first := a.submit("--type", "noop", "--payload", "{}")
	a.waitState(first, "DONE")
	time.Sleep(3 * time.Second) // the test's premise: the stream sits past both bounds
	second := a.submit("--type", "noop", "--payload", "{}")
	a.waitState(second, "DONE")
	require.Equal(t, 1, countLogs(w.Output(), "assignment stream open"), "the stream was never cut")
	require.Zero(t, countLogs(w.Output(), "assignment stream ended; reconnecting"))

	// Five jobs of 30 KB on a queue nothing serves; a 64 KiB page holds two of them with payloads.
	payload := `{"blob":"` + strings.Repeat("x", 30<<10) + `"}`
	file := filepath.Join(t.TempDir(), "payload.json")
	require.NoError(t, os.WriteFile(file, []byte(payload), 0o600))
	for range 5 {
		a.submit("--queue", "big", "--payload", "@"+file)
	}

	r := a.run("job", "list", "--queue", "big", "--output", "json")
	require.Equal(t, 0, r.Code, r.Stderr)
	require.Contains(t, r.Stderr, "add --payloads")
	var lean map[string]any
	require.NoError(t, json.Unmarshal([]byte(r.Stdout), &lean))
	require.Len(t, jsonList(t, lean, "jobs"), 5)
	for _, j := range jsonList(t, lean, "jobs") {
		require.Empty(t, j["payload"])
	}

	full := a.json([]string{"jobs", "next_page_token"}, "job", "list", "--queue", "big", "--payloads")
	jobs := jsonList(t, full, "jobs")
	require.Len(t, jobs, 2, "cut by bytes, not by --limit")
	require.NotEmpty(t, full["next_page_token"])
	require.Equal(t, map[string]any{"blob": strings.Repeat("x", 30<<10)}, jobs[0]["payload"], "a JSON payload is shown as JSON")

	r = a.run("peek", "big", "--payloads")
	require.Equal(t, 0, r.Code, r.Stderr)
	require.Contains(t, r.Stdout, "PAYLOAD")
	require.Contains(t, r.Stderr, "only 2 jobs fit one response")
	require.NotContains(t, a.ok("peek", "big"), "PAYLOAD")
}

func countLogs(lines []string, message string) int {
	n := 0
	for _, l := range lines {
		var m map[string]any
		if json.Unmarshal([]byte(l), &m) == nil && m["message"] == message {
			n++
		}
	}
	return n
}
