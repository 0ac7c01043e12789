package apiserver_test

// The handlers over the real Postgres (and, with an engine, Redis), called
// through the real gRPC client on a loopback h2c listener, so every assertion
// sees the status codes a worker or operator sees.

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"net/http"
	"os"
	"testing"
	"time"

	"connectrpc.com/connect"
	"github.com/google/uuid"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"
	"go.uber.org/zap"
	"go.uber.org/zap/zaptest"

	jqv1 "github.com/jq-dev/jq/api/gen/jq/v1"
	"github.com/jq-dev/jq/api/rpcclient"
	"github.com/jq-dev/jq/api/server"
	"github.com/jq-dev/jq/internal/buildinfo"
	"github.com/jq-dev/jq/internal/testenv"
	"github.com/jq-dev/jq/internal/testenv/stores"
	"github.com/jq-dev/jq/migrations"
	"github.com/jq-dev/jq/queue"
	"github.com/jq-dev/jq/queue/engine"
	"github.com/jq-dev/jq/store"
	"github.com/jq-dev/jq/store/postgres"
	"github.com/jq-dev/jq/store/storewrap"
)

// One database for the package's engine-less tests, which isolate their data
// by unique queue names and worker ids. Tests that run an engine get a
// database of their own: its reaper acts on every job of its database.
var testStore *stores.PG

func TestMain(m *testing.M) {
	os.Exit(runMain(m))
}

func runMain(m *testing.M) int {
	dsn, cleanup, err := testenv.NewDatabaseForMain("api_server")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer cleanup()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := migrations.Up(ctx, dsn); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	pg, err := postgres.New(ctx, postgres.Config{DSN: dsn, MaxConns: 16})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	testStore = &stores.PG{Store: storewrap.Wrap(pg, storewrap.Options{}), Backend: pg}
	code := m.Run()
	pg.Close()
	if code == 0 {
		if err := goleak.Find(); err != nil {
			fmt.Fprintln(os.Stderr, "goleak:", err)
			return 1
		}
	}
	return code
}

// bundle is what a test works with: a client of the API, the store behind it
// and a queue of its own.
type bundle struct {
	t     *testing.T
	ctx   context.Context
	cl    *rpcclient.Client
	store *stores.PG
	eng   *engine.Engine // nil without an engine
	queue string
}

// setup marks the test parallel and serves the API over the package store,
// without an engine: enough for every RPC that only reads or writes the store.
func setup(t *testing.T) *bundle {
	t.Helper()
	t.Parallel()
	b := newBundle(t, testStore)
	opts := withEngine(t, apiserver.Options{Store: testStore, Log: zaptest.NewLogger(t)})
	b.eng = opts.Engine
	b.cl = serve(t, opts)
	return b
}

// withEngine gives opts an engine when the test runs none: one over opts.Store that is never run,
// so the handlers' commands (every write goes through an engine) work while nothing is dispatched.
func withEngine(t *testing.T, opts apiserver.Options) apiserver.Options {
	t.Helper()
	if opts.Engine != nil {
		return opts
	}
	st, ok := opts.Store.(engine.Store)
	require.True(t, ok, "the test's store is not a full store")
	opts.Engine = commandEngine(t, st)
	return opts
}

// commandEngine returns an engine over st and a Redis prefix of the test's own that is never run.
func commandEngine(t *testing.T, st engine.Store) *engine.Engine {
	t.Helper()
	eng, err := engine.New(engine.Options{Store: st, Dispatcher: stores.Dispatcher(context.Background(), t), Log: zaptest.NewLogger(t)})
	require.NoError(t, err)
	return eng
}

// settleNow is the engine's retry rule with the wall clock, for tests that run the sweep themselves.
func settleNow(j queue.FailedJob) queue.Decision {
	return queue.SettleFailed(j, time.Now(), rand.Float64)
}

// setupEngine marks the test parallel and serves the API with a running
// engine over a database and Redis prefix of the test's own.
func setupEngine(t *testing.T, opts engine.Options) *bundle {
	t.Helper()
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	st, eng := runEngine(ctx, t, opts)
	b := newBundle(t, st)
	b.eng = eng
	b.cl = serve(t, apiserver.Options{
		Store: st, Engine: eng, Log: zaptest.NewLogger(t), Limits: apiserver.Limits{MaxPayloadBytes: 1 << 20},
		Workers: apiserver.WorkerTiming{HeartbeatInterval: time.Second, HeartbeatTimeout: 10 * time.Second},
	})
	return b
}

// runEngine runs an engine (opts plus a database and Redis prefix of the test's own) until the
// test ends.
func runEngine(ctx context.Context, t *testing.T, opts engine.Options) (*stores.PG, *engine.Engine) {
	t.Helper()
	st := stores.Postgres(ctx, t, 8)
	disp := stores.Dispatcher(ctx, t)
	opts.Store, opts.Dispatcher, opts.Notifier, opts.Log = st, disp, st, zaptest.NewLogger(t)
	eng, err := engine.New(opts)
	require.NoError(t, err)
	engCtx, stopEngine := context.WithCancel(context.Background())
	engDone := make(chan struct{})
	go func() { _ = eng.Run(engCtx); close(engDone) }()
	t.Cleanup(func() {
		eng.CloseSessions()
		stopEngine()
		<-engDone
	})
	return st, eng
}

func newBundle(t *testing.T, st *stores.PG) *bundle {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	t.Cleanup(cancel)
	q, err := st.QueueCreate(ctx, store.QueueCreateParams{Name: "api-" + uuid.NewString()[:8]})
	require.NoError(t, err)
	return &bundle{t: t, ctx: ctx, store: st, queue: q.Name}
}

// serve runs the handlers on a loopback h2c listener until the test ends and
// returns a client of them.
func serve(t *testing.T, opts apiserver.Options) *rpcclient.Client {
	t.Helper()
	if opts.Log == nil {
		opts.Log = zap.NewNop()
	}
	cl, err := rpcclient.New(rpcclient.Options{Addr: serveAddr(t, opts)})
	require.NoError(t, err)
	t.Cleanup(cl.Close)
	return cl
}

// serveAddr serves the API on a loopback h2c listener until the test ends and returns its address.
func serveAddr(t *testing.T, opts apiserver.Options) string {
	t.Helper()
	opts = withEngine(t, opts)
	opts.Version = buildinfo.Get()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	p := new(http.Protocols)
	p.SetHTTP1(true)
	p.SetUnencryptedHTTP2(true)
	srv := &http.Server{Handler: apiserver.New(opts), Protocols: p, ReadHeaderTimeout: 5 * time.Second}
	served := make(chan struct{})
	go func() { _ = srv.Serve(ln); close(served) }()
	t.Cleanup(func() {
		_ = srv.Close()
		<-served
	})
	return ln.Addr().String()
}

// requireCode checks that err is a connect error with this code.
func requireCode(t *testing.T, want connect.Code, err error, msgAndArgs ...any) {
	t.Helper()
	require.Error(t, err, msgAndArgs...)
	var ce *connect.Error
	require.True(t, errors.As(err, &ce), "not a connect error: %v", err)
	require.Equal(t, want, ce.Code(), append([]any{"error: %v", err}, msgAndArgs...)...)
}

// insert submits a job straight into the store (no engine needed).
func (b *bundle) insert(p store.JobInsertParams) *queue.Job {
	b.t.Helper()
	p.Queue = b.queue
	if p.Type == "" {
		p.Type = "t"
	}
	res, err := b.store.JobInsertMany(b.ctx, []store.JobInsertParams{p})
	require.NoError(b.t, err)
	return res[0].Job
}

// register registers a worker of the bundle's queue through the API.
func (b *bundle) register(concurrency int) string {
	b.t.Helper()
	id := "w-" + uuid.NewString()[:12]
	_, err := b.cl.Workers.RegisterWorker(b.ctx, connect.NewRequest(&jqv1.RegisterWorkerRequest{
		WorkerId: id, Hostname: "test", Concurrency: int32(concurrency), Queues: []string{b.queue},
	}))
	require.NoError(b.t, err)
	return id
}

// lease assigns a PENDING job to worker (attempt+1) and, when run, acks it.
func (b *bundle) lease(worker string, j *queue.Job, run bool) *queue.Job {
	b.t.Helper()
	jobs, err := b.store.JobAssignMany(b.ctx, store.JobAssignParams{WorkerID: worker, IDs: []string{j.ID}})
	require.NoError(b.t, err)
	require.Len(b.t, jobs, 1)
	j = jobs[0]
	if run {
		outs, err := b.store.JobAckMany(b.ctx, []store.JobLease{{ID: j.ID, Attempt: j.Attempt, WorkerID: worker}})
		require.NoError(b.t, err)
		require.NoError(b.t, outs[0].Err)
		j = outs[0].Job
	}
	return j
}

// finish reports a RUNNING job's outcome as its worker.
func (b *bundle) finish(j *queue.Job, success bool, result []byte) *queue.Job {
	b.t.Helper()
	r := store.JobReportParams{JobLease: store.JobLease{ID: j.ID, Attempt: j.Attempt, WorkerID: j.WorkerID}}
	if success {
		r.Success, r.Result = true, result
	} else {
		r.Error = "boom"
	}
	outs, err := b.store.JobReportMany(b.ctx, []store.JobReportParams{r})
	require.NoError(b.t, err)
	require.NoError(b.t, outs[0].Err)
	return outs[0].Job
}

func (b *bundle) heartbeat(worker string, leases ...*queue.Job) (*jqv1.HeartbeatResponse, error) {
	req := &jqv1.HeartbeatRequest{WorkerId: worker}
	for _, j := range leases {
		req.Running = append(req.Running, &jqv1.JobLease{JobId: j.ID, Attempt: int32(j.Attempt)})
	}
	res, err := b.cl.Workers.Heartbeat(b.ctx, connect.NewRequest(req))
	if err != nil {
		return nil, err
	}
	return res.Msg, nil
}
