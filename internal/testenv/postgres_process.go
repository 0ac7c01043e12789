package testenv

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"slices"
	"strconv"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
)

// PostgresProcess is a private PostgreSQL server that a test may stop, kill and restart.
// It runs on 127.0.0.1 with trust authentication, superuser "postgres", fsync off and
// synchronous_commit on: a committed transaction survives Kill (the WAL reached the
// kernel), as it would survive a crash of a real server.
type PostgresProcess struct {
	proc *process
	port int
}

// StartPostgres initialises a data directory and starts a private PostgreSQL server on a
// free port; the test's cleanup stops it and removes the directory. As root, the server
// runs as the postgres OS user (PostgreSQL refuses to run as root). The binaries come
// from JQ_TEST_PG_BINDIR, else the newest /usr/lib/postgresql/*/bin, else PATH.
func StartPostgres(tb testing.TB) *PostgresProcess {
	tb.Helper()
	bin, err := postgresBinDir()
	if err != nil {
		tb.Fatal(err)
	}
	cred, err := postgresCredential()
	if err != nil {
		tb.Fatal(err)
	}
	// Not tb.TempDir: its parent is private to root, and the postgres user must write here.
	dir, err := os.MkdirTemp("", "jqtest-postgres-")
	if err != nil {
		tb.Fatalf("testenv: %v", err)
	}
	tb.Cleanup(func() { _ = os.RemoveAll(dir) }) // runs after the stop registered below
	if cred != nil {
		if err := os.Chown(dir, int(cred.Uid), int(cred.Gid)); err != nil {
			tb.Fatalf("testenv: %v", err)
		}
	}

	began := time.Now()
	data := filepath.Join(dir, "data")
	initdb := exec.Command(filepath.Join(bin, "initdb"), "-D", data, "-U", "postgres",
		"-A", "trust", "-E", "UTF8", "--locale=C", "--no-sync")
	initdb.Dir = dir
	initdb.SysProcAttr = &syscall.SysProcAttr{Credential: cred}
	if out, err := initdb.CombinedOutput(); err != nil {
		tb.Fatalf("testenv: initdb: %v\n%s", err, tail(out, 20))
	}

	p := &PostgresProcess{}
	p.proc = &process{
		tb:      tb,
		name:    "postgres",
		dir:     dir,
		logPath: filepath.Join(dir, "postgres.log"),
		cred:    cred,
		stopSig: syscall.SIGINT, // "fast" shutdown
		ready: func(ctx context.Context) error {
			conn, err := pgx.Connect(ctx, p.DSN())
			if err != nil {
				return err
			}
			return conn.Close(ctx)
		},
	}
	setPort := func(port int) {
		p.port = port
		p.proc.argv = []string{filepath.Join(bin, "postgres"), "-D", data,
			"-p", strconv.Itoa(port), "-k", dir,
			"-c", "listen_addresses=127.0.0.1",
			"-c", "fsync=off", "-c", "full_page_writes=off",
			"-c", "logging_collector=off"}
	}
	tb.Cleanup(p.Stop)
	if err := startFresh(p.proc, setPort); err != nil {
		tb.Fatalf("testenv: private %v", err)
	}
	tb.Logf("testenv: private postgres on 127.0.0.1:%d ready in %v (initdb included)", p.port, time.Since(began).Round(time.Millisecond))
	return p
}

// DSN returns the server's URL for database "postgres".
func (p *PostgresProcess) DSN() string {
	return fmt.Sprintf("postgres://postgres@127.0.0.1:%d/postgres?sslmode=disable", p.port)
}

// Start restarts a stopped or killed server on the same port and data directory (after a
// Kill, PostgreSQL runs crash recovery) and waits until it accepts connections.
func (p *PostgresProcess) Start() {
	p.proc.tb.Helper()
	if err := p.proc.start(); err != nil {
		p.proc.tb.Fatalf("testenv: restart private %v", err)
	}
}

// Stop shuts the server down cleanly ("fast" mode: sessions are disconnected). Stopping a
// stopped server does nothing.
func (p *PostgresProcess) Stop() {
	if err := p.proc.stop(); err != nil {
		p.proc.tb.Errorf("testenv: stop private postgres: %v", err)
	}
}

// Kill sends SIGKILL to the server and all its processes and waits until they are gone.
// Killing a stopped server does nothing.
func (p *PostgresProcess) Kill() {
	if err := p.proc.kill(); err != nil {
		p.proc.tb.Errorf("testenv: kill private postgres: %v", err)
	}
}

func postgresBinDir() (string, error) {
	has := func(dir string) bool {
		for _, b := range []string{"initdb", "postgres"} {
			if fi, err := os.Stat(filepath.Join(dir, b)); err != nil || fi.IsDir() {
				return false
			}
		}
		return true
	}
	if dir := os.Getenv("JQ_TEST_PG_BINDIR"); dir != "" {
		if !has(dir) {
			return "", fmt.Errorf("testenv: JQ_TEST_PG_BINDIR=%s has no initdb and postgres", dir)
		}
		return dir, nil
	}
	dirs, _ := filepath.Glob("/usr/lib/postgresql/*/bin")
	version := func(dir string) float64 {
		v, _ := strconv.ParseFloat(filepath.Base(filepath.Dir(dir)), 64)
		return v
	}
	slices.SortFunc(dirs, func(a, b string) int {
		va, vb := version(a), version(b)
		switch {
		case va > vb:
			return -1
		case va < vb:
			return 1
		}
		return 0
	})
	for _, dir := range dirs {
		if has(dir) {
			return dir, nil
		}
	}
	if path, err := exec.LookPath("initdb"); err == nil && has(filepath.Dir(path)) {
		return filepath.Dir(path), nil
	}
	return "", fmt.Errorf("testenv: PostgreSQL server binaries not found (apt-get install postgresql, or set JQ_TEST_PG_BINDIR)")
}

// postgresCredential returns who the server runs as: nil (the current user) unless we
// are root, then the postgres OS user.
func postgresCredential() (*syscall.Credential, error) {
	if os.Geteuid() != 0 {
		return nil, nil
	}
	u, err := user.Lookup("postgres")
	if err != nil {
		return nil, fmt.Errorf("testenv: running as root needs the postgres OS user to run PostgreSQL: %w", err)
	}
	uid, err := strconv.ParseUint(u.Uid, 10, 32)
	if err != nil {
		return nil, fmt.Errorf("testenv: postgres uid %q: %w", u.Uid, err)
	}
	gid, err := strconv.ParseUint(u.Gid, 10, 32)
	if err != nil {
		return nil, fmt.Errorf("testenv: postgres gid %q: %w", u.Gid, err)
	}
	return &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid)}, nil
}
