package testenv

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"syscall"
)

// The ports tests hand to the processes they start come from [portsLow, portsHigh), below the
// kernel's ephemeral range (32768–60999 by default), from which ":0" listeners and every outgoing
// connection (to Postgres, Redis, the servers under test) take their ports: a port picked there can
// be taken by a client socket before the process under test binds it.
//
// The range is cut into blocks, and a test binary hands out only ports of blocks it holds. A block
// is held by an exclusive flock on its lock file, taken without waiting and kept open for the
// life of the process, so the kernel releases it when the process ends, however it ends. Test
// binaries running side by side (the packages of one go test, or several checkouts on one host)
// therefore never hand out the same port, even one whose server is down for a moment: a fault
// test restarts a server on the ports it had, and a port that merely looked free to another
// binary during that gap was taken by that binary's next server.
const (
	portsLow   = 20000
	portsHigh  = 32000
	portsBlock = 100
)

var ports struct {
	mu    sync.Mutex
	held  []*os.File // the lock files of the blocks held, open until the process ends
	next  int        // the next port of the current block; 0 before the first block
	limit int        // the end of the current block
}

// PickPort returns a TCP port that nothing listens on now, on every interface, that this test
// binary never handed out before and that no other test binary using testenv hands out while
// this one runs. Keep it for a server's whole life: a restart on the same port is safe.
func PickPort() (int, error) {
	return PickPorts(1)
}

// PickPorts returns the first of n consecutive ports, each as PickPort returns them: for a
// process that moves all of its ports by one offset (port_offset), whose moved ports must be
// this binary's too. n is at most the size of a block (100).
func PickPorts(n int) (int, error) {
	if n < 1 || n > portsBlock {
		return 0, fmt.Errorf("testenv: %d consecutive ports asked for, 1 to %d can be", n, portsBlock)
	}
	ports.mu.Lock()
	defer ports.mu.Unlock()
	for range (portsHigh - portsLow) / portsBlock {
		if ports.limit-ports.next < n {
			if err := holdBlock(); err != nil {
				return 0, err
			}
		}
		for ports.limit-ports.next >= n {
			first := ports.next
			taken := busyPort(first, n)
			if taken < 0 {
				ports.next = first + n
				return first, nil
			}
			// Something outside this scheme listens there (a jq left running by a killed test):
			// past it.
			ports.next = taken + 1
		}
	}
	return 0, errors.New("testenv: no free port in the blocks this test binary could hold")
}

// busyPort returns the first of the n ports from first that something listens on, or -1.
func busyPort(first, n int) int {
	for p := first; p < first+n; p++ {
		ln, err := net.Listen("tcp", ":"+strconv.Itoa(p))
		if err != nil {
			return p
		}
		_ = ln.Close()
	}
	return -1
}

// holdBlock takes one more block of the range, starting the search at a random one so that
// binaries starting together do not all try the same lock files first.
func holdBlock() error {
	// Not os.TempDir(): every test binary on the host shares the range, whatever its TMPDIR.
	dir := "/tmp/jq-test-ports"
	if err := os.MkdirAll(dir, 0o777); err != nil {
		return fmt.Errorf("testenv: port lock directory: %w", err)
	}
	_ = os.Chmod(dir, 0o777|os.ModeSticky) // every user's tests share the range
	blocks := (portsHigh - portsLow) / portsBlock
	start := rand.IntN(blocks)
	for i := range blocks {
		b := (start + i) % blocks
		first := portsLow + b*portsBlock
		f, err := os.OpenFile(filepath.Join(dir, strconv.Itoa(first)+".lock"), os.O_RDWR|os.O_CREATE, 0o666)
		if err != nil {
			continue // another user's file we may not open: their block
		}
		_ = f.Chmod(0o666)
		// A block this binary holds already fails here too: flock locks of two open files conflict
		// even in one process.
		if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
			_ = f.Close()
			continue
		}
		ports.held = append(ports.held, f)
		ports.next, ports.limit = first, first+portsBlock
		return nil
	}
	return fmt.Errorf("testenv: every block of ports %d-%d is held by other test binaries (lock files in %s)", portsLow, portsHigh-1, dir)
}
