package inproc_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"
	"go.uber.org/zap/zaptest"

	"github.com/jq-dev/jq/internal/testenv"
	"github.com/jq-dev/jq/internal/testenv/stores"
	"github.com/jq-dev/jq/queue"
	"github.com/jq-dev/jq/queue/engine"
	"github.com/jq-dev/jq/queue/executor"
	"github.com/jq-dev/jq/queue/inproc"
	"github.com/jq-dev/jq/store"
)

// TestWorkerOverTheEngine runs a real executor on the in-process Conn against a running engine over
// Postgres and Redis: jobs run and settle, a handler's progress is stored while it runs, a drained
// worker's stream ends, and the worker deregisters when it stops.
func TestWorkerOverTheEngine(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	st := stores.Postgres(ctx, t, 8)
	eng, err := engine.New(engine.Options{Store: st, Dispatcher: stores.Dispatcher(ctx, t), Notifier: st, Log: zaptest.NewLogger(t)})
	require.NoError(t, err)
	engCtx, stopEngine := context.WithCancel(context.Background())
	engDone := make(chan struct{})
	go func() { _ = eng.Run(engCtx); close(engDone) }()
	defer func() { eng.CloseSessions(); stopEngine(); <-engDone }()
	q, err := st.QueueCreate(ctx, store.QueueCreateParams{Name: "inproc"})
	require.NoError(t, err)

	release := make(chan struct{})
	mux := queue.NewMux()
	mux.RegisterFunc("step", func(ctx context.Context, j *queue.Job) ([]byte, error) {
		if err := queue.Progress(ctx, 40, "half way"); err != nil {
			return nil, err
		}
		<-release
		return []byte(`"ok"`), nil
	})
	mux.RegisterFunc("noop", func(context.Context, *queue.Job) ([]byte, error) { return nil, nil })
	worker := "w-" + uuid.NewString()[:12]
	ex, err := executor.New(executor.Options{
		Conn:    inproc.New(inproc.Options{Engine: eng, Workers: st, Registration: executor.Registration{HeartbeatTimeout: 10 * time.Second}}),
		Handler: mux, WorkerID: worker, Hostname: "test", Concurrency: 4, Queues: []string{q.Name},
		Logger: zaptest.NewLogger(t), ShutdownGrace: 5 * time.Second,
	})
	require.NoError(t, err)
	runCtx, stop := context.WithCancel(context.Background())
	stopped := make(chan error, 1)
	go func() { stopped <- ex.Run(runCtx) }()

	var ps []store.JobInsertParams
	ps = append(ps, store.JobInsertParams{Queue: q.Name, Type: "step"})
	for range 20 {
		ps = append(ps, store.JobInsertParams{Queue: q.Name, Type: "noop"})
	}
	res, err := st.JobInsertMany(ctx, ps)
	require.NoError(t, err)
	eng.WakeScheduler()

	step := res[0].Job.ID
	testenv.Eventually(t, 20*time.Second, func() error {
		p, err := st.JobProgressGet(ctx, step)
		if err != nil {
			return err
		}
		if p == nil || p.Percent != 40 || p.Message != "half way" {
			return fmt.Errorf("progress of the running job: %+v", p)
		}
		return nil
	})
	close(release)
	testenv.Eventually(t, 20*time.Second, func() error {
		for _, r := range res {
			j, err := st.JobGet(ctx, r.Job.ID)
			if err != nil {
				return err
			}
			if j.State != queue.StateDone || j.WorkerID != worker {
				return fmt.Errorf("job %s is %s (worker %q)", j.ID, j.State, j.WorkerID)
			}
		}
		return nil
	})

	stop()
	select {
	case err := <-stopped:
		require.True(t, err == nil || errors.Is(err, context.Canceled), "executor: %v", err)
	case <-time.After(30 * time.Second):
		t.Fatal("the worker did not stop")
	}
	w, err := st.WorkerGet(ctx, worker)
	require.NoError(t, err)
	require.Equal(t, queue.WorkerOffline, w.Status, "deregistered on stop")
}

// TestTypeAwareDispatch runs two executors on one queue, one handling a, the other b (their
// Mux's types, registered through the in-process Conn): every job runs on the worker of its type at
// its first attempt and none is dead-lettered; a job of a type neither handles, submitted first,
// stays PENDING with no attempt while the claims pass over it, and the third worker, which takes
// every type, runs it.
func TestTypeAwareDispatch(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	st := stores.Postgres(ctx, t, 8)
	eng, err := engine.New(engine.Options{Store: st, Dispatcher: stores.Dispatcher(ctx, t), Notifier: st, Log: zaptest.NewLogger(t)})
	require.NoError(t, err)
	engCtx, stopEngine := context.WithCancel(context.Background())
	engDone := make(chan struct{})
	go func() { _ = eng.Run(engCtx); close(engDone) }()
	defer func() { eng.CloseSessions(); stopEngine(); <-engDone }()
	q, err := st.QueueCreate(ctx, store.QueueCreateParams{Name: "typed-" + uuid.NewString()[:8]})
	require.NoError(t, err)

	conn := inproc.New(inproc.Options{Engine: eng, Workers: st, Registration: executor.Registration{HeartbeatTimeout: 10 * time.Second}})
	start := func(name string, types ...string) string {
		ok := func(context.Context, *queue.Job) ([]byte, error) { return nil, nil }
		var h queue.Handler = queue.HandlerFunc(ok) // no Types method: every type
		if len(types) > 0 {
			mux := queue.NewMux()
			for _, typ := range types {
				mux.RegisterFunc(typ, ok)
			}
			h = mux
		}
		id := name + "-" + uuid.NewString()[:8]
		ex, err := executor.New(executor.Options{
			Conn: conn, Handler: h, WorkerID: id, Hostname: "test", Concurrency: 3, Queues: []string{q.Name},
			Logger: zaptest.NewLogger(t), ShutdownGrace: 5 * time.Second,
		})
		require.NoError(t, err)
		runCtx, stop := context.WithCancel(context.Background())
		stopped := make(chan error, 1)
		go func() { stopped <- ex.Run(runCtx) }()
		t.Cleanup(func() {
			stop()
			select {
			case err := <-stopped:
				require.True(t, err == nil || errors.Is(err, context.Canceled), "executor %s: %v", id, err)
			case <-time.After(30 * time.Second):
				t.Errorf("worker %s did not stop", id)
			}
		})
		testenv.Eventually(t, 20*time.Second, func() error {
			w, err := st.WorkerGet(ctx, id)
			if err != nil {
				return err
			}
			if !slices.Equal(w.Types, types) {
				return fmt.Errorf("worker %s registered types %v, want %v", id, w.Types, types)
			}
			return nil
		})
		return id
	}
	wa, wb := start("wa", "a"), start("wb", "b")

	submitted, err := eng.Submit(ctx, store.JobInsertParams{Queue: q.Name, Type: "c", Priority: 9})
	require.NoError(t, err)
	orphan := submitted.Job
	var ps []store.JobInsertParams
	for i := range 40 {
		ps = append(ps, store.JobInsertParams{Queue: q.Name, Type: string(rune('a' + i%2))})
	}
	res, err := st.JobInsertMany(ctx, ps)
	require.NoError(t, err)
	eng.WakeScheduler()
	testenv.Eventually(t, 30*time.Second, func() error {
		for _, r := range res {
			j, err := st.JobGet(ctx, r.Job.ID)
			if err != nil {
				return err
			}
			if j.State != queue.StateDone {
				return fmt.Errorf("job %s of type %s is %s", j.ID, j.Type, j.State)
			}
			want := map[string]string{"a": wa, "b": wb}[j.Type]
			require.Equal(t, want, j.WorkerID, "job %s of type %s", j.ID, j.Type)
			require.Equal(t, 1, j.Attempt, "job %s: no attempt lost to the wrong worker", j.ID)
		}
		return nil
	})
	j, err := st.JobGet(ctx, orphan.ID)
	require.NoError(t, err)
	require.Equal(t, queue.StatePending, j.State, "a type nobody handles waits")
	require.Zero(t, j.Attempt)
	ws, err := st.WorkerList(ctx)
	require.NoError(t, err)
	require.Equal(t, "no connected worker handles type c", queue.Waiting(q.Name, []string{"c"}, ws))
	dead, err := st.JobCountDeadLettered(ctx)
	require.NoError(t, err)
	require.Zero(t, dead[q.Name])

	wany := start("wany")
	testenv.Eventually(t, 20*time.Second, func() error {
		j, err := st.JobGet(ctx, orphan.ID)
		if err != nil {
			return err
		}
		if j.State != queue.StateDone || j.WorkerID != wany || j.Attempt != 1 {
			return fmt.Errorf("job %s is %s on %q at attempt %d", j.ID, j.State, j.WorkerID, j.Attempt)
		}
		return nil
	})
}
