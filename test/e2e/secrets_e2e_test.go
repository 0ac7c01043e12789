package e2e

import (
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/jq-dev/jq/test/internal/jqbin"
)

// FR-045: a server listening on a non-loopback address refuses a secret in its config file, naming
// the key and the variable to use, and starts nothing; on loopback it only warns
// (TestSecretInFileWarns).
func TestSecretInFileRefusedInProduction(t *testing.T) {
	t.Parallel()
	file := filepath.Join(t.TempDir(), "jq.yaml")
	require.NoError(t, os.WriteFile(file, []byte("db:\n  password: in-the-file\nredis:\n  password: also-in-it\n"), 0o600))
	cmd := exec.Command(jqbin.Path(t), "--role=server", "--config", file, "--dry-run")
	cmd.Env = append(os.Environ(), "JQ_GRPC_HOST=0.0.0.0")
	out, err := cmd.CombinedOutput()
	var ee *exec.ExitError
	require.ErrorAs(t, err, &ee, string(out))
	require.Equal(t, 1, ee.ExitCode())
	require.Contains(t, string(out), "db.password (file "+file+"): is set in the config file")
	require.Contains(t, string(out), "set JQ_DB_PASSWORD instead")
	require.Contains(t, string(out), "set JQ_REDIS_PASSWORD instead")
	require.NotContains(t, string(out), "in-the-file")
	require.NotContains(t, string(out), "also-in-it")
	require.NotContains(t, string(out), "CHECK", "nothing was started or probed")
}
