package sqlite

import (
	"fmt"
	"os"
	"strconv"
	"strings"

	"github.com/gofrs/flock"
)

// lockFile takes an exclusive, non-blocking lock on path (created when missing) — flock(2) on
// Unix, LockFileEx on Windows, through gofrs/flock — and writes this process's id into it for the
// message of the next process that finds it taken. The kernel releases the lock when the process
// ends, however it ends: no file is left to remove by hand after a kill -9.
func lockFile(path string) (*flock.Flock, error) {
	fl := flock.New(path, flock.SetFlag(os.O_CREATE|os.O_RDWR), flock.SetPermissions(0o600))
	ok, err := fl.TryLock()
	if err != nil {
		return nil, fmt.Errorf("sqlite: lock %s: %w", path, err)
	}
	if !ok {
		holder, _ := os.ReadFile(path)
		pid := strings.TrimSpace(string(holder))
		if pid == "" {
			pid = "unknown"
		}
		return nil, fmt.Errorf("%w (pid %s holds %s): one server process per embedded store; for several replicas use Postgres (store.driver: postgres)",
			ErrInUse, pid, path)
	}
	// Best effort: where the lock is mandatory (Windows), the holder's id is not written.
	_ = os.WriteFile(path, []byte(strconv.Itoa(os.Getpid())+"\n"), 0o600)
	return fl, nil
}

func unlockFile(fl *flock.Flock) {
	_ = fl.Close() // unlocks and closes
}
