package e2e

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/jq-dev/jq/internal/testenv"
)

// The constraint commands of the operator CLI against a real server: create, list,
// show, replace and delete with their exit codes; a job held back by a tenant's concurrency says
// so in `job status`, and `constraint show` counts the job running under the key.
func TestAdminConstraintsE2E(t *testing.T) {
	t.Parallel()
	c, a := newAdminE2E(t)
	a.ok("queue", "create", "limited")
	out := a.ok("constraint", "create", "per-tenant", "--match", "queue=limited", "--match", "type=exec",
		"--key", "{{.labels.tenant}}", "--concurrency", "1", "--rate", "100/m")
	require.Contains(t, out, "constraint per-tenant created: queue=limited type=exec key={{.labels.tenant}} concurrency=1 rate=100/m")
	a.fails(1, `constraint "per-tenant" already exists (--replace replaces it)`, "constraint", "create", "per-tenant", "--concurrency", "1")
	// A refusal names the constraint once, says what is wrong and what to do.
	a.fails(2, `jq: cannot create constraint "none": no limit set: give a concurrency, a rate or both`+"\n", "constraint", "create", "none")
	a.fails(2, `jq: cannot create constraint "globbed": type pattern "[": syntax error in pattern: give a glob such as email.*`,
		"constraint", "create", "globbed", "--match", "type=[", "--concurrency", "1")
	a.fails(2, "--rate", "constraint", "create", "bad", "--rate", "fast")
	a.fails(2, "key template", "constraint", "create", "bad", "--concurrency", "1", "--key", "{{.tenant}}")
	a.fails(2, "--match", "constraint", "create", "bad", "--concurrency", "1", "--match", "color=red")
	a.fails(3, `constraint "missing" not found`, "constraint", "show", "missing")
	a.fails(3, `constraint "missing" not found`, "constraint", "delete", "missing")

	list := a.ok("constraint", "list")
	require.Contains(t, list, "per-tenant")
	require.Contains(t, list, "queue=limited type=exec")

	// Two jobs of tenant acme: the first runs (sleeps), the second waits for its slot.
	sleep := program(t, "sleep")
	c.startFastWorker("w-limited", "limited", execEnv(sleep)...)
	payload := fmt.Sprintf(`{"argv":[%q,"30"]}`, sleep)
	first := a.submit("--queue", "limited", "--type", "exec", "--payload", payload, "--label", "tenant=acme")
	a.waitState(first, "RUNNING")
	second := a.submit("--queue", "limited", "--type", "exec", "--payload", payload, "--label", "tenant=acme")
	testenv.Eventually(t, 10*time.Second, func() error {
		if s := a.ok("job", "status", second); !strings.Contains(s, "limited by constraint per-tenant, key acme: 1/1 running") {
			return fmt.Errorf("job status does not say the constraint holds the job: %s", s)
		}
		return nil
	})
	m := a.json([]string{"constraint", "usage"}, "constraint", "show", "per-tenant")
	usage := m["usage"].(map[string]any)
	require.EqualValues(t, 1, usage["running"])
	require.EqualValues(t, 1, usage["keys"])
	top := usage["top"].([]any)
	require.Len(t, top, 1)
	require.Equal(t, "acme", top[0].(map[string]any)["key"])
	show := a.ok("constraint", "show", "per-tenant")
	require.Contains(t, show, "acme")
	require.Contains(t, show, "1/1")

	// Replaced with room for two: the second job starts.
	out = a.ok("constraint", "create", "per-tenant", "--match", "queue=limited", "--key", "{{.labels.tenant}}", "--concurrency", "2", "--replace")
	require.Contains(t, out, "concurrency=2")
	a.waitState(second, "RUNNING")

	require.Contains(t, a.ok("constraint", "delete", "per-tenant"), "constraint per-tenant deleted")
	require.Empty(t, a.json([]string{"constraints"}, "constraint", "list")["constraints"])
	a.ok("job", "cancel", first)
	a.ok("job", "cancel", second)
}
