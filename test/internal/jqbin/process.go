package jqbin

import (
	"bufio"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/jq-dev/jq/internal/testenv"
)

// Process is a running jq binary whose stdout lines are collected. Done is closed once it has
// exited and all its output is read; Err is then what Wait returned.
type Process struct {
	Cmd  *exec.Cmd
	Done chan struct{}
	Err  error

	mu    sync.Mutex
	lines []string
}

// Start starts the binary with args and extra environment variables; the process is killed when
// the test ends, if it still runs.
func Start(t *testing.T, env []string, args ...string) *Process {
	t.Helper()
	return StartWith(t, nil, env, args...)
}

// StartWith is Start with the command adjusted by setup first (nil: none).
func StartWith(t *testing.T, setup func(*exec.Cmd), env []string, args ...string) *Process {
	t.Helper()
	cmd := exec.Command(Path(t), args...)
	cmd.Env = append(os.Environ(), env...)
	if setup != nil {
		setup(cmd)
	}
	stdout, err := cmd.StdoutPipe()
	require.NoError(t, err)
	cmd.Stderr = os.Stderr
	require.NoError(t, cmd.Start())
	p := &Process{Cmd: cmd, Done: make(chan struct{})}
	go func() {
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			p.mu.Lock()
			p.lines = append(p.lines, sc.Text())
			p.mu.Unlock()
		}
		p.Err = cmd.Wait()
		close(p.Done)
	}()
	t.Cleanup(func() {
		select {
		case <-p.Done:
		default:
			_ = cmd.Process.Kill()
			<-p.Done
		}
	})
	return p
}

// Output returns the stdout lines so far.
func (p *Process) Output() []string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]string(nil), p.lines...)
}

// WaitLog waits until a JSON log line with this message appears and returns it.
func (p *Process) WaitLog(t *testing.T, message string) map[string]any {
	t.Helper()
	var found map[string]any
	testenv.Eventually(t, 60*time.Second, func() error {
		exited := p.Exited() // all output has been read once Done is closed
		for _, l := range p.Output() {
			var m map[string]any
			if json.Unmarshal([]byte(l), &m) == nil && m["message"] == message {
				found = m
				return nil
			}
		}
		if exited {
			t.Fatalf("jq exited (%v) without logging %q:\n%s", p.Err, message, strings.Join(p.Output(), "\n"))
		}
		return fmt.Errorf("no %q log line yet", message)
	})
	return found
}

// LogCount counts the JSON log lines with this message.
func (p *Process) LogCount(message string) int {
	n := 0
	for _, l := range p.Output() {
		var m map[string]any
		if json.Unmarshal([]byte(l), &m) == nil && m["message"] == message {
			n++
		}
	}
	return n
}

// Signal sends sig to the process.
func (p *Process) Signal(t *testing.T, sig syscall.Signal) {
	t.Helper()
	require.NoError(t, p.Cmd.Process.Signal(sig))
}

// WaitExit waits for the process to exit within timeout and returns its exit code.
func (p *Process) WaitExit(t *testing.T, timeout time.Duration) int {
	t.Helper()
	select {
	case <-p.Done:
	case <-time.After(timeout):
		t.Fatalf("%s did not exit within %v", strings.Join(p.Cmd.Args, " "), timeout)
	}
	return p.Cmd.ProcessState.ExitCode()
}

// Exited reports whether the process has exited.
func (p *Process) Exited() bool {
	select {
	case <-p.Done:
		return true
	default:
		return false
	}
}
