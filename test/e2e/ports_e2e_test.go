package e2e

import (
	"context"
	"os"
	"os/exec"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/jq-dev/jq/api/rpcclient"
	"github.com/jq-dev/jq/internal/testenv"
	"github.com/jq-dev/jq/test/internal/jqbin"
)

// TestTwoRoleAllInstancesSideBySide: a second jq --role=all on the same host, with a data directory
// of its own, first fails on the first port it finds taken, naming port_offset; with that one setting
// changed it runs beside the first, each serving its API, console and jobs.
func TestTwoRoleAllInstancesSideBySide(t *testing.T) {
	t.Parallel()
	names := []string{"JQ_GRPC_PORT", "JQ_HEALTH_PORT", "JQ_METRICS_PORT", "JQ_UI_PORT",
		"JQ_WORKER_HEALTH_PORT", "JQ_WORKER_METRICS_PORT"}
	// Twice as many ports as one instance takes, consecutive: the offset moves the second instance
	// onto the second half, ports of this test too.
	base, err := testenv.PickPorts(2 * len(names))
	require.NoError(t, err)
	ports, offset := map[string]int{}, len(names)
	for i, v := range names {
		ports[v] = base + i
	}
	env := func(dataDir string, extra ...string) []string {
		e := []string{"JQ_STORE_DRIVER=sqlite", "JQ_STORE_DATA_DIR=" + dataDir}
		for k, p := range ports {
			e = append(e, k+"="+strconv.Itoa(p))
		}
		return append(e, extra...)
	}
	first := jqbin.Start(t, env(t.TempDir()), "--role=all")
	first.WaitLog(t, "server started")

	// The same ports again: a one-line error that names the setting to change, exit 1.
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	clash := exec.CommandContext(ctx, jqbin.Path(t), "--role=all")
	clash.Env = append(os.Environ(), env(t.TempDir())...)
	out, err := clash.CombinedOutput()
	require.Error(t, err, "%s", out)
	require.Equal(t, 1, clash.ProcessState.ExitCode(), "%s", out)
	require.Regexp(t, `listen [a-z ]+: 127\.0\.0\.1:\d+ is already in use \(another jq on this host\?\): set port_offset `+
		`\(--port-offset, JQ_PORT_OFFSET\) to move every port of this process, or [a-z_.]+ \(JQ_[A-Z_]+\) for this one alone`, string(out))

	second := jqbin.Start(t, env(t.TempDir(), "JQ_PORT_OFFSET="+strconv.Itoa(offset)), "--role=all")
	second.WaitLog(t, "server started")
	for _, grpc := range []int{ports["JQ_GRPC_PORT"], ports["JQ_GRPC_PORT"] + offset} {
		cl, err := rpcclient.New(rpcclient.Options{Addr: "127.0.0.1:" + strconv.Itoa(grpc)})
		require.NoError(t, err)
		submitAndWaitDone(t, cl)
		cl.Close()
	}
	for _, p := range []int{ports["JQ_UI_PORT"], ports["JQ_UI_PORT"] + offset} {
		jqbin.HTTPGetOK(t, p, "/login", "jq")
	}
	jqbin.HTTPGetOK(t, ports["JQ_WORKER_METRICS_PORT"]+offset, "/metrics", "go_goroutines")
	stopCleanly(t, second)
	stopCleanly(t, first)
}
