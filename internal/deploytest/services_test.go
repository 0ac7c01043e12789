package deploytest

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/jq-dev/jq/internal/testenv"
)

// TestServicesCreatesMissingDatabase runs scripts/services.sh against the running test Postgres
// with a URL naming a database that does not exist: the script creates it and hands the command
// that URL. Once through JQ_TEST_DATABASE_URL with a parameter only pgx knows (psql refuses
// pool_max_conns), once through jq's own JQ_DB_URL alone (`JQ_DB_URL=… services.sh run -- bin/jq`).
func TestServicesCreatesMissingDatabase(t *testing.T) {
	t.Parallel()
	if _, err := exec.LookPath("psql"); err != nil {
		t.Skip("psql not installed: services.sh creates databases with it")
	}
	for _, variable := range []string{"JQ_TEST_DATABASE_URL", "JQ_DB_URL"} {
		t.Run(variable, func(t *testing.T) {
			t.Parallel()
			name := missingDatabase(t)
			u, err := url.Parse(testenv.PostgresURL())
			require.NoError(t, err)
			u.Path = "/" + name
			q := u.Query()
			q.Set("pool_max_conns", "2")
			u.RawQuery = q.Encode()

			env := []string{"JQ_TEST_REDIS_ADDR=" + testenv.RedisAddr(), variable + "=" + u.String()}
			for _, kv := range os.Environ() {
				if !strings.HasPrefix(kv, "JQ_TEST_DATABASE_URL=") && !strings.HasPrefix(kv, "JQ_DB_URL=") &&
					!strings.HasPrefix(kv, "JQ_TEST_REDIS_ADDR=") {
					env = append(env, kv)
				}
			}
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			cmd := exec.CommandContext(ctx, "bash", filepath.Join(repoRoot(t), "scripts", "services.sh"),
				"run", "--", "sh", "-c", `printf '%s\n%s\n' "$JQ_DB_URL" "$JQ_TEST_DATABASE_URL"`)
			cmd.Env = env
			var stderr strings.Builder
			cmd.Stderr = &stderr
			out, err := cmd.Output()
			require.NoError(t, err, "services.sh:\n%s", stderr.String())
			require.Contains(t, stderr.String(), "services: created database "+name)
			require.Equal(t, u.String()+"\n"+u.String()+"\n", string(out), "the command gets the URL it was pointed at")
			require.True(t, databaseExists(ctx, t, name))
		})
	}
}

// missingDatabase returns the name of a database that does not exist, dropped when the test
// ends if something created it.
func missingDatabase(t *testing.T) string {
	t.Helper()
	b := make([]byte, 6)
	_, _ = rand.Read(b)
	name := "jq_svc_check_" + hex.EncodeToString(b)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	require.False(t, databaseExists(ctx, t, name))
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		conn, err := pgx.Connect(ctx, testenv.PostgresURL())
		require.NoError(t, err)
		defer func() { _ = conn.Close(ctx) }()
		_, err = conn.Exec(ctx, "DROP DATABASE IF EXISTS "+pgx.Identifier{name}.Sanitize())
		require.NoError(t, err)
	})
	return name
}

func databaseExists(ctx context.Context, t *testing.T, name string) bool {
	t.Helper()
	conn, err := pgx.Connect(ctx, testenv.PostgresURL())
	require.NoError(t, err)
	defer func() { _ = conn.Close(ctx) }()
	var n int
	require.NoError(t, conn.QueryRow(ctx, "SELECT count(*) FROM pg_database WHERE datname = $1", name).Scan(&n))
	return n == 1
}
