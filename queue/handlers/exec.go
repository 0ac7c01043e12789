//go:build unix

package handlers

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"slices"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/jq-dev/jq/queue"
)

// ExecPayload is the payload of the exec handler.
type ExecPayload struct {
	// Argv is the program and its arguments; required. argv[0] must be an
	// absolute path listed in ExecOptions.Allow (no PATH lookup). No shell is
	// involved unless argv[0] is one.
	Argv []string `json:"argv"`
	// Stdin is written to the program's standard input (empty: /dev/null).
	Stdin string `json:"stdin,omitempty"`
	// Env is added to the minimal base environment (PATH). Each name must be listed in
	// ExecOptions.EnvAllow and be no interpreter hook (ExecEnvRefused); PATH too, which the
	// program then sees but which never selects the program.
	Env map[string]string `json:"env,omitempty"`
	// Dir is the working directory (default: the worker's).
	Dir string `json:"dir,omitempty"`
}

// ExecOptions tune the exec handler; zero values take the defaults, except
// Allow: an empty list allows nothing.
type ExecOptions struct {
	// Allow lists the programs the handler may run, as absolute paths
	// (worker.exec.allow). A job's argv[0] must equal one of them after
	// filepath.Clean; any other job, or a relative argv[0], fails permanently
	// without running anything (ErrExecNotAllowed).
	Allow []string
	// MaxOutputBytes bounds stdout, which becomes the result; beyond it the
	// process group is killed and the job fails permanently with reason
	// output_too_large. Default 256 KiB (the server's result limit).
	MaxOutputBytes int
	// StderrTailBytes is how much of the end of stderr a failure message
	// carries. Default 2 KiB.
	StderrTailBytes int
	// WaitDelay bounds the wait for output pipes after the process is gone
	// (a descendant that left the process group may hold them). Default 2s.
	WaitDelay time.Duration
	// EnvAllow lists the variables a payload may set (worker.exec.env_allow): exact names, or
	// prefixes written "THUMB_*". Empty: none. Interpreter hooks (BASH_ENV, BASH_FUNC_x%%,
	// PERL5OPT, NODE_OPTIONS, PYTHONPATH, LD_PRELOAD, …) are refused even when listed.
	EnvAllow []string
	// PATH is the base environment's PATH (the program's, not used to find
	// it). Default: the worker's own PATH, or a standard one when that is
	// empty.
	PATH string
}

const (
	defaultMaxOutput  = 256 << 10
	defaultStderrTail = 2 << 10
	defaultWaitDelay  = 2 * time.Second
	standardPATH      = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
)

// ExecWith returns the exec handler: when argv[0] is in opts.Allow it runs
// argv without a shell, in its own process group, with the minimal
// environment plus the payload's env, feeds stdin, and
// returns stdout as the result when the program exits 0. A non-zero exit is a
// (retryable) error carrying the exit code and the tail of stderr. When the
// job's context ends (timeout, cancellation, shutdown) the whole process
// group is killed with SIGKILL, so grandchildren die too; so is whatever the
// program left running in its group when it exits. A program outside the
// allow-list, a missing program, a bad payload and oversized output are
// permanent failures.
func ExecWith(opts ExecOptions) queue.Handler {
	if opts.MaxOutputBytes <= 0 {
		opts.MaxOutputBytes = defaultMaxOutput
	}
	if opts.StderrTailBytes <= 0 {
		opts.StderrTailBytes = defaultStderrTail
	}
	if opts.WaitDelay <= 0 {
		opts.WaitDelay = defaultWaitDelay
	}
	if opts.PATH == "" {
		opts.PATH = os.Getenv("PATH")
	}
	if opts.PATH == "" {
		opts.PATH = standardPATH
	}
	return &execHandler{opts: opts, allow: newAllowList(opts.Allow)}
}

type execHandler struct {
	opts  ExecOptions
	allow allowList
}

// errOutputLimit is the cause used to stop a program whose output overflowed.
var errOutputLimit = errors.New("output limit reached")

func (h *execHandler) Handle(ctx context.Context, job *queue.Job) ([]byte, error) {
	var p ExecPayload
	if err := decodePayload(TypeExec, job.Payload, &p); err != nil {
		return nil, err
	}
	if len(p.Argv) == 0 || p.Argv[0] == "" {
		return nil, queue.Permanent(errors.New(`exec: invalid payload: "argv" needs at least the program to run`))
	}
	name := p.Argv[0]
	prog, err := h.allow.check(name)
	if err != nil {
		return nil, err
	}
	env, err := h.environ(p.Env)
	if err != nil {
		return nil, err
	}
	if _, err := exec.LookPath(prog); err != nil {
		return nil, queue.Permanent(fmt.Errorf("exec %s: %w", name, err))
	}

	cctx, stop := context.WithCancelCause(ctx)
	defer stop(nil)
	cmd := exec.CommandContext(cctx, prog, p.Argv[1:]...)
	cmd.Args[0] = name
	cmd.Env = env
	cmd.Dir = p.Dir
	if p.Stdin != "" {
		cmd.Stdin = strings.NewReader(p.Stdin)
	}
	stdout := &limitBuffer{max: h.opts.MaxOutputBytes, overflow: func() { stop(errOutputLimit) }}
	stderr := &tailBuffer{max: h.opts.StderrTailBytes}
	cmd.Stdout, cmd.Stderr = stdout, stderr
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.WaitDelay = h.opts.WaitDelay
	g := &group{}
	cmd.Cancel = func() error { return g.kill(cmd.Process.Pid) }

	if err := cmd.Start(); err != nil {
		if errors.Is(err, fs.ErrNotExist) || errors.Is(err, fs.ErrPermission) || errors.Is(err, exec.ErrNotFound) {
			return nil, queue.Permanent(fmt.Errorf("exec %s: %w", name, err))
		}
		return nil, fmt.Errorf("exec %s: start: %w", name, err)
	}
	// Wait for the leader to exit without reaping it: while it is a zombie
	// its pid, which is the group id, cannot be reused, so killing the group
	// cannot hit an unrelated process. Then kill what it left behind.
	if waitExited(cmd.Process.Pid) == nil {
		_ = g.kill(cmd.Process.Pid)
	}
	g.reaped()
	werr := cmd.Wait()

	if errors.Is(context.Cause(cctx), errOutputLimit) {
		return nil, queue.Permanent(fmt.Errorf("exec %s: %w: stdout exceeded %d bytes", name, queue.ErrOutputTooLarge, h.opts.MaxOutputBytes))
	}
	if ctx.Err() != nil {
		return nil, fmt.Errorf("exec %s: process group killed: %w", name, context.Cause(ctx))
	}
	if werr != nil {
		var ee *exec.ExitError
		if errors.As(werr, &ee) {
			tail := stderr.String()
			if ws, ok := ee.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
				return nil, fmt.Errorf("exec %s: killed by signal %s: %s", name, ws.Signal(), tail)
			}
			return nil, fmt.Errorf("exec %s: exit code %d: %s", name, ee.ExitCode(), tail)
		}
		if !errors.Is(werr, exec.ErrWaitDelay) { // exited 0; a stray descendant held a pipe
			return nil, fmt.Errorf("exec %s: %w", name, werr)
		}
	}
	return stdout.Bytes(), nil
}

// environ builds the child's environment: PATH, then the payload's variables
// in sorted order.
func (h *execHandler) environ(extra map[string]string) ([]string, error) {
	path := h.opts.PATH
	keys := make([]string, 0, len(extra))
	for k, v := range extra {
		if strings.ContainsRune(v, 0) {
			return nil, queue.Permanent(fmt.Errorf("exec: invalid payload: environment variable %s holds a NUL byte", k))
		}
		if err := ExecEnvRefused(k); err != nil {
			return nil, queue.Permanent(fmt.Errorf("exec: the payload may not set that variable: %w", err))
		}
		if !envAllowed(h.opts.EnvAllow, k) {
			return nil, queue.Permanent(fmt.Errorf("exec: the payload may not set %s: not listed in worker.exec.env_allow", k))
		}
		if k == "PATH" {
			path = v
			continue
		}
		keys = append(keys, k)
	}
	slices.Sort(keys)
	env := make([]string, 0, len(keys)+1)
	env = append(env, "PATH="+path)
	for _, k := range keys {
		env = append(env, k+"="+extra[k])
	}
	return env, nil
}

// group kills the child's process group (whose id is the leader's pid) until
// the leader has been reaped; after that the id could belong to someone else.
type group struct {
	mu   sync.Mutex
	done bool
}

func (g *group) reaped() {
	g.mu.Lock()
	g.done = true
	g.mu.Unlock()
}

func (g *group) kill(pgid int) error {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.done || pgid <= 0 {
		return os.ErrProcessDone
	}
	if err := syscall.Kill(-pgid, syscall.SIGKILL); err != nil {
		if errors.Is(err, syscall.ESRCH) {
			return os.ErrProcessDone
		}
		return err
	}
	return nil
}

// limitBuffer keeps up to max bytes and calls overflow once when more
// arrive; it never fails a write, so the child is stopped by the kill, not by
// a broken pipe.
type limitBuffer struct {
	mu       sync.Mutex
	buf      []byte
	max      int
	over     bool
	overflow func()
}

func (b *limitBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.over {
		return len(p), nil
	}
	if len(b.buf)+len(p) > b.max {
		b.over = true
		b.buf = nil
		b.overflow()
		return len(p), nil
	}
	b.buf = append(b.buf, p...)
	return len(p), nil
}

func (b *limitBuffer) Bytes() []byte {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf
}

// tailBuffer keeps the last max bytes written.
type tailBuffer struct {
	mu  sync.Mutex
	buf []byte
	max int
}

func (b *tailBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	n := len(p)
	if n >= b.max {
		b.buf = append(b.buf[:0], p[n-b.max:]...)
		return n, nil
	}
	if drop := len(b.buf) + n - b.max; drop > 0 {
		b.buf = append(b.buf[:0], b.buf[drop:]...)
	}
	b.buf = append(b.buf, p...)
	return n, nil
}

// String returns the tail as valid UTF-8 without surrounding space; an empty
// stderr reads "(no stderr)".
func (b *tailBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	s := strings.TrimSpace(strings.ToValidUTF8(string(b.buf), "\uFFFD"))
	if s == "" {
		return "(no stderr)"
	}
	return s
}
