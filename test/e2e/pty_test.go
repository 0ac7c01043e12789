package e2e

import (
	"errors"
	"io"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"

	"github.com/jq-dev/jq/test/internal/jqbin"
)

// onTerminal runs `jq --role=admin --server-addr <addr> args…` with its stdout on a pseudo-terminal
// and returns what the terminal received (the line discipline turns "\n" into "\r\n"). It fails
// the test unless the command exits 0.
func (a adminCLI) onTerminal(args ...string) string {
	a.t.Helper()
	master, slave := openPTY(a.t)
	cmd := exec.Command(jqbin.Path(a.t), append([]string{"--role=admin", "--server-addr", a.addr}, args...)...)
	cmd.Env = append(os.Environ(), jqbin.QuickExit())
	var errb strings.Builder
	cmd.Stdout, cmd.Stderr = slave, &errb
	read := make(chan string, 1)
	go func() {
		b, err := io.ReadAll(master)
		if !errors.Is(err, syscall.EIO) { // the master reads EIO once the last slave is closed
			require.NoError(a.t, err)
		}
		read <- string(b)
	}()
	err := cmd.Run()
	require.NoError(a.t, slave.Close())
	out := <-read
	require.NoError(a.t, err, "jq %v: %s", args, errb.String())
	return out
}

// openPTY opens a pseudo-terminal pair through /dev/ptmx; both ends are closed with the test.
func openPTY(t *testing.T) (master, slave *os.File) {
	t.Helper()
	master, err := os.OpenFile("/dev/ptmx", os.O_RDWR|syscall.O_NOCTTY, 0)
	require.NoError(t, err)
	t.Cleanup(func() { _ = master.Close() })
	fd := int(master.Fd())
	require.NoError(t, unix.IoctlSetPointerInt(fd, unix.TIOCSPTLCK, 0)) // unlock the slave
	n, err := unix.IoctlGetInt(fd, unix.TIOCGPTN)
	require.NoError(t, err)
	slave, err = os.OpenFile("/dev/pts/"+strconv.Itoa(n), os.O_RDWR|syscall.O_NOCTTY, 0)
	require.NoError(t, err)
	t.Cleanup(func() { _ = slave.Close() })
	return master, slave
}
