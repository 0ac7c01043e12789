package apiserver_test

// Conformance of the taskqueue.v1 facade with seed 003's text (its "Client-Facing API Message
// Draft", "Cancellation Semantics", "gRPC Status Code Policy" and "Client-Facing Idempotency
// Matrix"), over a real engine, Postgres and Redis, through a gRPC client of the facade. Jobs are
// driven through jq's states by the store (deterministic intermediate states) and by a real
// worker (end to end).

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"connectrpc.com/connect"
	"github.com/google/uuid"
	"github.com/stretchr/testify/require"
	"go.uber.org/zap/zaptest"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/durationpb"

	jqv1 "github.com/jq-dev/jq/api/gen/jq/v1"
	tqv1 "github.com/jq-dev/jq/api/gen/taskqueue/v1"
	"github.com/jq-dev/jq/api/gen/taskqueue/v1/taskqueuev1connect"
	"github.com/jq-dev/jq/api/rpcclient"
	"github.com/jq-dev/jq/api/server"
	"github.com/jq-dev/jq/internal/testenv"
	"github.com/jq-dev/jq/queue"
	"github.com/jq-dev/jq/queue/engine"
	"github.com/jq-dev/jq/queue/handlers"
	"github.com/jq-dev/jq/store"
)

// tqBundle is a bundle plus a gRPC client of the facade, whose jobs land on the bundle's queue.
type tqBundle struct {
	*bundle
	tq taskqueuev1connect.TaskQueuePublicServiceClient
}

// setupTQ serves the API with an engine over a database of the test's own (so ListJobs sees only
// the test's jobs). The engine's reaper and scheduler are slowed down to a crawl unless opts says
// otherwise, so that the store-driven tests see every intermediate state.
func setupTQ(t *testing.T, opts engine.Options) *tqBundle {
	t.Helper()
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	st, eng := runEngine(ctx, t, opts)
	b := newBundle(t, st)
	b.eng = eng
	addr := serveAddr(t, apiserver.Options{
		Store: st, Engine: eng, Log: zaptest.NewLogger(t), Limits: apiserver.Limits{MaxPayloadBytes: 1 << 20},
		Workers:        apiserver.WorkerTiming{HeartbeatInterval: time.Second, HeartbeatTimeout: 10 * time.Second},
		TaskQueueQueue: b.queue,
	})
	cl, err := rpcclient.New(rpcclient.Options{Addr: addr})
	require.NoError(t, err)
	t.Cleanup(cl.Close)
	b.cl = cl
	// A plain gRPC client over h2c: what a seed-003 client generated from the proto would use.
	p := new(http.Protocols)
	p.SetUnencryptedHTTP2(true)
	tr := &http.Transport{Protocols: p, DialContext: (&net.Dialer{}).DialContext}
	t.Cleanup(tr.CloseIdleConnections)
	tq := taskqueuev1connect.NewTaskQueuePublicServiceClient(&http.Client{Transport: tr}, "http://"+addr, connect.WithGRPC())
	return &tqBundle{bundle: b, tq: tq}
}

func (b *tqBundle) submitTQ(spec *tqv1.JobSpec, key string) *tqv1.SubmitJobResponse {
	b.t.Helper()
	res, err := b.tq.SubmitJob(b.ctx, connect.NewRequest(&tqv1.SubmitJobRequest{Spec: spec, ClientRequestId: key}))
	require.NoError(b.t, err)
	return res.Msg
}

func (b *tqBundle) status(id string) *tqv1.GetJobStatusResponse {
	b.t.Helper()
	res, err := b.tq.GetJobStatus(b.ctx, connect.NewRequest(&tqv1.GetJobStatusRequest{JobId: id}))
	require.NoError(b.t, err)
	return res.Msg
}

func (b *tqBundle) result(id string) *tqv1.GetJobResultResponse {
	b.t.Helper()
	res, err := b.tq.GetJobResult(b.ctx, connect.NewRequest(&tqv1.GetJobResultRequest{JobId: id}))
	require.NoError(b.t, err)
	return res.Msg
}

func (b *tqBundle) cancelTQ(id string) *tqv1.CancelJobResponse {
	b.t.Helper()
	res, err := b.tq.CancelJob(b.ctx, connect.NewRequest(&tqv1.CancelJobRequest{JobId: id, Reason: "test"}))
	require.NoError(b.t, err)
	return res.Msg
}

// requireStatus checks GetJobStatus and the job's line in ListJobs agree on status and flag.
func (b *tqBundle) requireStatus(id string, want tqv1.JobStatus, cancelRequested bool) *tqv1.GetJobStatusResponse {
	b.t.Helper()
	s := b.status(id)
	require.Equal(b.t, id, s.GetJobId())
	require.Equal(b.t, want, s.GetStatus(), "job %s", id)
	require.Equal(b.t, cancelRequested, s.GetCancelRequested(), "cancel_requested of job %s", id)
	require.NotZero(b.t, s.GetCreatedAtMs())
	if want == tqv1.JobStatus_DONE || want == tqv1.JobStatus_FAILED || want == tqv1.JobStatus_CANCELED {
		require.GreaterOrEqual(b.t, s.GetFinishedAtMs(), s.GetCreatedAtMs(), "finished_at_ms of a terminal job")
	} else {
		require.Zero(b.t, s.GetFinishedAtMs())
	}
	if want != tqv1.JobStatus_FAILED {
		require.Empty(b.t, s.GetFailureReason(), "failure_reason is empty unless FAILED")
	}
	// ListJobs filtered by that status shows it, the same way.
	var found *tqv1.JobSummary
	for _, j := range b.listAll(&tqv1.ListJobsRequest{StatusFilter: []tqv1.JobStatus{want}}) {
		if j.GetJobId() == id {
			found = j
		}
	}
	require.NotNil(b.t, found, "job %s is listed under %v", id, want)
	require.Equal(b.t, cancelRequested, found.GetCancelRequested())
	require.Equal(b.t, s.GetStartedAtMs(), found.GetStartedAtMs())
	require.Equal(b.t, s.GetFinishedAtMs(), found.GetFinishedAtMs())
	return s
}

// listAll walks every page of a listing.
func (b *tqBundle) listAll(req *tqv1.ListJobsRequest) []*tqv1.JobSummary {
	b.t.Helper()
	var all []*tqv1.JobSummary
	if req.Page == nil {
		req.Page = &tqv1.PageRequest{}
	}
	for pages := 0; ; pages++ {
		require.Less(b.t, pages, 1000, "pagination does not end")
		res, err := b.tq.ListJobs(b.ctx, connect.NewRequest(req))
		require.NoError(b.t, err)
		all = append(all, res.Msg.GetJobs()...)
		if res.Msg.GetPage().GetNextPageToken() == "" {
			return all
		}
		req.Page.PageToken = res.Msg.GetPage().GetNextPageToken()
	}
}

func (b *tqBundle) job(id string) *queue.Job {
	b.t.Helper()
	j, err := b.store.JobGet(b.ctx, id)
	require.NoError(b.t, err)
	return j
}

// fail reports a RUNNING job's failure as its worker would.
func (b *tqBundle) fail(j *queue.Job, reason string, permanent bool) *queue.Job {
	b.t.Helper()
	outs, err := b.store.JobReportMany(b.ctx, []store.JobReportParams{{
		JobLease: store.JobLease{ID: j.ID, Attempt: j.Attempt, WorkerID: j.WorkerID},
		Error:    "boom (" + reason + ")", Reason: reason, Permanent: permanent,
	}})
	require.NoError(b.t, err)
	require.NoError(b.t, outs[0].Err)
	return outs[0].Job
}

// sweep runs the retry sweep the engine's reaper runs: FAILED → PENDING or DEAD_LETTERED.
func (b *tqBundle) sweep() {
	b.t.Helper()
	_, err := b.store.JobSettleFailed(b.ctx, 1000, settleNow)
	require.NoError(b.t, err)
}

// requireCancel compares CancelJob answers field by field.
func requireCancel(t *testing.T, want, got *tqv1.CancelJobResponse, msgAndArgs ...any) {
	t.Helper()
	if !proto.Equal(want, got) {
		require.Fail(t, fmt.Sprintf("CancelJob answered %v, want %v", got, want), msgAndArgs...)
	}
}

// with returns a copy of the bundle for a subtest, so that its assertions fail the subtest.
func (b *tqBundle) with(t *testing.T) *tqBundle {
	c := *b.bundle
	c.t = t
	return &tqBundle{bundle: &c, tq: b.tq}
}

// ack acknowledges an ASSIGNED job as its worker: ASSIGNED → RUNNING.
func (b *tqBundle) ack(j *queue.Job) *queue.Job {
	b.t.Helper()
	outs, err := b.store.JobAckMany(b.ctx, []store.JobLease{{ID: j.ID, Attempt: j.Attempt, WorkerID: j.WorkerID}})
	require.NoError(b.t, err)
	require.NoError(b.t, outs[0].Err)
	return outs[0].Job
}

// idle keeps the engine from acting on its own: the store-driven tests move every job themselves.
var idle = engine.Options{ReaperInterval: time.Hour, SchedulerInterval: time.Hour}

// Every jq state, as the seed's status, through GetJobStatus, ListJobs and GetJobResult.
func TestTaskQueueStateMapping(t *testing.T) {
	b := setupTQ(t, idle)
	w := b.register(8)
	spec := &tqv1.JobSpec{JobType: "t", WorkDurationMs: 5, PayloadSizeBytes: 10, Labels: map[string]string{"k": "v"}}
	submit := func() *queue.Job {
		before := time.Now().UnixMilli()
		res := b.submitTQ(spec, "")
		require.Equal(t, tqv1.JobStatus_QUEUED, res.GetInitialStatus(), "initial_status is QUEUED")
		require.GreaterOrEqual(t, res.GetAcceptedAtMs(), before-1000, "accepted_at_ms is the server's epoch ms")
		require.NoError(t, uuid.Validate(res.GetJobId()))
		return b.job(res.GetJobId())
	}

	t.Run("PendingAssignedRunningDone", func(t *testing.T) {
		b := b.with(t)
		j := submit()
		require.Equal(t, `{"work_duration_ms":5,"payload_size_bytes":10}`, string(j.Payload), "the spec is the payload")
		require.Equal(t, handlers.TypeSynthetic, j.Type, "the built-in synthetic handler runs it")
		require.Equal(t, map[string]string{"k": "v", "taskqueue.job_type": "t"}, j.Labels, "job_type is a label")
		s := b.requireStatus(j.ID, tqv1.JobStatus_QUEUED, false) // PENDING
		require.Zero(t, s.GetStartedAtMs())
		require.False(t, b.result(j.ID).GetResultReady())
		require.Equal(t, tqv1.JobStatus_JOB_STATUS_UNSPECIFIED, b.result(j.ID).GetTerminalStatus())

		j = b.lease(w, j, false)
		b.requireStatus(j.ID, tqv1.JobStatus_QUEUED, false) // ASSIGNED
		j = b.ack(j)
		require.Equal(t, queue.StateRunning, j.State)
		s = b.requireStatus(j.ID, tqv1.JobStatus_RUNNING, false)
		require.Equal(t, j.StartedAt.UnixMilli(), s.GetStartedAtMs())
		r := b.result(j.ID)
		require.False(t, r.GetResultReady(), "non-terminal: result_ready false")
		require.Equal(t, tqv1.JobStatus_JOB_STATUS_UNSPECIFIED, r.GetTerminalStatus())

		b.finish(j, true, []byte("output"))
		b.requireStatus(j.ID, tqv1.JobStatus_DONE, false)
		r = b.result(j.ID)
		require.True(t, r.GetResultReady())
		require.Equal(t, tqv1.JobStatus_DONE, r.GetTerminalStatus())
		require.Equal(t, []byte("output"), r.GetOutputBytes())
		sum := sha256.Sum256([]byte("output"))
		require.Equal(t, hex.EncodeToString(sum[:]), r.GetChecksum(), "lowercase hex SHA-256 of output_bytes")
		require.Equal(t, j.ID, r.GetJobId())
	})

	t.Run("FailedAwaitingRetryIsQueued", func(t *testing.T) {
		b := b.with(t)
		j := b.lease(w, submit(), true)
		require.Positive(t, j.MaxRetries, "the queue retries")
		j = b.fail(j, "error", false)
		require.Equal(t, queue.StateFailed, j.State)
		b.requireStatus(j.ID, tqv1.JobStatus_QUEUED, false)
		require.False(t, b.result(j.ID).GetResultReady(), "still in flight")
		b.sweep()
		require.Equal(t, queue.StatePending, b.job(j.ID).State, "retried after backoff")
		b.requireStatus(j.ID, tqv1.JobStatus_QUEUED, false)
	})

	t.Run("DeadLetteredIsFailed", func(t *testing.T) {
		b := b.with(t)
		j := b.fail(b.lease(w, submit(), true), "error", true)
		b.requireStatus(j.ID, tqv1.JobStatus_QUEUED, false) // FAILED, about to be dead-lettered
		b.sweep()
		require.Equal(t, queue.StateDeadLettered, b.job(j.ID).State)
		s := b.requireStatus(j.ID, tqv1.JobStatus_FAILED, false)
		require.Equal(t, "permanent_failure", s.GetFailureReason(), "failure_reason is set for FAILED: why it was dead-lettered")
		r := b.result(j.ID)
		require.True(t, r.GetResultReady())
		require.Equal(t, tqv1.JobStatus_FAILED, r.GetTerminalStatus())
		require.Empty(t, r.GetOutputBytes())
		require.Equal(t, "boom (error)", r.GetOutputSummary(), "failure details in output_summary")
		require.Empty(t, r.GetChecksum())
	})

	t.Run("CancelQueued", func(t *testing.T) {
		b := b.with(t)
		for _, st := range []queue.State{queue.StatePending, queue.StateAssigned, queue.StateFailed} {
			j := submit()
			switch st {
			case queue.StateAssigned:
				b.lease(w, j, false)
			case queue.StateFailed:
				b.fail(b.lease(w, j, true), "error", false)
			}
			require.Equal(t, st, b.job(j.ID).State)
			c := b.cancelTQ(j.ID)
			requireCancel(t, &tqv1.CancelJobResponse{JobId: j.ID, Accepted: true, CurrentStatus: tqv1.JobStatus_CANCELED}, c,
				"a %s job (QUEUED) is cancelled at once", st)
			b.requireStatus(j.ID, tqv1.JobStatus_CANCELED, true)
			r := b.result(j.ID)
			require.True(t, r.GetResultReady())
			require.Equal(t, tqv1.JobStatus_CANCELED, r.GetTerminalStatus())
			require.Equal(t, "cancelled while queued", r.GetOutputSummary(), "cancellation context")

			again := b.cancelTQ(j.ID)
			requireCancel(t, &tqv1.CancelJobResponse{JobId: j.ID, Accepted: false, CurrentStatus: tqv1.JobStatus_CANCELED,
				AlreadyTerminal: true}, again, "a repeated cancel is a deterministic OK")
		}
	})

	t.Run("CancelRunningWins", func(t *testing.T) {
		b := b.with(t)
		j := b.lease(w, submit(), true)
		c := b.cancelTQ(j.ID)
		requireCancel(t, &tqv1.CancelJobResponse{JobId: j.ID, Accepted: true, CurrentStatus: tqv1.JobStatus_RUNNING}, c,
			"best-effort: the job runs on")
		b.requireStatus(j.ID, tqv1.JobStatus_RUNNING, true)
		requireCancel(t, c, b.cancelTQ(j.ID), "cancelling a running job twice changes nothing")

		// The worker stops the handler and reports it; the job is CANCELED once the sweep settles it,
		// and RUNNING with cancel_requested until then, never queued again.
		j = b.fail(j, queue.ReasonCancelled, true)
		require.Equal(t, queue.StateFailed, j.State)
		b.requireStatus(j.ID, tqv1.JobStatus_RUNNING, true)
		b.sweep()
		b.requireStatus(j.ID, tqv1.JobStatus_CANCELED, true)
		r := b.result(j.ID)
		require.Equal(t, tqv1.JobStatus_CANCELED, r.GetTerminalStatus())
		require.Equal(t, "boom (cancelled)", r.GetOutputSummary(), "the stopped attempt's message")
		requireCancel(t, &tqv1.CancelJobResponse{JobId: j.ID, CurrentStatus: tqv1.JobStatus_CANCELED, AlreadyTerminal: true},
			b.cancelTQ(j.ID))
	})

	t.Run("CancelRunningLoses", func(t *testing.T) {
		b := b.with(t)
		j := b.lease(w, submit(), true)
		require.True(t, b.cancelTQ(j.ID).GetAccepted())
		b.finish(j, true, nil) // completion wins the race
		b.requireStatus(j.ID, tqv1.JobStatus_DONE, true)
		r := b.result(j.ID)
		require.Equal(t, tqv1.JobStatus_DONE, r.GetTerminalStatus())
		require.Empty(t, r.GetOutputBytes())
		require.Equal(t, hex.EncodeToString(func() []byte { s := sha256.Sum256(nil); return s[:] }()), r.GetChecksum(),
			"the checksum is set for an empty output too")
		requireCancel(t, &tqv1.CancelJobResponse{JobId: j.ID, CurrentStatus: tqv1.JobStatus_DONE, AlreadyTerminal: true},
			b.cancelTQ(j.ID), "cancel of a DONE job: OK, already terminal")
	})
}

// The same lifecycle with a real worker running the built-in synthetic handler, as a worker
// process does: a job works for its work_duration_ms and returns payload_size_bytes of output
// whose checksum matches; one asking for more than MAX_OUTPUT_BYTES fails with OUTPUT_TOO_LARGE;
// a running one is cancelled.
func TestTaskQueueEndToEnd(t *testing.T) {
	b := setupTQ(t, engine.Options{ReaperInterval: 100 * time.Millisecond})
	mux := queue.NewMux()
	handlers.Register(mux, handlers.Options{})
	b.startWorker(mux)
	wait := func(id string, want tqv1.JobStatus) {
		testenv.Eventually(t, 20*time.Second, func() error {
			if got := b.status(id).GetStatus(); got != want {
				return fmt.Errorf("job %s is %v, want %v", id, got, want)
			}
			return nil
		})
	}

	ok := b.submitTQ(&tqv1.JobSpec{JobType: "sleep", WorkDurationMs: 300, PayloadSizeBytes: 5000}, "").GetJobId()
	wait(ok, tqv1.JobStatus_DONE)
	r := b.result(ok)
	require.True(t, r.GetResultReady())
	require.Len(t, r.GetOutputBytes(), 5000, "output of the asked size")
	sum := sha256.Sum256(r.GetOutputBytes())
	require.Equal(t, hex.EncodeToString(sum[:]), r.GetChecksum(), "the checksum matches the output")
	require.Equal(t, handlers.SyntheticOutput(ok, 5000), r.GetOutputBytes(), "deterministic output")
	require.GreaterOrEqual(t, r.GetRuntimeMs(), uint32(300), "it ran at least work_duration_ms")
	s := b.status(ok)
	require.GreaterOrEqual(t, s.GetFinishedAtMs()-s.GetStartedAtMs(), int64(300))
	t.Logf("synthetic job of 300 ms, 5000 bytes: runtime_ms %d, started→finished %d ms", r.GetRuntimeMs(), s.GetFinishedAtMs()-s.GetStartedAtMs())
	lst, err := b.tq.ListJobs(b.ctx, connect.NewRequest(&tqv1.ListJobsRequest{}))
	require.NoError(t, err)
	require.Equal(t, ok, lst.Msg.GetJobs()[0].GetJobId())
	require.Equal(t, "sleep", lst.Msg.GetJobs()[0].GetJobType(), "job_type is the seed's, not the handler's")

	tooLarge := b.submitTQ(&tqv1.JobSpec{JobType: "big", PayloadSizeBytes: handlers.DefaultMaxOutputBytes + 1}, "").GetJobId()
	wait(tooLarge, tqv1.JobStatus_FAILED)
	require.Equal(t, "output_too_large", b.status(tooLarge).GetFailureReason())
	require.Contains(t, b.result(tooLarge).GetOutputSummary(), "OUTPUT_TOO_LARGE")

	running := b.submitTQ(&tqv1.JobSpec{JobType: "long", WorkDurationMs: 60_000}, "").GetJobId()
	wait(running, tqv1.JobStatus_RUNNING)
	c := b.cancelTQ(running)
	require.True(t, c.GetAccepted())
	require.False(t, c.GetAlreadyTerminal())
	wait(running, tqv1.JobStatus_CANCELED)
	require.True(t, b.status(running).GetCancelRequested())
}

// A jq.v1 job asks for the synthetic handler by type; its timeout ends the work.
func TestSyntheticJobTimeout(t *testing.T) {
	b := setupTQ(t, engine.Options{ReaperInterval: 100 * time.Millisecond})
	mux := queue.NewMux()
	handlers.Register(mux, handlers.Options{})
	b.startWorker(mux)
	id := b.submit(&jqv1.JobSpec{Type: handlers.TypeSynthetic, MaxRetries: ptr(int32(0)), Timeout: durationpb.New(200 * time.Millisecond),
		Payload: handlers.SyntheticJobPayload(handlers.SyntheticPayload{WorkDurationMS: 60_000})})
	testenv.Eventually(t, 20*time.Second, func() error {
		if j := b.job(id); j.State != queue.StateDeadLettered {
			return fmt.Errorf("job %s is %s", id, j.State)
		}
		return nil
	})
	j := b.job(id)
	require.Equal(t, "timeout", j.FailureReason)
	require.Less(t, j.CompletedAt.Sub(j.StartedAt), 30*time.Second, "the timeout, not work_duration_ms, ended it")
}

// client_request_id: same key and spec → the original job; same key, another spec →
// FAILED_PRECONDITION; no key → a new job every time.
func TestTaskQueueIdempotency(t *testing.T) {
	b := setupTQ(t, idle)
	spec := func() *tqv1.JobSpec {
		return &tqv1.JobSpec{JobType: "t", WorkDurationMs: 7, PayloadSizeBytes: 3, Labels: map[string]string{"a": "1", "b": "2", "c": "3"}}
	}
	first := b.submitTQ(spec(), "req-1")
	again := b.submitTQ(spec(), "req-1")
	require.Equal(t, first.GetJobId(), again.GetJobId(), "same key, same spec: the original job_id")
	require.Equal(t, first.GetAcceptedAtMs(), again.GetAcceptedAtMs(), "and its acceptance time")

	// Status of the original job, whatever it became meanwhile.
	_, err := b.tq.CancelJob(b.ctx, connect.NewRequest(&tqv1.CancelJobRequest{JobId: first.GetJobId()}))
	require.NoError(t, err)
	require.Equal(t, tqv1.JobStatus_CANCELED, b.submitTQ(spec(), "req-1").GetInitialStatus())

	for name, change := range map[string]func(s *tqv1.JobSpec){
		"job_type":           func(s *tqv1.JobSpec) { s.JobType = "u" },
		"work_duration_ms":   func(s *tqv1.JobSpec) { s.WorkDurationMs++ },
		"payload_size_bytes": func(s *tqv1.JobSpec) { s.PayloadSizeBytes++ },
		"label value":        func(s *tqv1.JobSpec) { s.Labels["a"] = "9" },
		"label removed":      func(s *tqv1.JobSpec) { delete(s.Labels, "c") },
	} {
		s := spec()
		change(s)
		_, err := b.tq.SubmitJob(b.ctx, connect.NewRequest(&tqv1.SubmitJobRequest{Spec: s, ClientRequestId: "req-1"}))
		requireCode(t, connect.CodeFailedPrecondition, err, "same key, other "+name)
	}

	one, two := b.submitTQ(spec(), ""), b.submitTQ(spec(), "")
	require.NotEqual(t, one.GetJobId(), two.GetJobId(), "no key: not idempotent")
	require.NotEqual(t, first.GetJobId(), b.submitTQ(spec(), "req-2").GetJobId(), "another key: another job")
}

// ListJobs: the default (newest first) and ascending orders, paging, the status filter and the
// seed's page sizes.
func TestTaskQueueListJobs(t *testing.T) {
	b := setupTQ(t, idle)
	const n = 55
	ids := make([]string, n)
	for i := range ids {
		ids[i] = b.submitTQ(&tqv1.JobSpec{JobType: "t"}, "").GetJobId()
	}
	idsOf := func(js []*tqv1.JobSummary) []string {
		out := make([]string, len(js))
		for i, j := range js {
			out[i] = j.GetJobId()
		}
		return out
	}

	// page_size 0 means 50.
	res, err := b.tq.ListJobs(b.ctx, connect.NewRequest(&tqv1.ListJobsRequest{}))
	require.NoError(t, err)
	require.Len(t, res.Msg.GetJobs(), 50)
	require.NotEmpty(t, res.Msg.GetPage().GetNextPageToken())
	// More than 200 is clamped, not refused.
	res, err = b.tq.ListJobs(b.ctx, connect.NewRequest(&tqv1.ListJobsRequest{Page: &tqv1.PageRequest{PageSize: 5000}}))
	require.NoError(t, err)
	require.Len(t, res.Msg.GetJobs(), n)
	require.Empty(t, res.Msg.GetPage().GetNextPageToken(), "empty means end")

	for _, size := range []uint32{1, 7, n} {
		asc := b.listAll(&tqv1.ListJobsRequest{Sort: tqv1.JobSort_CREATED_AT_ASC, Page: &tqv1.PageRequest{PageSize: size}})
		require.Equal(t, ids, idsOf(asc), "CREATED_AT_ASC is submit order (page_size %d)", size)
		for i := 1; i < len(asc); i++ {
			a, c := asc[i-1], asc[i]
			require.True(t, a.GetCreatedAtMs() < c.GetCreatedAtMs() || a.GetCreatedAtMs() == c.GetCreatedAtMs(),
				"created_at_ms ascending")
		}
		desc := b.listAll(&tqv1.ListJobsRequest{Page: &tqv1.PageRequest{PageSize: size}})
		for i := range desc {
			require.Equal(t, ids[n-1-i], desc[i].GetJobId(), "the default is CREATED_AT_DESC")
		}
		require.Equal(t, idsOf(desc),
			idsOf(b.listAll(&tqv1.ListJobsRequest{Sort: tqv1.JobSort_CREATED_AT_DESC, Page: &tqv1.PageRequest{PageSize: size}})))
	}
	// "0" is the first page, as the seed's offset tokens start.
	res, err = b.tq.ListJobs(b.ctx, connect.NewRequest(&tqv1.ListJobsRequest{Sort: tqv1.JobSort_CREATED_AT_ASC,
		Page: &tqv1.PageRequest{PageSize: 2, PageToken: "0"}}))
	require.NoError(t, err)
	require.Equal(t, ids[:2], idsOf(res.Msg.GetJobs()))

	// One job of each status: ids[0] DONE, ids[1] CANCELED, ids[2] RUNNING, ids[3] FAILED; the rest QUEUED.
	w := b.register(4)
	b.finish(b.lease(w, b.job(ids[0]), true), true, nil)
	_, err = b.tq.CancelJob(b.ctx, connect.NewRequest(&tqv1.CancelJobRequest{JobId: ids[1]}))
	require.NoError(t, err)
	b.lease(w, b.job(ids[2]), true)
	b.fail(b.lease(w, b.job(ids[3]), true), "error", true)
	b.sweep()
	for status, want := range map[tqv1.JobStatus][]string{
		tqv1.JobStatus_DONE:     {ids[0]},
		tqv1.JobStatus_CANCELED: {ids[1]},
		tqv1.JobStatus_RUNNING:  {ids[2]},
		tqv1.JobStatus_FAILED:   {ids[3]},
		tqv1.JobStatus_QUEUED:   ids[4:],
	} {
		got := b.listAll(&tqv1.ListJobsRequest{StatusFilter: []tqv1.JobStatus{status}, Sort: tqv1.JobSort_CREATED_AT_ASC,
			Page: &tqv1.PageRequest{PageSize: 10}})
		require.Equal(t, want, idsOf(got), "status_filter %v", status)
		for _, j := range got {
			require.Equal(t, status, j.GetStatus())
			require.Equal(t, "t", j.GetJobType())
		}
	}
	got := b.listAll(&tqv1.ListJobsRequest{StatusFilter: []tqv1.JobStatus{tqv1.JobStatus_FAILED, tqv1.JobStatus_CANCELED,
		tqv1.JobStatus_DONE, tqv1.JobStatus_FAILED}, Sort: tqv1.JobSort_CREATED_AT_ASC})
	require.Equal(t, []string{ids[0], ids[1], ids[3]}, idsOf(got), "several statuses, repeats ignored")
	require.Len(t, b.listAll(&tqv1.ListJobsRequest{}), n, "no filter: every status")

	// A token is valid only for its own status_filter and sort.
	res, err = b.tq.ListJobs(b.ctx, connect.NewRequest(&tqv1.ListJobsRequest{Page: &tqv1.PageRequest{PageSize: 1}}))
	require.NoError(t, err)
	tok := res.Msg.GetPage().GetNextPageToken()
	_, err = b.tq.ListJobs(b.ctx, connect.NewRequest(&tqv1.ListJobsRequest{Sort: tqv1.JobSort_CREATED_AT_ASC, Page: &tqv1.PageRequest{PageToken: tok}}))
	requireCode(t, connect.CodeInvalidArgument, err, "a token of another sort")
	_, err = b.tq.ListJobs(b.ctx, connect.NewRequest(&tqv1.ListJobsRequest{StatusFilter: []tqv1.JobStatus{tqv1.JobStatus_QUEUED},
		Page: &tqv1.PageRequest{PageToken: tok}}))
	requireCode(t, connect.CodeInvalidArgument, err, "a token of another status_filter")
	_, err = b.tq.ListJobs(b.ctx, connect.NewRequest(&tqv1.ListJobsRequest{Sort: tqv1.JobSort_JOB_SORT_UNSPECIFIED,
		Page: &tqv1.PageRequest{PageToken: tok}}))
	require.NoError(t, err, "UNSPECIFIED is CREATED_AT_DESC, the same listing")
}

// Every code the seed names for the public RPCs, in its situations.
func TestTaskQueueErrors(t *testing.T) {
	b := setupTQ(t, idle)
	unknown := uuid.NewString()
	for _, id := range []string{unknown, ""} {
		code := connect.CodeNotFound
		if id == "" {
			code = connect.CodeInvalidArgument
		}
		_, err := b.tq.GetJobStatus(b.ctx, connect.NewRequest(&tqv1.GetJobStatusRequest{JobId: id}))
		requireCode(t, code, err, "GetJobStatus "+id)
		_, err = b.tq.GetJobResult(b.ctx, connect.NewRequest(&tqv1.GetJobResultRequest{JobId: id}))
		requireCode(t, code, err, "GetJobResult "+id)
		_, err = b.tq.CancelJob(b.ctx, connect.NewRequest(&tqv1.CancelJobRequest{JobId: id}))
		requireCode(t, code, err, "CancelJob "+id)
	}
	_, err := b.tq.GetJobStatus(b.ctx, connect.NewRequest(&tqv1.GetJobStatusRequest{JobId: "not-a-uuid"}))
	requireCode(t, connect.CodeInvalidArgument, err, "malformed job_id")

	for name, req := range map[string]*tqv1.SubmitJobRequest{
		"no spec":        {},
		"no job_type":    {Spec: &tqv1.JobSpec{}},
		"bad job_type":   {Spec: &tqv1.JobSpec{JobType: "has space"}},
		"bad label":      {Spec: &tqv1.JobSpec{JobType: "t", Labels: map[string]string{"": "v"}}},
		"reserved label": {Spec: &tqv1.JobSpec{JobType: "t", Labels: map[string]string{"taskqueue.job_type": "u"}}},
		"key too long":   {Spec: &tqv1.JobSpec{JobType: "t"}, ClientRequestId: strings.Repeat("k", 300)},
		"key with ctrls": {Spec: &tqv1.JobSpec{JobType: "t"}, ClientRequestId: "a\nb"},
	} {
		_, err := b.tq.SubmitJob(b.ctx, connect.NewRequest(req))
		requireCode(t, connect.CodeInvalidArgument, err, "SubmitJob "+name)
	}

	for name, req := range map[string]*tqv1.ListJobsRequest{
		"malformed token":    {Page: &tqv1.PageRequest{PageToken: "garbage!"}},
		"an offset":          {Page: &tqv1.PageRequest{PageToken: "50"}},
		"negative offset":    {Page: &tqv1.PageRequest{PageToken: "-1"}},
		"unspecified status": {StatusFilter: []tqv1.JobStatus{tqv1.JobStatus_JOB_STATUS_UNSPECIFIED}},
		"unknown status":     {StatusFilter: []tqv1.JobStatus{42}},
		"unknown sort":       {Sort: 9},
	} {
		_, err := b.tq.ListJobs(b.ctx, connect.NewRequest(req))
		requireCode(t, connect.CodeInvalidArgument, err, "ListJobs "+name)
	}

	// A DONE job whose output jq was not asked to keep (submitted through jq.v1).
	j := b.insert(store.JobInsertParams{})
	w := b.register(1)
	b.finish(b.lease(w, j, true), true, []byte("x"))
	_, err = b.tq.GetJobResult(b.ctx, connect.NewRequest(&tqv1.GetJobResultRequest{JobId: j.ID}))
	requireCode(t, connect.CodeFailedPrecondition, err, "output not retained")
	require.Equal(t, tqv1.JobStatus_DONE, b.status(j.ID).GetStatus())
}
