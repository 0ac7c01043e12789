package e2e

// End-to-end tests of the embedded store with the real binary: the embedded store is the default of
// --role=all with no database configured, a --role=server on it serves remote workers with neither
// Postgres nor Redis, and a second server process on the same database is refused.

import (
	"net/http"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/jq-dev/jq/api/rpcclient"
	"github.com/jq-dev/jq/internal/health"
	"github.com/jq-dev/jq/test/internal/jqbin"
)

// TestEmbeddedServerRemoteWorker: --role=server on the embedded store, with Postgres and Redis
// pointed at closed ports (it must need neither), serves a worker in another process; /readyz has
// the one sqlite check; a second server on the same data directory exits 1 naming the holder.
func TestEmbeddedServerRemoteWorker(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	closed := strconv.Itoa(jqbin.FreePort(t))
	se := jqbin.NewServerEnv(t, "postgres://nobody@127.0.0.1:"+closed+"/none")
	env := append(slices.Clone(se.Env), "JQ_STORE_DRIVER=sqlite", "JQ_STORE_DATA_DIR="+dir, "JQ_REDIS_ADDR=127.0.0.1:"+closed)
	srv := jqbin.Start(t, env, "--role=server")
	srv.WaitLog(t, "server started")
	b := waitReadyz(t, se.HealthPort, http.StatusOK, checkIs("sqlite", health.StatusOK))
	require.Equal(t, health.StatusOK, b.Status)
	require.NotContains(t, b.Checks, "postgres")
	require.NotContains(t, b.Checks, "redis")

	w := jqbin.Start(t, []string{
		"JQ_WORKER_HEALTH_PORT=" + strconv.Itoa(jqbin.FreePort(t)),
		"JQ_WORKER_METRICS_PORT=" + strconv.Itoa(jqbin.FreePort(t)),
	}, "--role=worker", "--server-addr", se.Addr(), "--worker-id", "w-embedded")
	w.WaitLog(t, "worker registered")
	cl, err := rpcclient.New(rpcclient.Options{Addr: se.Addr()})
	require.NoError(t, err)
	defer cl.Close()
	submitAndWaitDone(t, cl)

	second := jqbin.NewServerEnv(t, se.DSN)
	r := jqbin.Run(t, append(second.Env, "JQ_STORE_DRIVER=sqlite", "JQ_STORE_DATA_DIR="+dir), "--role=server")
	require.Equal(t, 1, r.Code, "%s", r.Stderr)
	require.True(t, strings.Contains(r.Stderr, "in use by another jq process") &&
		strings.Contains(r.Stderr, "for several replicas use Postgres"), "%s", r.Stderr)

	stopCleanly(t, w)
	stopCleanly(t, srv)
	require.Empty(t, warnings(srv), "a normal start and stop on the embedded store logs no warning")
	require.Empty(t, warnings(w))
}
