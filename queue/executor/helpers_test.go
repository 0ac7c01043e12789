package executor_test

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.uber.org/zap"
	"go.uber.org/zap/zaptest"

	"github.com/jq-dev/jq/queue"
	"github.com/jq-dev/jq/queue/executor"
	"github.com/jq-dev/jq/queue/executor/executortest"
)

// bundle is one executor running against one fake server.
type bundle struct {
	srv  *executortest.Server
	mux  *queue.Mux
	exec *executor.Executor

	cancel context.CancelFunc
	runErr chan error
	done   chan executor.JobDone
}

type config struct {
	server executortest.Options
	opts   executor.Options
}

// setup builds a fake server and an executor with fast timings; tweak
// adjusts the configuration before they are built. Handlers are registered
// on b.mux before b.start.
func setup(t *testing.T, tweak func(*config)) *bundle {
	t.Helper()
	b := &bundle{mux: queue.NewMux(), runErr: make(chan error, 1), done: make(chan executor.JobDone, 10000)}
	c := &config{
		server: executortest.Options{HeartbeatInterval: time.Hour},
		opts: executor.Options{
			Handler:       b.mux,
			WorkerID:      "w-test",
			Hostname:      "testhost",
			Version:       "test",
			Concurrency:   4,
			Queues:        []string{"default"},
			Logger:        zaptest.NewLogger(t, zaptest.Level(zap.WarnLevel)),
			ShutdownGrace: 5 * time.Second,
			FlushTimeout:  5 * time.Second,
			MinBackoff:    time.Millisecond,
			MaxBackoff:    20 * time.Millisecond,
			OnJobDone:     func(d executor.JobDone) { b.done <- d },
		},
	}
	if tweak != nil {
		tweak(c)
	}
	b.srv = executortest.NewServer(c.server)
	c.opts.Conn = b.srv
	e, err := executor.New(c.opts)
	require.NoError(t, err)
	b.exec = e
	return b
}

// start runs the executor until the test ends (or b.stop).
func (b *bundle) start(t *testing.T) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	b.cancel = cancel
	go func() { b.runErr <- b.exec.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		select {
		case <-b.runErr: //nolint:errcheck // only the stop matters here
		case <-time.After(30 * time.Second):
			t.Error("executor did not stop")
		}
	})
}

// stop cancels Run and returns its error.
func (b *bundle) stop(t *testing.T) error {
	t.Helper()
	b.cancel()
	select {
	case err := <-b.runErr:
		b.runErr <- err // for the cleanup
		return err
	case <-time.After(30 * time.Second):
		t.Fatal("executor did not stop")
		return nil
	}
}

// waitDone returns the next finished handler.
func (b *bundle) waitDone(t *testing.T) executor.JobDone {
	t.Helper()
	select {
	case d := <-b.done:
		return d
	case <-time.After(10 * time.Second):
		t.Fatal("no job finished")
		return executor.JobDone{}
	}
}

var jobSeq atomic.Int64

// newJob returns a job with a unique id.
func newJob(typ, payload string) *queue.Job {
	n := jobSeq.Add(1)
	return &queue.Job{
		ID:      fmt.Sprintf("00000000-0000-4000-8000-%012d", n),
		Queue:   "default",
		Type:    typ,
		Payload: []byte(payload),
	}
}

func jobs(n int, typ string) []*queue.Job {
	out := make([]*queue.Job, n)
	for i := range out {
		out[i] = newJob(typ, "")
	}
	return out
}

// eventually polls cond until it holds or the time is up: tests wait on state, never sleep.
func eventually(t *testing.T, within time.Duration, cond func() bool, msgAndArgs ...any) {
	t.Helper()
	require.Eventually(t, cond, within, 2*time.Millisecond, msgAndArgs...)
}

// gate is a handler that blocks until released or cancelled, and records
// how its context ended.
type gate struct {
	release chan struct{}
	started chan string
	mu      sync.Mutex
	causes  map[string]error
}

func newGate() *gate {
	return &gate{release: make(chan struct{}), started: make(chan string, 1000), causes: map[string]error{}}
}

func (g *gate) Handle(ctx context.Context, job *queue.Job) ([]byte, error) {
	g.started <- job.ID
	select {
	case <-g.release:
		return []byte("released"), nil
	case <-ctx.Done():
		g.mu.Lock()
		g.causes[job.ID] = context.Cause(ctx)
		g.mu.Unlock()
		return nil, context.Cause(ctx)
	}
}

func (g *gate) cause(id string) error {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.causes[id]
}

func (g *gate) waitStarted(t *testing.T, n int) []string {
	t.Helper()
	var ids []string
	for range n {
		select {
		case id := <-g.started:
			ids = append(ids, id)
		case <-time.After(10 * time.Second):
			t.Fatalf("only %d of %d handlers started", len(ids), n)
		}
	}
	return ids
}

func successes(rs []executor.Report) int {
	n := 0
	for _, r := range rs {
		if r.Success {
			n++
		}
	}
	return n
}
