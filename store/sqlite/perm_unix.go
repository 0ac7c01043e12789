//go:build unix

package sqlite

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"syscall"
)

// checkOwner refuses a data directory or database file that another local account could read
// or replace: one owned by another user, or (the directory) writable by group or others, or (a
// database file) open to group or others at all. The database holds every payload and result,
// and whoever may write the directory may swap the file or its -wal beside a running server.
// A file that does not exist yet passes: New creates it 0600.
func checkOwner(path string, dir bool) error {
	fi, err := os.Lstat(path)
	if errors.Is(err, fs.ErrNotExist) && !dir {
		return nil
	}
	if err != nil {
		return fmt.Errorf("sqlite: %w", err)
	}
	what, mode, fix := "database file", "0600", "chmod 600 "+path
	bad := fi.Mode().Perm() & 0o077
	if dir {
		what, mode, fix = "data directory", "0700", "chmod go-w "+path
		bad = fi.Mode().Perm() & 0o022
	}
	if !dir && !fi.Mode().IsRegular() {
		return fmt.Errorf("sqlite: the database file %s is not a regular file (a symbolic link?): point store.data_dir at a directory of this user's own", path)
	}
	if st, ok := fi.Sys().(*syscall.Stat_t); ok && int(st.Uid) != os.Geteuid() {
		return fmt.Errorf("sqlite: the %s %s is owned by uid %d, not by this process's user (uid %d): another account could read or replace it; chown it, or point store.data_dir at a directory of this user's own",
			what, path, st.Uid, os.Geteuid())
	}
	if bad != 0 {
		return fmt.Errorf("sqlite: the %s %s has mode %04o: another account could read or replace it; %s (jq creates it %s)",
			what, path, fi.Mode().Perm(), fix, mode)
	}
	return nil
}
