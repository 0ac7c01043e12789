package roles_test

import (
	"testing"

	"github.com/stretchr/testify/require"
)

// TestStoreDriverDefaults: auto resolves to the embedded store for --role=all with every db.* key at
// its default, to Postgres once a database is configured or for --role=server; an explicit driver
// stays.
func TestStoreDriverDefaults(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		env  []string
		args []string
		want string
	}{
		{nil, []string{"--role=all"}, "driver: sqlite"},
		{[]string{"JQ_DB_URL=postgres://u@db.example:5432/jq"}, []string{"--role=all"}, "driver: postgres"},
		{[]string{"JQ_DB_HOST=db.example"}, []string{"--role=all"}, "driver: postgres"},
		{nil, []string{"--role=server"}, "driver: postgres"},
		{[]string{"JQ_STORE_DRIVER=sqlite"}, []string{"--role=server"}, "driver: sqlite"},
		{[]string{"JQ_STORE_DRIVER=postgres"}, []string{"--role=all"}, "driver: postgres"},
	} {
		r := runJQ(t, c.env, append(c.args, "--print-config")...)
		require.Equal(t, 0, r.code, "%v %v: %s", c.env, c.args, r.stderr)
		require.Contains(t, r.stdout, c.want, "%v %v", c.env, c.args)
	}
	r := runJQ(t, []string{"JQ_STORE_DRIVER=mysql"}, "--role=all", "--print-config")
	require.Equal(t, 1, r.code)
	require.Contains(t, r.stderr, "store.driver")
}
