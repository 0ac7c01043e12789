package engine_test

// In-process clusters over the real Postgres and Redis: server replicas
// (engine + API handlers on h2c listeners) and workers (the executor over the
// real gRPC client), so a test can count handler executions exactly.

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"connectrpc.com/connect"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"
	"go.uber.org/zap"

	jqv1 "github.com/jq-dev/jq/api/gen/jq/v1"
	"github.com/jq-dev/jq/api/rpcclient"
	"github.com/jq-dev/jq/api/server"
	"github.com/jq-dev/jq/api/workerconn"
	"github.com/jq-dev/jq/internal/buildinfo"
	"github.com/jq-dev/jq/internal/testenv"
	"github.com/jq-dev/jq/migrations"
	"github.com/jq-dev/jq/queue"
	"github.com/jq-dev/jq/queue/engine"
	"github.com/jq-dev/jq/queue/executor"
	"github.com/jq-dev/jq/store"
	"github.com/jq-dev/jq/store/postgres"
	"github.com/jq-dev/jq/store/redis"
	"github.com/jq-dev/jq/store/storewrap"
)

var testDSN string

func TestMain(m *testing.M) {
	dsn, cleanup, err := testenv.NewDatabaseForMain("engine")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	if err := migrations.Up(context.Background(), dsn); err != nil {
		cleanup()
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	testDSN = dsn
	code := m.Run()
	cleanup()
	// The engine is the most concurrent package: every test must leave no goroutine behind.
	if code == 0 {
		if err := goleak.Find(); err != nil {
			fmt.Fprintln(os.Stderr, "goleak:", err)
			code = 1
		}
	}
	os.Exit(code)
}

type replica struct {
	addr   string
	engine *engine.Engine
}

type harness struct {
	t      *testing.T
	ctx    context.Context
	store  *postgres.Store
	prefix string
	log    *zap.Logger
}

func newHarness(t *testing.T) *harness {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	t.Cleanup(cancel)
	st, err := postgres.New(ctx, postgres.Config{DSN: testDSN, MaxConns: 16, ConnectTimeout: 5 * time.Second})
	require.NoError(t, err)
	t.Cleanup(st.Close)
	_, prefix := testenv.NewRedis(t)
	return &harness{t: t, ctx: ctx, store: st, prefix: prefix, log: zap.NewNop()}
}

// startReplica runs one server replica: its own store pool, dispatcher and
// engine, serving the API on a loopback h2c listener.
func (h *harness) startReplica() replica {
	t := h.t
	st, err := postgres.New(h.ctx, postgres.Config{DSN: testDSN, MaxConns: 16, ConnectTimeout: 5 * time.Second})
	require.NoError(t, err)
	rdb, _ := testenv.NewRedis(t) // its own client; keys live under h.prefix
	disp, err := redisstore.New(h.ctx, redisstore.Config{Client: rdb, KeyPrefix: h.prefix})
	require.NoError(t, err)
	// As production reaches a store: behind the wrapper that validates every call.
	wst := storewrap.Wrap(st, storewrap.Options{})
	eng, err := engine.New(engine.Options{
		Store: wst, Dispatcher: disp, Notifier: st, Log: h.log,
		SchedulerInterval: 100 * time.Millisecond, LockTTL: 30 * time.Second,
	})
	require.NoError(t, err)
	handler := apiserver.New(apiserver.Options{
		Store: wst, Engine: eng, Log: h.log, Version: buildinfo.Get(),
		Limits:  apiserver.Limits{MaxPayloadBytes: 1 << 20},
		Workers: apiserver.WorkerTiming{HeartbeatInterval: time.Second, HeartbeatTimeout: 10 * time.Second},
	})
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	p := new(http.Protocols)
	p.SetHTTP1(true)
	p.SetUnencryptedHTTP2(true)
	srv := &http.Server{Handler: handler, Protocols: p, ReadHeaderTimeout: 5 * time.Second}
	engCtx, stopEngine := context.WithCancel(context.Background())
	engDone := make(chan struct{})
	go func() { _ = eng.Run(engCtx); close(engDone) }()
	go func() { _ = srv.Serve(ln) }()
	t.Cleanup(func() {
		eng.CloseSessions()
		sctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_ = srv.Shutdown(sctx)
		stopEngine()
		<-engDone
		st.Close()
	})
	return replica{addr: ln.Addr().String(), engine: eng}
}

func (h *harness) client(addr string) *rpcclient.Client {
	cl, err := rpcclient.New(rpcclient.Options{Addr: addr})
	require.NoError(h.t, err)
	h.t.Cleanup(cl.Close)
	return cl
}

// countingWorker runs an executor whose only handler counts executions per
// job and the most handlers it ever ran at once.
type countingWorker struct {
	id          string
	concurrency int
	running     atomic.Int64
	maxRunning  atomic.Int64
	stop        context.CancelFunc
	done        chan struct{}
}

func (h *harness) startWorker(addr, id string, concurrency int, queues []string, executed *sync.Map) *countingWorker {
	w := &countingWorker{id: id, concurrency: concurrency, done: make(chan struct{})}
	mux := queue.NewMux()
	mux.RegisterFunc("count", func(ctx context.Context, job *queue.Job) ([]byte, error) {
		n := w.running.Add(1)
		defer w.running.Add(-1)
		for {
			m := w.maxRunning.Load()
			if n <= m || w.maxRunning.CompareAndSwap(m, n) {
				break
			}
		}
		c, _ := executed.LoadOrStore(job.ID, new(atomic.Int64))
		c.(*atomic.Int64).Add(1)
		executed.Store("queue:"+job.ID, job.Queue)
		return nil, nil
	})
	ex, err := executor.New(executor.Options{
		Conn: workerconn.New(h.client(addr)), Handler: mux, WorkerID: id, Hostname: "test",
		Concurrency: concurrency, Queues: queues, HeartbeatInterval: time.Second, ShutdownGrace: 5 * time.Second,
	})
	require.NoError(h.t, err)
	ctx, cancel := context.WithCancel(context.Background())
	w.stop = cancel
	go func() { _ = ex.Run(ctx); close(w.done) }()
	h.t.Cleanup(func() { cancel(); <-w.done })
	return w
}

func (h *harness) createQueue(cl *rpcclient.Client, name string) {
	_, err := cl.Queues.CreateQueue(h.ctx, connect.NewRequest(&jqv1.CreateQueueRequest{Name: name}))
	require.NoError(h.t, err)
}

// Two replicas and four workers drain 20,000 jobs: every job DONE, each
// executed exactly once, no worker above its concurrency, nothing delivered
// from a queue no worker subscribed to (I3, I7, FR-021, FR-022).
func TestTwoReplicasFourWorkersExactlyOnce(t *testing.T) {
	if testing.Short() {
		t.Skip("20,000 jobs")
	}
	h := newHarness(t)
	r1, r2 := h.startReplica(), h.startReplica()
	cl := h.client(r1.addr)
	suffix := strings.ReplaceAll(h.prefix[len("jqtest:"):], "_", "")
	qa, qb, qc := "a-"+suffix, "b-"+suffix, "c-"+suffix
	for _, q := range []string{qa, qb, qc} {
		h.createQueue(cl, q)
	}

	var executed sync.Map
	workers := []*countingWorker{
		h.startWorker(r1.addr, "w1-"+suffix, 4, []string{qa}, &executed),
		h.startWorker(r1.addr, "w2-"+suffix, 8, []string{qa, qb}, &executed),
		h.startWorker(r2.addr, "w3-"+suffix, 2, []string{qb}, &executed),
		h.startWorker(r2.addr, "w4-"+suffix, 16, []string{qa, qb}, &executed),
	}

	const perQueue = 10000
	var ids []string
	submitters := []*rpcclient.Client{cl, h.client(r2.addr)}
	for i, q := range []string{qa, qb} {
		for off := 0; off < perQueue; off += 500 {
			specs := make([]*jqv1.JobSpec, 500)
			for k := range specs {
				specs[k] = &jqv1.JobSpec{Queue: q, Type: "count", Priority: int32((off + k) % 10)}
			}
			resp, err := submitters[(i+off/500)%2].Jobs.SubmitJobs(h.ctx, connect.NewRequest(&jqv1.SubmitJobsRequest{Jobs: specs}))
			require.NoError(t, err)
			for _, r := range resp.Msg.GetResults() {
				ids = append(ids, r.GetJobId())
			}
		}
	}
	var unsubscribed []string
	for range 50 {
		resp, err := cl.Jobs.SubmitJob(h.ctx, connect.NewRequest(&jqv1.SubmitJobRequest{Job: &jqv1.JobSpec{Queue: qc, Type: "count"}}))
		require.NoError(t, err)
		unsubscribed = append(unsubscribed, resp.Msg.GetJobId())
	}

	testenv.Eventually(t, 3*time.Minute, func() error {
		for _, q := range []string{qa, qb} {
			st, err := h.store.QueueStats(h.ctx, q)
			if err != nil {
				return err
			}
			if st.Done != perQueue {
				return fmt.Errorf("queue %s: %d of %d DONE (pending %d, assigned %d, running %d, failed %d)",
					q, st.Done, perQueue, st.Pending, st.Assigned, st.Running, st.Failed)
			}
		}
		return nil
	})

	for _, id := range ids {
		c, ok := executed.Load(id)
		require.True(t, ok, "job %s never executed", id)
		require.EqualValues(t, 1, c.(*atomic.Int64).Load(), "job %s executed more than once", id)
	}
	for _, id := range unsubscribed {
		_, ran := executed.Load(id)
		require.False(t, ran, "job %s of a queue no worker serves was executed", id)
		j, err := h.store.JobGet(h.ctx, id)
		require.NoError(t, err)
		require.Equal(t, queue.StatePending, j.State)
	}
	for _, w := range workers {
		require.LessOrEqual(t, w.maxRunning.Load(), int64(w.concurrency), "worker %s ran more than its concurrency", w.id)
		require.Positive(t, w.maxRunning.Load(), "worker %s never ran a job", w.id)
	}
	// Every job was assigned once: attempt 1, one event per transition.
	res, err := h.store.JobList(h.ctx, store.JobListParams{Queue: qa, Limit: 1000})
	require.NoError(t, err)
	for _, j := range res.Jobs {
		require.Equal(t, 1, j.Attempt)
	}
}

// One caller's bad job never refuses the others' jobs that share its group
// commit: the batch falls back to one job at a time.
func TestSubmitGroupCommitIsolatesBadJobs(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	r := h.startReplica()
	q := "iso-" + h.prefix[len(h.prefix)-8:]
	_, err := h.store.QueueCreate(h.ctx, store.QueueCreateParams{Name: q})
	require.NoError(t, err)

	errs := make([]error, 60)
	var wg sync.WaitGroup
	for i := range errs {
		wg.Go(func() {
			p := store.JobInsertParams{Queue: q, Type: "noop"}
			switch i % 3 {
			case 1:
				p.Priority = 42 // invalid
			case 2:
				p.Queue = "missing-" + q // unknown queue
			}
			_, errs[i] = r.engine.Submit(h.ctx, p)
		})
	}
	wg.Wait()
	for i, err := range errs {
		switch i % 3 {
		case 0:
			require.NoError(t, err, "job %d", i)
		case 1:
			require.ErrorIs(t, err, queue.ErrInvalidArgument, "job %d", i)
		case 2:
			require.ErrorIs(t, err, queue.ErrQueueNotFound, "job %d", i)
		}
	}
	st, err := h.store.QueueStats(h.ctx, q)
	require.NoError(t, err)
	require.EqualValues(t, 20, st.Pending)
}
