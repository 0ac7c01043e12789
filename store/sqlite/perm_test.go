//go:build unix

package sqlite_test

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/jq-dev/jq/store/sqlite"
)

// The embedded store creates its directory 0700 and its database 0600, and refuses a directory
// or file that another local account could read or replace (another owner, group/other write on
// the directory, any group/other access to the file), with one line naming the path and the fix,
// before it opens anything.
func TestStoreRefusesForeignOrOpenFiles(t *testing.T) {
	t.Parallel()
	ctx := context.Background()

	dir := filepath.Join(t.TempDir(), "data")
	s, err := sqlite.New(ctx, sqlite.Config{Path: filepath.Join(dir, "jq.db")})
	require.NoError(t, err)
	s.Close()
	modeOf := func(p string) os.FileMode {
		fi, err := os.Stat(p)
		require.NoError(t, err)
		return fi.Mode().Perm()
	}
	require.Equal(t, os.FileMode(0o700), modeOf(dir))
	require.Equal(t, os.FileMode(0o600), modeOf(filepath.Join(dir, "jq.db")))

	type setup func(t *testing.T, dir, db string)
	chmod := func(p func(dir, db string) string, m os.FileMode) setup {
		return func(t *testing.T, dir, db string) { require.NoError(t, os.Chmod(p(dir, db), m)) }
	}
	theDir := func(dir, _ string) string { return dir }
	theDB := func(_, db string) string { return db }
	cases := map[string]struct {
		setup setup
		want  []string
	}{
		"directory writable by others": {chmod(theDir, 0o777), []string{"data directory", "mode 0777", "chmod go-w"}},
		"directory writable by group":  {chmod(theDir, 0o770), []string{"data directory", "mode 0770", "chmod go-w"}},
		"database readable by others":  {chmod(theDB, 0o644), []string{"database file", "mode 0644", "chmod 600"}},
		"database writable by all":     {chmod(theDB, 0o666), []string{"database file", "mode 0666", "chmod 600"}},
	}
	if os.Geteuid() == 0 { // only root can give a file away
		const nobody = 65534
		cases["directory of another user"] = struct {
			setup setup
			want  []string
		}{func(t *testing.T, dir, _ string) { require.NoError(t, os.Chown(dir, nobody, nobody)) }, []string{"data directory", "owned by uid 65534", "chown"}}
		cases["database of another user"] = struct {
			setup setup
			want  []string
		}{func(t *testing.T, _, db string) { require.NoError(t, os.Chown(db, nobody, nobody)) }, []string{"database file", "owned by uid 65534", "chown"}}
	}
	for name, c := range cases {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			dir := filepath.Join(t.TempDir(), "data")
			require.NoError(t, os.Mkdir(dir, 0o700))
			db := filepath.Join(dir, "jq.db")
			require.NoError(t, os.WriteFile(db, nil, 0o600))
			c.setup(t, dir, db)
			_, err := sqlite.New(ctx, sqlite.Config{Path: db})
			require.Error(t, err)
			msg := err.Error()
			require.NotContains(t, msg, "\n")
			for _, w := range append(c.want, dir) {
				require.Contains(t, msg, w)
			}
			_, err = os.Stat(db + "-wal")
			require.True(t, os.IsNotExist(err), "nothing was opened")
			require.False(t, strings.Contains(msg, "%!"), msg)
		})
	}
}
