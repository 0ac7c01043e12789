package main

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"time"
)

// env is one experiment's private world: a fresh database, a Redis key prefix, a log directory and
// the jq processes it started (stopped in reverse order).
type env struct {
	cfg    *config
	db     string
	prefix string
	logDir string
	procs  []*proc
}

type proc struct {
	name string
	cmd  *exec.Cmd
	done chan struct{}
}

func newEnv(cfg *config, name string) (*env, error) {
	e := &env{cfg: cfg, db: "jq_eval_" + name, prefix: fmt.Sprintf("jqeval%d_%s:", os.Getpid(), name),
		logDir: filepath.Join(cfg.logDir, name)}
	if err := os.MkdirAll(e.logDir, 0o755); err != nil {
		return nil, err
	}
	// Only databases named jq_eval_* are dropped: the ones this program creates.
	if _, err := e.psqlAdmin(fmt.Sprintf("DROP DATABASE IF EXISTS %s WITH (FORCE)", e.db)); err != nil {
		return nil, err
	}
	if _, err := e.psqlAdmin("CREATE DATABASE " + e.db); err != nil {
		return nil, err
	}
	return e, nil
}

func (e *env) dbURL() string { return e.cfg.pgBase + "/" + e.db + "?sslmode=disable" }

func (e *env) psqlAdmin(sql string) (string, error) { return psql(e.cfg.pgBase+"/postgres", sql) }

// sql runs one statement in the experiment's database and returns psql's unaligned output.
func (e *env) sql(sql string) (string, error) { return psql(e.cfg.pgBase+"/"+e.db, sql) }

func psql(url, sql string) (string, error) {
	out, err := exec.Command("psql", "-qAtX", "-v", "ON_ERROR_STOP=1", url, "-c", sql).CombinedOutput()
	if err != nil {
		return "", fmt.Errorf("psql %q: %w: %s", sql, err, out)
	}
	return strings.TrimSpace(string(out)), nil
}

// start runs bin/jq with args and waits until readyURL answers 200 (no wait when empty).
func (e *env) start(name string, readyURL string, args ...string) (*proc, error) {
	log, err := os.Create(filepath.Join(e.logDir, name+".log"))
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(e.cfg.jq, args...)
	cmd.Stdout, cmd.Stderr = log, log
	cmd.Env = append(os.Environ(),
		"JQ_DB_URL="+e.dbURL(),
		"JQ_REDIS_ADDR="+e.cfg.redis,
		"JQ_REDIS_KEY_PREFIX="+e.prefix,
		"JQ_LOGGING_LEVEL=warn",
		"JQ_GRPC_HOST=127.0.0.1", // loopback: no credentials needed (docs/security.md)
		"JQ_WORKER_BIND_HOST=127.0.0.1",
	)
	if err := cmd.Start(); err != nil {
		log.Close()
		return nil, err
	}
	p := &proc{name: name, cmd: cmd, done: make(chan struct{})}
	go func() { _ = cmd.Wait(); log.Close(); close(p.done) }()
	e.procs = append(e.procs, p)
	if readyURL == "" {
		return p, nil
	}
	deadline := time.Now().Add(30 * time.Second)
	for time.Now().Before(deadline) {
		select {
		case <-p.done:
			return nil, fmt.Errorf("%s exited during start; see %s", name, log.Name())
		default:
		}
		if r, err := http.Get(readyURL); err == nil {
			r.Body.Close()
			if r.StatusCode == http.StatusOK {
				return p, nil
			}
		}
		time.Sleep(50 * time.Millisecond)
	}
	return nil, fmt.Errorf("%s not ready at %s within 30 s", name, readyURL)
}

// stopAll sends SIGTERM to every process (newest first) and waits; SIGKILL after 15 s.
func (e *env) stopAll() {
	for i := len(e.procs) - 1; i >= 0; i-- {
		_ = e.procs[i].cmd.Process.Signal(syscall.SIGTERM)
	}
	deadline := time.After(15 * time.Second)
	for _, p := range e.procs {
		select {
		case <-p.done:
		case <-deadline:
			_ = p.cmd.Process.Kill()
			<-p.done
		}
	}
	e.procs = nil
}

// waitIdle polls until no job is PENDING, ASSIGNED or RUNNING.
func (e *env) waitIdle(ctx context.Context, timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	for {
		n, err := e.sql("SELECT count(*) FROM jobs WHERE state IN ('PENDING','ASSIGNED','RUNNING')")
		if err != nil {
			return err
		}
		if n == "0" {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%s jobs unfinished after %s", n, timeout)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(250 * time.Millisecond):
		}
	}
}
