package testenv

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// process is one private server run as a child of the test binary. PDEATHSIG takes it
// down if the test binary dies without running its cleanups (a timeout, a crash).
//
// Not a process group of its own: postgres puts every backend in a session of its own
// (setsid), so Kill finds the server's descendants through /proc instead, and sharing the
// test's group lets a terminal's Ctrl-C reach the servers too.
type process struct {
	tb      testing.TB
	name    string   // for messages: "postgres", "redis-server"
	argv    []string // the server command line
	dir     string   // working directory
	logPath string   // the server's stdout and stderr
	cred    *syscall.Credential
	stopSig syscall.Signal                  // the server's clean-shutdown signal
	ready   func(ctx context.Context) error // nil once the server accepts requests

	mu   sync.Mutex
	cmd  *exec.Cmd
	done chan struct{} // closed when cmd has exited and been reaped
}

// start launches the server and waits until ready reports it up.
func (p *process) start() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.cmd != nil {
		return fmt.Errorf("%s is already running", p.name)
	}
	logFile, err := os.OpenFile(p.logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return err
	}
	cmd := exec.Command(p.argv[0], p.argv[1:]...)
	cmd.Dir = p.dir
	cmd.Stdout = logFile
	cmd.Stderr = logFile
	// Pdeathsig fires when the forking OS thread exits; Go ends a thread only when a
	// goroutine exits while locked to it (runtime.LockOSThread), which the testing
	// package, pgx and go-redis never do.
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: p.cred, Pdeathsig: syscall.SIGKILL}
	err = cmd.Start()
	_ = logFile.Close() // the child holds its own descriptor
	if err != nil {
		return fmt.Errorf("start %s: %w", p.name, err)
	}
	done := make(chan struct{})
	go func() {
		_ = cmd.Wait() // a non-zero exit is expected after Kill
		close(done)
	}()
	p.cmd, p.done = cmd, done

	ctx, cancel := context.WithTimeout(context.Background(), readyTimeout)
	defer cancel()
	err = poll(readyTimeout, func() error {
		select {
		case <-done:
			return errExited
		default:
		}
		attempt, cancel := context.WithTimeout(ctx, 2*time.Second)
		defer cancel()
		return p.ready(attempt)
	})
	if err != nil {
		_ = p.killLocked()
		if errors.Is(err, errExited) {
			return fmt.Errorf("%s %w during start-up; log:\n%s", p.name, errExited, logTail(p.logPath))
		}
		return fmt.Errorf("%s not ready within %v (%w); log:\n%s", p.name, readyTimeout, err, logTail(p.logPath))
	}
	return nil
}

var errExited = errors.New("process exited")

// stop asks the server to shut down cleanly, killing it if it has not within readyTimeout.
func (p *process) stop() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.cmd == nil {
		return nil
	}
	procs := descendants(p.cmd.Process.Pid)
	_ = p.cmd.Process.Signal(p.stopSig)
	select {
	case <-p.done:
	case <-time.After(readyTimeout):
		_ = p.killLocked()
		return fmt.Errorf("%s ignored %v for %v and was killed", p.name, p.stopSig, readyTimeout)
	}
	p.cmd, p.done = nil, nil
	return waitGone(procs)
}

// kill sends SIGKILL to the server and all its descendants at once, like a machine crash,
// and waits until they are gone: a restarted postgres refuses to start while an old
// backend still holds its shared memory.
func (p *process) kill() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.cmd == nil {
		return nil
	}
	return p.killLocked()
}

func (p *process) killLocked() error {
	pid := p.cmd.Process.Pid
	_ = syscall.Kill(pid, syscall.SIGSTOP) // a stopped server forks no new children
	procs := descendants(pid)
	_ = syscall.Kill(pid, syscall.SIGKILL)
	for _, d := range procs {
		_ = syscall.Kill(d, syscall.SIGKILL)
	}
	<-p.done // SIGKILL cannot be ignored
	p.cmd, p.done = nil, nil
	return waitGone(procs)
}

// descendants lists the processes below pid, from /proc (nil without procfs).
func descendants(pid int) []int {
	children := map[int][]int{}
	entries, _ := os.ReadDir("/proc")
	for _, e := range entries {
		child, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		if ppid, state, ok := procStat(child); ok && state != "Z" {
			children[ppid] = append(children[ppid], child)
		}
	}
	var out []int
	queue := []int{pid}
	for len(queue) > 0 {
		next := children[queue[0]]
		queue = append(queue[1:], next...)
		out = append(out, next...)
	}
	return out
}

// waitGone waits until none of procs is running (a zombie counts as gone: it holds no
// resources, and an init that does not reap may keep it around).
func waitGone(procs []int) error {
	return poll(readyTimeout, func() error {
		for _, pid := range procs {
			if _, state, ok := procStat(pid); ok && state != "Z" && state != "X" {
				return fmt.Errorf("process %d still running", pid)
			}
		}
		return nil
	})
}

// procStat reads a process's parent and state from /proc/<pid>/stat.
func procStat(pid int) (ppid int, state string, ok bool) {
	stat, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return 0, "", false
	}
	// "pid (comm) state ppid …"; comm may contain spaces and parentheses.
	i := bytes.LastIndexByte(stat, ')')
	if i < 0 {
		return 0, "", false
	}
	f := strings.Fields(string(stat[i+1:]))
	if len(f) < 2 {
		return 0, "", false
	}
	ppid, err = strconv.Atoi(f[1])
	return ppid, f[0], err == nil
}

// freePort is a free TCP port below the ephemeral range (PickPort).
func freePort() (int, error) { return PickPort() }

// startFresh starts a new server, retrying on a new port when another process grabbed
// the chosen one between freePort and the server's bind.
func startFresh(p *process, setPort func(port int)) error {
	var err error
	for range 3 {
		var port int
		if port, err = freePort(); err != nil {
			return err
		}
		setPort(port)
		if err = p.start(); !errors.Is(err, errExited) {
			return err
		}
	}
	return err
}
