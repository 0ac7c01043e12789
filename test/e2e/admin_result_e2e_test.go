package e2e

import (
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/require"
)

// job result (seed 001): a kept success's bytes on stdout (exit 0), consumed once; no result kept,
// consumed, not finished, a failure: one line on stderr (exit 1); an unknown job: exit 3. On a
// terminal a result that does not end its line gets a newline; a pipe gets the bytes exactly.
func TestAdminJobResultE2E(t *testing.T) {
	t.Parallel()
	c, a := newAdminE2E(t)
	q := a.json([]string{"queue"}, "queue", "create", "results", "--max-retries", "0", "--result-retention", "1h")
	require.Equal(t, "3600s", q["queue"].(map[string]any)["result_retention"])
	require.Contains(t, a.ok("queue", "create", "results-default"), "result retention 24h0m0s")
	c.startFastWorker("w-results", "results")

	kept := a.submit("--queue", "results", "--type", "sleep", "--payload", `{"ms":1}`, "--keep-result")
	a.waitState(kept, "DONE")
	require.Equal(t, `{"slept_ms":1}`, a.ok("job", "result", kept), "the result's bytes, as reported, nothing added")
	require.Equal(t, "{\"slept_ms\":1}\r\n", a.onTerminal("job", "result", kept),
		"on a terminal the line ends, so the prompt starts on a line of its own")
	m := a.json([]string{"found", "result", "state"}, "job", "result", kept)
	res := requireFields(t, m["result"], []string{"type", "data", "checksum_sha256", "finished_at", "size"})
	require.Equal(t, "success", res["type"])
	require.Equal(t, true, m["found"])

	require.JSONEq(t, `{"slept_ms":1}`, a.ok("job", "result", kept, "--consume"))
	a.fails(1, "no result (kept: true)", "job", "result", kept)
	a.fails(1, "no result (kept: true)", "job", "result", kept, "--consume")

	notKept := a.submit("--queue", "results", "--type", "sleep", "--payload", `{"ms":1}`)
	a.waitState(notKept, "DONE")
	a.fails(1, "no result (kept: false)", "job", "result", notKept)
	require.Contains(t, a.ok("job", "status", notKept), "(not kept)")

	bad := a.submit("--queue", "results", "--type", "sleep", "--payload", `{"fail":true}`, "--keep-result")
	a.waitState(bad, "DEAD_LETTERED")
	a.fails(1, "failed (DEAD_LETTERED, reason max_retries_exceeded, will not be retried)", "job", "result", bad)
	r := a.run("job", "result", bad, "--output", "json")
	require.Equal(t, 1, r.Code, r.Stderr)
	var whole struct {
		Found  bool           `json:"found"`
		Result map[string]any `json:"result"`
	}
	require.NoError(t, json.Unmarshal([]byte(r.Stdout), &whole), "-o json prints the whole answer")
	require.True(t, whole.Found)
	require.Equal(t, "failure", whole.Result["type"])
	require.Equal(t, false, whole.Result["should_retry"])
	require.Equal(t, "max_retries_exceeded", whole.Result["reason"])

	require.Contains(t, a.ok("queue", "pause", "results"), "paused")
	waiting := a.submit("--queue", "results", "--type", "noop", "--keep-result")
	a.fails(1, "is PENDING, not finished", "job", "result", waiting)

	a.fails(3, "not found", "job", "result", "00000000-0000-4000-8000-000000000000")
	a.fails(2, "", "job", "result", "not-a-uuid")
}
