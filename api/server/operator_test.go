package apiserver_test

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"connectrpc.com/connect"
	"github.com/google/uuid"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/zap/zaptest"

	jqv1 "github.com/jq-dev/jq/api/gen/jq/v1"
	"github.com/jq-dev/jq/api/workerconn"
	"github.com/jq-dev/jq/internal/testenv"
	"github.com/jq-dev/jq/queue"
	"github.com/jq-dev/jq/queue/engine"
	"github.com/jq-dev/jq/queue/executor"
	"github.com/jq-dev/jq/store"
)

func TestCancelJob(t *testing.T) {
	b := setup(t)
	cancel := func(id string) (*jqv1.CancelJobResponse, error) {
		res, err := b.cl.Jobs.CancelJob(b.ctx, connect.NewRequest(&jqv1.CancelJobRequest{JobId: id}))
		if err != nil {
			return nil, err
		}
		return res.Msg, nil
	}
	w := b.register(4)

	t.Run("Pending", func(t *testing.T) {
		j := b.insert(store.JobInsertParams{})
		res, err := cancel(j.ID)
		require.NoError(t, err)
		require.False(t, res.GetCancelRequested(), "dead-lettered at once")
		require.Equal(t, jqv1.JobState_JOB_STATE_DEAD_LETTERED, res.GetJob().GetState())
		require.Equal(t, queue.ReasonCancelled, res.GetJob().GetFailureReason())
		require.NotNil(t, res.GetJob().GetCompletedAt())

		evs, err := b.cl.Jobs.ListJobEvents(b.ctx, connect.NewRequest(&jqv1.ListJobEventsRequest{JobId: j.ID}))
		require.NoError(t, err)
		last := evs.Msg.GetEvents()[len(evs.Msg.GetEvents())-1]
		require.Equal(t, jqv1.JobState_JOB_STATE_PENDING, last.GetFromState())
		require.Equal(t, jqv1.JobState_JOB_STATE_DEAD_LETTERED, last.GetToState())
		require.Equal(t, queue.ReasonCancelled, last.GetReason())

		_, err = cancel(j.ID)
		requireCode(t, connect.CodeFailedPrecondition, err, "already DEAD_LETTERED")
	})

	t.Run("Running", func(t *testing.T) {
		j := b.lease(w, b.insert(store.JobInsertParams{}), true)
		res, err := cancel(j.ID)
		require.NoError(t, err)
		require.True(t, res.GetCancelRequested(), "cooperative")
		require.Equal(t, jqv1.JobState_JOB_STATE_RUNNING, res.GetJob().GetState())

		again, err := cancel(j.ID)
		require.NoError(t, err, "cancelling a RUNNING job twice is not an error")
		require.True(t, again.GetCancelRequested())

		hb, err := b.heartbeat(w, j)
		require.NoError(t, err)
		require.Equal(t, []string{j.ID}, hb.GetCancelJobIds(), "the worker is told at its next heartbeat")
	})

	t.Run("Done", func(t *testing.T) {
		j := b.finish(b.lease(w, b.insert(store.JobInsertParams{}), true), true, nil)
		_, err := cancel(j.ID)
		requireCode(t, connect.CodeFailedPrecondition, err)
		require.ErrorContains(t, err, "DONE")
	})

	t.Run("Errors", func(t *testing.T) {
		_, err := cancel(uuid.NewString())
		requireCode(t, connect.CodeNotFound, err)
		_, err = cancel("nope")
		requireCode(t, connect.CodeInvalidArgument, err)
	})
}

func TestRetryJob(t *testing.T) {
	b := setup(t)
	retry := func(id string) (*jqv1.Job, error) {
		res, err := b.cl.Jobs.RetryJob(b.ctx, connect.NewRequest(&jqv1.RetryJobRequest{JobId: id}))
		if err != nil {
			return nil, err
		}
		return res.Msg.GetJob(), nil
	}
	w := b.register(4)

	t.Run("DeadLettered", func(t *testing.T) {
		j := b.insert(store.JobInsertParams{})
		_, err := b.eng.JobCancel(b.ctx, j.ID)
		require.NoError(t, err)
		got, err := retry(j.ID)
		require.NoError(t, err)
		require.Equal(t, jqv1.JobState_JOB_STATE_PENDING, got.GetState())
		require.Zero(t, got.GetRetryCount())
		require.Nil(t, got.GetCompletedAt())

		_, err = retry(j.ID)
		requireCode(t, connect.CodeFailedPrecondition, err, "PENDING now")
	})

	t.Run("Failed", func(t *testing.T) {
		j := b.finish(b.lease(w, b.insert(store.JobInsertParams{}), true), false, nil)
		got, err := retry(j.ID)
		require.NoError(t, err)
		require.Equal(t, jqv1.JobState_JOB_STATE_PENDING, got.GetState())
		require.EqualValues(t, 1, got.GetAttempt(), "the attempt counter is kept")
	})

	t.Run("Errors", func(t *testing.T) {
		running := b.lease(w, b.insert(store.JobInsertParams{}), true)
		_, err := retry(running.ID)
		requireCode(t, connect.CodeFailedPrecondition, err)
		_, err = retry(uuid.NewString())
		requireCode(t, connect.CodeNotFound, err)
		_, err = retry("")
		requireCode(t, connect.CodeInvalidArgument, err)
	})
}

func TestGetJobResult(t *testing.T) {
	b := setup(t)
	get := func(id string, consume bool) (*jqv1.GetJobResultResponse, error) {
		res, err := b.cl.Jobs.GetJobResult(b.ctx, connect.NewRequest(&jqv1.GetJobResultRequest{JobId: id, Consume: consume}))
		if err != nil {
			return nil, err
		}
		return res.Msg, nil
	}
	w := b.register(4)
	result := []byte(`{"ok":true}`)

	kept := b.finish(b.lease(w, b.insert(store.JobInsertParams{KeepResult: true}), true), true, result)
	res, err := get(kept.ID, false)
	require.NoError(t, err)
	require.True(t, res.GetFound())
	require.Equal(t, jqv1.JobState_JOB_STATE_DONE, res.GetState())
	require.Equal(t, result, res.GetResult().GetData())
	require.Equal(t, queue.Checksum(result), res.GetResult().GetChecksumSha256())
	require.Equal(t, kept.CompletedAt, res.GetResult().GetCompletedAt().AsTime())
	require.NotNil(t, res.GetResult().GetRuntime())

	notKept := b.finish(b.lease(w, b.insert(store.JobInsertParams{}), true), true, result)
	res, err = get(notKept.ID, false)
	require.NoError(t, err)
	require.False(t, res.GetFound(), "submitted without keep_result")
	require.Nil(t, res.GetResult())
	require.Equal(t, jqv1.JobState_JOB_STATE_DONE, res.GetState())

	pending := b.insert(store.JobInsertParams{KeepResult: true})
	res, err = get(pending.ID, false)
	require.NoError(t, err)
	require.False(t, res.GetFound(), "not finished yet")
	require.Equal(t, jqv1.JobState_JOB_STATE_PENDING, res.GetState())

	corrupt := b.finish(b.lease(w, b.insert(store.JobInsertParams{KeepResult: true}), true), true, result)
	_, err = b.store.Pool().Exec(b.ctx, `UPDATE jobs SET result = '\x00' WHERE id = $1`, corrupt.ID)
	require.NoError(t, err)
	_, err = get(corrupt.ID, false)
	requireCode(t, connect.CodeDataLoss, err, "a result that fails its checksum is not returned")

	// Fetch-once: of concurrent consumers exactly one gets the result; later reads find none.
	var (
		wg    sync.WaitGroup
		found atomic.Int64
	)
	for range 8 {
		wg.Go(func() {
			res, err := get(kept.ID, true)
			if !assert.NoError(t, err) {
				return
			}
			if res.GetFound() {
				assert.Equal(t, result, res.GetResult().GetData())
				found.Add(1)
			}
		})
	}
	wg.Wait()
	require.EqualValues(t, 1, found.Load(), "exactly one consumer receives the result")
	res, err = get(kept.ID, false)
	require.NoError(t, err)
	require.False(t, res.GetFound(), "consumed")
	require.Equal(t, jqv1.JobState_JOB_STATE_DONE, res.GetState())
	res, err = get(pending.ID, true)
	require.NoError(t, err)
	require.False(t, res.GetFound(), "nothing to consume yet")
	_, err = get(uuid.NewString(), false)
	requireCode(t, connect.CodeNotFound, err)
	_, err = get("x", false)
	requireCode(t, connect.CodeInvalidArgument, err)
}

func TestDrainAndShutdownWorker(t *testing.T) {
	b := setup(t)
	drain := func(id string) (*jqv1.Worker, error) {
		res, err := b.cl.Workers.DrainWorker(b.ctx, connect.NewRequest(&jqv1.DrainWorkerRequest{WorkerId: id}))
		if err != nil {
			return nil, err
		}
		return res.Msg.GetWorker(), nil
	}
	shutdown := func(id string) (*jqv1.Worker, error) {
		res, err := b.cl.Workers.ShutdownWorker(b.ctx, connect.NewRequest(&jqv1.ShutdownWorkerRequest{WorkerId: id}))
		if err != nil {
			return nil, err
		}
		return res.Msg.GetWorker(), nil
	}
	command := func(id string) jqv1.WorkerCommand {
		hb, err := b.heartbeat(id)
		require.NoError(t, err)
		return hb.GetCommand()
	}

	w := b.register(2)
	require.Equal(t, jqv1.WorkerCommand_WORKER_COMMAND_UNSPECIFIED, command(w))
	for range 2 { // idempotent
		got, err := drain(w)
		require.NoError(t, err)
		require.Equal(t, jqv1.WorkerStatus_WORKER_STATUS_DRAINING, got.GetStatus())
		require.Equal(t, jqv1.WorkerCommand_WORKER_COMMAND_DRAIN, command(w))
	}
	for range 2 { // idempotent
		got, err := shutdown(w)
		require.NoError(t, err)
		require.Equal(t, jqv1.WorkerStatus_WORKER_STATUS_DRAINING, got.GetStatus())
		require.Equal(t, jqv1.WorkerCommand_WORKER_COMMAND_SHUTDOWN, command(w))
	}
	got, err := drain(w)
	require.NoError(t, err, "draining a worker that is shutting down changes nothing")
	require.Equal(t, jqv1.WorkerStatus_WORKER_STATUS_DRAINING, got.GetStatus())
	require.Equal(t, jqv1.WorkerCommand_WORKER_COMMAND_SHUTDOWN, command(w))

	online := b.register(2)
	got, err = shutdown(online)
	require.NoError(t, err, "shutdown without a drain first")
	require.Equal(t, jqv1.WorkerStatus_WORKER_STATUS_DRAINING, got.GetStatus())

	_, err = b.cl.Workers.DeregisterWorker(b.ctx, connect.NewRequest(&jqv1.DeregisterWorkerRequest{WorkerId: w}))
	require.NoError(t, err)
	_, err = drain(w)
	requireCode(t, connect.CodeFailedPrecondition, err, "drain OFFLINE")
	_, err = shutdown(w)
	requireCode(t, connect.CodeFailedPrecondition, err, "shutdown OFFLINE")

	unknown := "w-" + uuid.NewString()
	_, err = drain(unknown)
	requireCode(t, connect.CodeNotFound, err)
	_, err = shutdown(unknown)
	requireCode(t, connect.CodeNotFound, err)
	_, err = drain("")
	requireCode(t, connect.CodeInvalidArgument, err)
	_, err = shutdown("")
	requireCode(t, connect.CodeInvalidArgument, err)
}

// ResumeWorker puts a drained worker back to work: ONLINE again, its heartbeat carries no command
// and it may open its stream; a worker told to shut down, or OFFLINE, is FAILED_PRECONDITION.
func TestResumeWorker(t *testing.T) {
	b := setup(t)
	resume := func(id string) (*jqv1.Worker, error) {
		res, err := b.cl.Workers.ResumeWorker(b.ctx, connect.NewRequest(&jqv1.ResumeWorkerRequest{WorkerId: id}))
		if err != nil {
			return nil, err
		}
		return res.Msg.GetWorker(), nil
	}
	w := b.register(2)
	_, err := b.cl.Workers.DrainWorker(b.ctx, connect.NewRequest(&jqv1.DrainWorkerRequest{WorkerId: w}))
	require.NoError(t, err)
	for range 2 { // idempotent
		got, err := resume(w)
		require.NoError(t, err)
		require.Equal(t, jqv1.WorkerStatus_WORKER_STATUS_ONLINE, got.GetStatus())
		hb, err := b.heartbeat(w)
		require.NoError(t, err)
		require.Equal(t, jqv1.WorkerCommand_WORKER_COMMAND_UNSPECIFIED, hb.GetCommand())
	}

	_, err = b.cl.Workers.ShutdownWorker(b.ctx, connect.NewRequest(&jqv1.ShutdownWorkerRequest{WorkerId: w}))
	require.NoError(t, err)
	_, err = resume(w)
	requireCode(t, connect.CodeFailedPrecondition, err, "told to shut down")
	_, err = b.cl.Workers.DeregisterWorker(b.ctx, connect.NewRequest(&jqv1.DeregisterWorkerRequest{WorkerId: w}))
	require.NoError(t, err)
	_, err = resume(w)
	requireCode(t, connect.CodeFailedPrecondition, err, "OFFLINE")
	_, err = resume("w-" + uuid.NewString())
	requireCode(t, connect.CodeNotFound, err)
	_, err = resume("")
	requireCode(t, connect.CodeInvalidArgument, err)
}

func TestHeartbeat(t *testing.T) {
	b := setup(t)
	w := b.register(8)
	assigned := b.lease(w, b.insert(store.JobInsertParams{}), false)
	running := b.lease(w, b.insert(store.JobInsertParams{}), true)
	cancelled := b.lease(w, b.insert(store.JobInsertParams{}), true)
	_, err := b.eng.JobCancel(b.ctx, cancelled.ID)
	require.NoError(t, err)
	finished := b.finish(b.lease(w, b.insert(store.JobInsertParams{}), true), true, nil)
	gone := &queue.Job{ID: uuid.NewString(), Attempt: 1}

	hb, err := b.heartbeat(w)
	require.NoError(t, err, "no leases")
	require.Empty(t, hb.GetCancelJobIds())

	hb, err = b.heartbeat(w, assigned, running, cancelled, finished, gone)
	require.NoError(t, err)
	require.Equal(t, jqv1.WorkerCommand_WORKER_COMMAND_UNSPECIFIED, hb.GetCommand())
	require.Equal(t, []string{cancelled.ID, finished.ID, gone.ID}, hb.GetCancelJobIds(),
		"cancel-requested, finished and unknown jobs; current leases are kept")

	other := b.register(1)
	hb, err = b.heartbeat(other, running)
	require.NoError(t, err)
	require.Equal(t, []string{running.ID}, hb.GetCancelJobIds(), "another worker's lease")

	_, err = b.cl.Workers.DeregisterWorker(b.ctx, connect.NewRequest(&jqv1.DeregisterWorkerRequest{WorkerId: other}))
	require.NoError(t, err)
	_, err = b.heartbeat(other)
	requireCode(t, connect.CodeFailedPrecondition, err, "an OFFLINE worker must register again")
	_, err = b.heartbeat("w-" + uuid.NewString())
	requireCode(t, connect.CodeNotFound, err)
}

// startWorker runs a real executor for the bundle's queue until the test ends
// and returns its id and a channel that receives what its Run returns.
func (b *bundle) startWorker(mux *queue.Mux) (string, <-chan error) {
	b.t.Helper()
	id := "w-" + uuid.NewString()[:12]
	ex, err := executor.New(executor.Options{
		Conn: workerconn.New(b.cl), Handler: mux, WorkerID: id, Hostname: "test", Concurrency: 2,
		Queues: []string{b.queue}, Logger: zaptest.NewLogger(b.t), ShutdownGrace: 5 * time.Second,
	})
	require.NoError(b.t, err)
	ctx, cancel := context.WithCancel(context.Background())
	stopped := make(chan struct{})
	done := make(chan error, 1)
	go func() { done <- ex.Run(ctx); close(stopped) }()
	b.t.Cleanup(func() {
		cancel()
		select {
		case <-stopped:
		case <-time.After(30 * time.Second):
			b.t.Error("the worker did not stop")
		}
	})
	return id, done
}

func (b *bundle) submit(spec *jqv1.JobSpec) string {
	b.t.Helper()
	spec.Queue = b.queue
	res, err := b.cl.Jobs.SubmitJob(b.ctx, connect.NewRequest(&jqv1.SubmitJobRequest{Job: spec}))
	require.NoError(b.t, err)
	return res.Msg.GetJobId()
}

func (b *bundle) waitState(id string, want jqv1.JobState) *jqv1.Job {
	b.t.Helper()
	var j *jqv1.Job
	testenv.Eventually(b.t, 20*time.Second, func() error {
		res, err := b.cl.Jobs.GetJob(b.ctx, connect.NewRequest(&jqv1.GetJobRequest{JobId: id}))
		if err != nil {
			return err
		}
		if j = res.Msg.GetJob(); j.GetState() != want {
			return fmt.Errorf("job %s is %v, want %v", id, j.GetState(), want)
		}
		return nil
	})
	return j
}

// A RUNNING job cancelled by the operator: the worker learns it from its
// heartbeat, its handler's context is cancelled, and the job ends
// DEAD_LETTERED with reason "cancelled" (FR-012).
func TestCancelRunningJobEndToEnd(t *testing.T) {
	b := setupEngine(t, engine.Options{ReaperInterval: 100 * time.Millisecond})
	started := make(chan struct{}, 1)
	var cause atomic.Value
	mux := queue.NewMux()
	mux.RegisterFunc("block", func(ctx context.Context, _ *queue.Job) ([]byte, error) {
		started <- struct{}{}
		<-ctx.Done()
		cause.Store(fmt.Sprint(context.Cause(ctx)))
		return nil, ctx.Err()
	})
	b.startWorker(mux)
	id := b.submit(&jqv1.JobSpec{Type: "block"})
	select {
	case <-started:
	case <-b.ctx.Done():
		t.Fatal("the job never started")
	}
	b.waitState(id, jqv1.JobState_JOB_STATE_RUNNING)

	res, err := b.cl.Jobs.CancelJob(b.ctx, connect.NewRequest(&jqv1.CancelJobRequest{JobId: id}))
	require.NoError(t, err)
	require.True(t, res.Msg.GetCancelRequested())

	j := b.waitState(id, jqv1.JobState_JOB_STATE_DEAD_LETTERED)
	require.Equal(t, queue.ReasonCancelled, j.GetFailureReason())
	require.NotNil(t, cause.Load(), "the handler's context was cancelled")
}

// ShutdownWorker: the worker's heartbeat says SHUTDOWN, and it drains,
// deregisters and exits (FR-024).
func TestShutdownWorkerEndToEnd(t *testing.T) {
	b := setupEngine(t, engine.Options{})
	mux := queue.NewMux()
	mux.RegisterFunc("noop", func(context.Context, *queue.Job) ([]byte, error) { return nil, nil })
	id, done := b.startWorker(mux)
	b.waitState(b.submit(&jqv1.JobSpec{Type: "noop"}), jqv1.JobState_JOB_STATE_DONE) // it is up

	res, err := b.cl.Workers.ShutdownWorker(b.ctx, connect.NewRequest(&jqv1.ShutdownWorkerRequest{WorkerId: id}))
	require.NoError(t, err)
	require.Equal(t, jqv1.WorkerStatus_WORKER_STATUS_DRAINING, res.Msg.GetWorker().GetStatus())
	select {
	case err := <-done:
		require.NoError(t, err, "the worker exits cleanly")
	case <-time.After(20 * time.Second):
		t.Fatal("the worker did not exit")
	}
	w, err := b.store.WorkerGet(b.ctx, id)
	require.NoError(t, err)
	require.Equal(t, queue.WorkerOffline, w.Status, "it deregistered")
}

// RetryJob wakes the scheduler: with a scheduler tick far away, the retried
// job still reaches the worker.
func TestRetryJobDispatchesAgain(t *testing.T) {
	b := setupEngine(t, engine.Options{SchedulerInterval: time.Hour})
	var runs atomic.Int64
	mux := queue.NewMux()
	mux.RegisterFunc("once", func(context.Context, *queue.Job) ([]byte, error) {
		runs.Add(1)
		return []byte("ok"), nil
	})
	id := b.submit(&jqv1.JobSpec{Type: "once", KeepResult: true})
	_, err := b.cl.Jobs.CancelJob(b.ctx, connect.NewRequest(&jqv1.CancelJobRequest{JobId: id}))
	require.NoError(t, err, "no worker yet: the job is PENDING")
	b.startWorker(mux)
	// A probe job done proves the stream open and the scheduler idle until its next wake.
	b.waitState(b.submit(&jqv1.JobSpec{Type: "once"}), jqv1.JobState_JOB_STATE_DONE)
	runs.Store(0)

	res, err := b.cl.Jobs.RetryJob(b.ctx, connect.NewRequest(&jqv1.RetryJobRequest{JobId: id}))
	require.NoError(t, err)
	require.Equal(t, jqv1.JobState_JOB_STATE_PENDING, res.Msg.GetJob().GetState())

	j := b.waitState(id, jqv1.JobState_JOB_STATE_DONE)
	require.EqualValues(t, 1, j.GetAttempt(), "the first dispatch is the retried one")
	require.EqualValues(t, 1, runs.Load())
	got, err := b.cl.Jobs.GetJobResult(b.ctx, connect.NewRequest(&jqv1.GetJobResultRequest{JobId: id}))
	require.NoError(t, err)
	require.True(t, got.Msg.GetFound())
	require.Equal(t, []byte("ok"), got.Msg.GetResult().GetData())
}

// DrainWorker ends the worker's assignment stream with OK and the stream
// cannot be opened again while it is DRAINING (FR-023).
func TestDrainEndsStream(t *testing.T) {
	b := setupEngine(t, engine.Options{})
	w := b.register(2)
	stream, err := b.cl.Workers.StreamJobs(b.ctx, connect.NewRequest(&jqv1.StreamJobsRequest{WorkerId: w}))
	require.NoError(t, err)
	defer func() { _ = stream.Close() }()
	require.True(t, stream.Receive(), "the first message is a keepalive: %v", stream.Err())

	_, err = b.cl.Workers.DrainWorker(b.ctx, connect.NewRequest(&jqv1.DrainWorkerRequest{WorkerId: w}))
	require.NoError(t, err)
	for stream.Receive() {
		require.Nil(t, stream.Msg().GetAssignment(), "no job for a draining worker")
	}
	require.NoError(t, stream.Err(), "the stream ends with OK")

	again, err := b.cl.Workers.StreamJobs(b.ctx, connect.NewRequest(&jqv1.StreamJobsRequest{WorkerId: w}))
	require.NoError(t, err)
	defer func() { _ = again.Close() }()
	require.False(t, again.Receive())
	requireCode(t, connect.CodeFailedPrecondition, again.Err())
}
