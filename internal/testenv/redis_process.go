package testenv

import (
	"bufio"
	"context"
	"fmt"
	"net"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// RedisProcess is a private redis-server that a test may stop, kill and restart. It keeps
// no data on disk, so a restarted server starts empty.
type RedisProcess struct {
	proc *process
	port int
}

// StartRedis starts a private redis-server on a free 127.0.0.1 port; the test's cleanup
// stops it.
func StartRedis(tb testing.TB) *RedisProcess {
	tb.Helper()
	bin, err := exec.LookPath("redis-server")
	if err != nil {
		tb.Fatalf("testenv: redis-server not found on PATH (apt-get install redis-server): %v", err)
	}
	dir := tb.TempDir()
	began := time.Now()
	r := &RedisProcess{}
	r.proc = &process{
		tb:      tb,
		name:    "redis-server",
		dir:     dir,
		logPath: filepath.Join(dir, "redis.log"),
		stopSig: syscall.SIGTERM,
		ready:   func(ctx context.Context) error { return redisPing(ctx, r.Addr()) },
	}
	setPort := func(port int) {
		r.port = port
		r.proc.argv = []string{bin, "--port", strconv.Itoa(port), "--bind", "127.0.0.1",
			"--save", "", "--appendonly", "no", "--daemonize", "no", "--dir", dir}
	}
	tb.Cleanup(r.Stop)
	if err := startFresh(r.proc, setPort); err != nil {
		tb.Fatalf("testenv: private %v", err)
	}
	tb.Logf("testenv: private redis on %s ready in %v", r.Addr(), time.Since(began).Round(time.Millisecond))
	return r
}

// Addr returns the server's host:port.
func (r *RedisProcess) Addr() string {
	return net.JoinHostPort("127.0.0.1", strconv.Itoa(r.port))
}

// Start restarts a stopped or killed server on the same port, empty, and waits until it
// answers PING.
func (r *RedisProcess) Start() {
	r.proc.tb.Helper()
	if err := r.proc.start(); err != nil {
		r.proc.tb.Fatalf("testenv: restart private %v", err)
	}
}

// Stop shuts the server down cleanly. Stopping a stopped server does nothing.
func (r *RedisProcess) Stop() {
	if err := r.proc.stop(); err != nil {
		r.proc.tb.Errorf("testenv: stop private redis: %v", err)
	}
}

// Kill sends SIGKILL to the server and waits until it is gone. Killing a stopped server
// does nothing.
func (r *RedisProcess) Kill() {
	if err := r.proc.kill(); err != nil {
		r.proc.tb.Errorf("testenv: kill private redis: %v", err)
	}
}

// redisPing speaks just enough RESP to check readiness without a client's pool.
func redisPing(ctx context.Context, addr string) error {
	var d net.Dialer
	conn, err := d.DialContext(ctx, "tcp", addr)
	if err != nil {
		return err
	}
	defer conn.Close()
	if deadline, ok := ctx.Deadline(); ok {
		_ = conn.SetDeadline(deadline)
	}
	if _, err := conn.Write([]byte("PING\r\n")); err != nil {
		return err
	}
	line, err := bufio.NewReader(conn).ReadString('\n')
	if err != nil {
		return err
	}
	if line = strings.TrimSpace(line); line != "+PONG" {
		return fmt.Errorf("PING answered %q", line)
	}
	return nil
}
