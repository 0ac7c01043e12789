//go:build !unix

package sqlite

import (
	"fmt"
	"os"
)

// lockFile opens path exclusively where flock does not exist: the file is created and removed by
// the process that holds the store, so a process killed without Close leaves it behind and the
// next start must remove it by hand (the error says so).
func lockFile(path string) (*os.File, error) {
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE|os.O_EXCL, 0o640) //nolint:gosec // the data directory's own lock file
	if err != nil {
		return nil, fmt.Errorf("%w (%s exists; remove it if no jq runs): %v", ErrInUse, path, err)
	}
	return f, nil
}

func unlockFile(f *os.File) {
	_ = f.Close()
	_ = os.Remove(f.Name())
}
