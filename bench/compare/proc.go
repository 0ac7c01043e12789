package main

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"syscall"
	"time"
)

// process is one jq process this program started, its output in a log file.
type process struct {
	name string
	cmd  *exec.Cmd
	log  *os.File
	done chan error
}

func startProcess(name, bin, logDir string, env, args []string) (*process, error) {
	f, err := os.Create(filepath.Join(logDir, name+".log"))
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(bin, args...) //nolint:gosec // the jq binary given by -jq, with our own arguments
	cmd.Env = append(os.Environ(), env...)
	cmd.Stdout, cmd.Stderr = f, f
	if err := cmd.Start(); err != nil {
		f.Close()
		return nil, fmt.Errorf("start %s: %w", name, err)
	}
	p := &process{name: name, cmd: cmd, log: f, done: make(chan error, 1)}
	go func() { p.done <- cmd.Wait() }()
	return p, nil
}

func (p *process) pid() int { return p.cmd.Process.Pid }

// waitReady polls http://127.0.0.1:port/readyz until it answers 200, the process exits or the
// timeout passes.
func (p *process) waitReady(ctx context.Context, port int, timeout time.Duration) error {
	url := "http://127.0.0.1:" + strconv.Itoa(port) + "/readyz"
	deadline := time.Now().Add(timeout)
	for time.Now().Before(deadline) {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
		if err != nil {
			return err
		}
		if resp, err := http.DefaultClient.Do(req); err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return nil
			}
		}
		select {
		case err := <-p.done:
			p.done <- err
			return fmt.Errorf("%s exited before it was ready (%v); see %s", p.name, err, p.log.Name())
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(50 * time.Millisecond):
		}
	}
	return fmt.Errorf("%s not ready on :%d after %s; see %s", p.name, port, timeout, p.log.Name())
}

// stop sends SIGTERM (jq drains and exits) and kills the process if it outlives the grace period.
func (p *process) stop(grace time.Duration) error {
	defer p.log.Close()
	if err := p.cmd.Process.Signal(syscall.SIGTERM); err != nil && !errors.Is(err, os.ErrProcessDone) {
		return err
	}
	select {
	case <-p.done:
		return nil
	case <-time.After(grace):
		_ = p.cmd.Process.Kill()
		<-p.done
		return fmt.Errorf("%s did not stop within %s: killed", p.name, grace)
	}
}
