package roles_test

import (
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/jq-dev/jq/internal/testenv"
	"github.com/jq-dev/jq/internal/testenv/jqserver"
)

// Shell completion offers the queue, schedule, constraint and worker names the server knows, from
// the server of the line being completed (--server-addr) or of the environment; with no server
// answering it offers nothing and still exits 0 in silence.
func TestCompletionOfNamesFromTheServer(t *testing.T) {
	t.Parallel()
	srv := jqserver.StartRole(t, "all", "JQ_WORKER_ID=w-complete-1")
	env := []string{"JQ_SERVER_ADDR=" + srv.Addr}
	for _, args := range [][]string{
		{"queue", "create", "emails"},
		{"queue", "create", "exports"},
		{"schedule", "create", "nightly", "--cron", "@daily"},
		{"constraint", "create", "per-tenant", "--match", "queue=emails", "--concurrency", "2"},
	} {
		r := runJQ(t, env, args...)
		require.Equal(t, 0, r.code, "%v: %s", args, r.stderr)
	}
	complete := func(env []string, line string) []string {
		r := runJQ(t, append(env, "COMP_LINE="+line, "COMP_POINT="+strconv.Itoa(len(line))), "jq")
		require.Equal(t, 0, r.code, r.stderr)
		require.Empty(t, r.stderr)
		return strings.Fields(r.stdout)
	}
	require.Equal(t, []string{"default", "emails", "exports"}, complete(env, "jq queue pause "))
	require.Equal(t, []string{"emails", "exports"}, complete(env, "jq queue stats e"))
	require.Equal(t, []string{"emails", "exports"}, complete(env, "jq job submit --queue e"))
	require.Equal(t, []string{"emails"}, complete(env, "jq --role=admin peek em"))
	require.Equal(t, []string{"nightly"}, complete(env, "jq schedule show "))
	require.Equal(t, []string{"per-tenant"}, complete(env, "jq constraint delete "))
	testenv.Eventually(t, 30*time.Second, func() error {
		if got := complete(env, "jq worker drain w-"); len(got) != 1 || got[0] != "w-complete-1" {
			return fmt.Errorf("worker names: %v", got)
		}
		return nil
	})
	// The line's --server-addr wins over the environment's.
	require.Equal(t, []string{"nightly"}, complete([]string{"JQ_SERVER_ADDR=127.0.0.1:1"}, "jq --server-addr "+srv.Addr+" schedule show "))
	// No server: nothing offered, no error.
	closed := "127.0.0.1:" + strconv.Itoa(freePort(t))
	require.Empty(t, complete([]string{"JQ_SERVER_ADDR=" + closed}, "jq queue pause "))
}
