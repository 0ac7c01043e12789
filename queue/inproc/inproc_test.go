package inproc_test

import (
	"context"
	"errors"
	"fmt"
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
