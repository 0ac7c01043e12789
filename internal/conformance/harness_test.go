package conformance_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"connectrpc.com/connect"
	"github.com/stretchr/testify/require"

	jqv1 "github.com/jq-dev/jq/api/gen/jq/v1"
	"github.com/jq-dev/jq/api/rpcclient"
	"github.com/jq-dev/jq/internal/testenv"
)

// heartbeatTimeout of the suite's servers: long enough that a freeze between 3/4 of it and all of
// it (the fencing scenario) is not shortened by a heartbeat interval (1 s) plus the reaper's pass.
const heartbeatTimeout = 8 * time.Second

var repo = func() string {
	wd, _ := os.Getwd()
	return filepath.Join(wd, "..", "..")
}()

var (
	buildOnce sync.Once
	jqBin     string
	goWorker  string
	errBuild  error
)

func binaries(t *testing.T) (string, string) {
	t.Helper()
	buildOnce.Do(func() {
		dir, err := os.MkdirTemp("", "jq-conformance-")
		if err != nil {
			errBuild = err
			return
		}
		jqBin = os.Getenv("JQ_BIN")
		if jqBin == "" {
			jqBin = filepath.Join(dir, "jq")
			if out, err := goBuild(jqBin, "."); err != nil {
				errBuild = fmt.Errorf("go build jq: %w\n%s", err, out)
				return
			}
		}
		goWorker = filepath.Join(dir, "goworker")
		if out, err := goBuild(goWorker, "./internal/conformance/goworker"); err != nil {
			errBuild = fmt.Errorf("go build goworker: %w\n%s", err, out)
		}
	})
	require.NoError(t, errBuild)
	return jqBin, goWorker
}

func goBuild(out, pkg string) ([]byte, error) {
	cmd := exec.Command("go", "build", "-o", out, pkg)
	cmd.Dir = repo
	return cmd.CombinedOutput()
}

func freePort(t *testing.T) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

// server is one jq --role=server on the embedded store.
type server struct {
	t    *testing.T
	bin  string
	env  []string
	addr string
	log  *lockedBuffer
	cmd  *exec.Cmd
	cl   *rpcclient.Client
}

// startServer starts a server on the embedded store, or with postgres true on Postgres and Redis (a
// database and a key prefix of its own).
func startServer(t *testing.T, postgres ...bool) *server {
	t.Helper()
	bin, _ := binaries(t)
	port := freePort(t)
	s := &server{t: t, bin: bin, addr: "127.0.0.1:" + strconv.Itoa(port), log: &lockedBuffer{}}
	store := []string{"JQ_STORE_DRIVER=sqlite", "JQ_STORE_DATA_DIR=" + t.TempDir()}
	if len(postgres) > 0 && postgres[0] {
		store = []string{"JQ_STORE_DRIVER=postgres", "JQ_DB_URL=" + testenv.NewDatabase(t), "JQ_REDIS_ADDR=" + testenv.RedisAddr(),
			fmt.Sprintf("JQ_REDIS_KEY_PREFIX=jqconf%d", port)}
	}
	s.env = append(append(os.Environ(), store...),
		"JQ_GRPC_HOST=127.0.0.1", "JQ_GRPC_PORT="+strconv.Itoa(port),
		"JQ_HEALTH_PORT="+strconv.Itoa(freePort(t)), "JQ_METRICS_PORT="+strconv.Itoa(freePort(t)),
		"JQ_SCHEDULER_WORKER_HEARTBEAT_TIMEOUT_S="+strconv.Itoa(int(heartbeatTimeout/time.Second)),
		"JQ_WORKER_HEARTBEAT_INTERVAL_S=1", "JQ_SCHEDULER_REAPER_INTERVAL_MS=200")
	s.start()
	cl, err := rpcclient.New(rpcclient.Options{Addr: s.addr})
	require.NoError(t, err)
	s.cl = cl
	t.Cleanup(func() {
		cl.Close()
		s.stop()
	})
	return s
}

func (s *server) start() {
	s.t.Helper()
	mark := s.log.Len()
	s.cmd = exec.Command(s.bin, "--role=server")
	s.cmd.Env = s.env
	s.cmd.Stdout, s.cmd.Stderr = s.log, s.log
	require.NoError(s.t, s.cmd.Start())
	eventually(s.t, 60*time.Second, "server started", func() error {
		if !strings.Contains(s.log.String()[mark:], `"server started"`) {
			return fmt.Errorf("log: %s", tail(s.log.String()[mark:]))
		}
		return nil
	})
}

func (s *server) stop() {
	if s.cmd == nil || s.cmd.Process == nil || s.cmd.ProcessState != nil {
		return
	}
	_ = s.cmd.Process.Signal(syscall.SIGCONT) // a frozen server must be able to stop
	_ = s.cmd.Process.Signal(syscall.SIGTERM)
	_ = s.cmd.Wait()
}

func (s *server) freeze(d time.Duration) {
	require.NoError(s.t, s.cmd.Process.Signal(syscall.SIGSTOP))
	time.Sleep(d) // the scenario: a server silent for this long (not a synchronisation)
	require.NoError(s.t, s.cmd.Process.Signal(syscall.SIGCONT))
}

// worker is one worker process of the language under test.
type worker struct {
	t      *testing.T
	id     string
	cmd    *exec.Cmd
	out    *lockedBuffer
	errout *lockedBuffer
	done   chan struct{}
}

type lang struct {
	name string
	argv func(goWorker string) []string
}

func (l lang) start(t *testing.T, s *server, queue, id string, extra ...string) *worker {
	t.Helper()
	_, gw := binaries(t)
	argv := append(l.argv(gw), "--addr", s.addr, "--queue", queue, "--worker-id", id)
	argv = append(argv, extra...)
	w := &worker{t: t, id: id, out: &lockedBuffer{}, errout: &lockedBuffer{}, done: make(chan struct{})}
	w.cmd = exec.Command(argv[0], argv[1:]...)
	w.cmd.Dir = repo
	w.cmd.Stdout, w.cmd.Stderr = w.out, w.errout
	require.NoError(t, w.cmd.Start())
	go func() {
		_ = w.cmd.Wait()
		close(w.done)
	}()
	t.Cleanup(func() {
		_ = w.cmd.Process.Signal(syscall.SIGCONT)
		_ = w.cmd.Process.Kill()
		<-w.done
	})
	eventually(t, 30*time.Second, "worker "+id+" registered", func() error {
		res, err := s.cl.Workers.ListWorkers(context.Background(), connect.NewRequest(&jqv1.ListWorkersRequest{}))
		if err != nil {
			return err
		}
		for _, x := range res.Msg.GetWorkers() {
			if x.GetId() == id && x.GetStatus() == jqv1.WorkerStatus_WORKER_STATUS_ONLINE {
				return nil
			}
		}
		return fmt.Errorf("not ONLINE; stderr: %s", tail(w.errout.String()))
	})
	return w
}

// stop sends SIGTERM and waits for the exit; it returns the counters the worker printed.
func (w *worker) stop() map[string]int64 {
	w.t.Helper()
	require.NoError(w.t, w.cmd.Process.Signal(syscall.SIGTERM))
	select {
	case <-w.done:
	case <-time.After(60 * time.Second):
		w.t.Fatalf("worker %s did not stop within 60 s; stderr: %s", w.id, tail(w.errout.String()))
	}
	require.Equal(w.t, 0, w.cmd.ProcessState.ExitCode(), "stderr: %s", tail(w.errout.String()))
	var stats map[string]int64
	sc := bufio.NewScanner(strings.NewReader(w.out.String()))
	for sc.Scan() {
		if strings.HasPrefix(sc.Text(), "{") {
			require.NoError(w.t, json.Unmarshal(sc.Bytes(), &stats))
		}
	}
	return stats
}

func (w *worker) signal(sig syscall.Signal) { require.NoError(w.t, w.cmd.Process.Signal(sig)) }

type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

func (l *lockedBuffer) Len() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Len()
}

func tail(s string) string {
	if len(s) > 1500 {
		return "…" + s[len(s)-1500:]
	}
	return s
}

// eventually polls f until it returns nil or the timeout passes.
func eventually(t *testing.T, timeout time.Duration, what string, f func() error) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		err := f()
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: not reached within %s: %v", what, timeout, err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}
