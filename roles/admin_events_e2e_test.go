package roles_test

import (
	"encoding/json"
	"fmt"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/jq-dev/jq/internal/testenv"
)

// `events tail` with Kafka off follows the events through the API (the Postgres source), prints
// one JSON object per event, and ends with exit 0 on Ctrl-C.
func TestAdminEventsTailPostgresE2E(t *testing.T) {
	t.Parallel()
	c, a := newAdminE2E(t)
	a.ok("queue", "create", "tail")
	c.startFastWorker("w-tail", "tail")

	// Due in 2 s: it is assigned, run and completed while the tail runs, whenever its first poll is.
	id := a.submit("--queue", "tail", "--delay", "2s", "--payload", "{}")
	byQueue := startJQ(t, nil, "--role=admin", "--server-addr", a.addr, "events", "tail", "--queue", "tail", "-o", "json", "--interval", "100ms")
	byJob := startJQ(t, nil, "--role=admin", "--server-addr", a.addr, "events", "tail", "--job", id, "-o", "json", "--interval", "100ms")

	moves := func(p *jqProcess) []string {
		var out []string
		for _, l := range p.output() {
			var m map[string]any
			require.NoError(t, json.Unmarshal([]byte(l), &m), l)
			requireFields(t, m, eventFields)
			require.Equal(t, id, m["job_id"])
			out = append(out, fmt.Sprintf("%v→%v", strings.TrimPrefix(m["from_state"].(string), "JOB_STATE_"),
				strings.TrimPrefix(m["to_state"].(string), "JOB_STATE_")))
		}
		return out
	}
	done := []string{"PENDING→ASSIGNED", "ASSIGNED→RUNNING", "RUNNING→DONE"}
	for _, p := range []*jqProcess{byQueue, byJob} {
		testenv.Eventually(t, 30*time.Second, func() error {
			if got := moves(p); !slices.Contains(got, "RUNNING→DONE") {
				return fmt.Errorf("events so far: %v", got)
			}
			return nil
		})
	}
	require.Equal(t, append([]string{"UNSPECIFIED→PENDING"}, done...), moves(byJob), "--job: the history, then what follows")
	got := moves(byQueue)
	require.Equal(t, done, got[len(got)-3:], "--queue: every transition after the first poll, in order")

	// --job ends by itself after the job's last event; --queue follows until Ctrl-C.
	select {
	case <-byJob.done:
		require.NoError(t, byJob.err, "the followed job ended: exit 0")
	case <-time.After(10 * time.Second):
		t.Fatal("events tail --job did not end after the job's last event")
	}
	require.NoError(t, byQueue.cmd.Process.Signal(os.Interrupt))
	select {
	case <-byQueue.done:
		require.NoError(t, byQueue.err, "Ctrl-C is exit 0")
	case <-time.After(10 * time.Second):
		t.Fatal("events tail did not stop on Ctrl-C")
	}
	a.fails(3, "not found", "events", "tail", "--job", "00000000-0000-4000-8000-000000000000")
}
