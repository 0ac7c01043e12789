package apiserver_test

// Tracing end to end, in process, over the real Postgres and Redis: a
// submitter's client, the API with its engine, and a worker's executor, each
// with its own tracer provider writing to one in-memory exporter. A job's
// execution spans — one per attempt — must land in the trace of the submit
// span that created it.

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"connectrpc.com/connect"
	"github.com/google/uuid"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"
	"go.uber.org/zap"
	"go.uber.org/zap/zaptest/observer"

	jqv1 "github.com/jq-dev/jq/api/gen/jq/v1"
	"github.com/jq-dev/jq/api/rpcclient"
	"github.com/jq-dev/jq/api/server"
	"github.com/jq-dev/jq/api/workerconn"
	"github.com/jq-dev/jq/config"
	"github.com/jq-dev/jq/internal/buildinfo"
	"github.com/jq-dev/jq/internal/jobtrace"
	"github.com/jq-dev/jq/internal/testenv/stores"
	"github.com/jq-dev/jq/queue"
	"github.com/jq-dev/jq/queue/engine"
	"github.com/jq-dev/jq/queue/executor"
	"github.com/jq-dev/jq/roles/telemetry"
	"github.com/jq-dev/jq/store"
)

type tracedCluster struct {
	t         *testing.T
	ctx       context.Context
	exp       *tracetest.InMemoryExporter
	submitter trace.Tracer
	cl        *rpcclient.Client // the submitter's, traced
	plain     *rpcclient.Client // an untraced client
	queue     string
	workerID  string
	done      chan executor.JobDone
	logs      *observer.ObservedLogs

	mu          sync.Mutex
	handlerSpan map[string][]trace.SpanContext // job id → span context the handler saw, per attempt
}

func newTracing(t *testing.T, exp *tracetest.InMemoryExporter, service string) *telemetry.Tracing {
	t.Helper()
	tr, err := telemetry.NewTracing(context.Background(), telemetry.TracingOptions{
		Config:   config.Tracing{Enabled: true, Protocol: "grpc", SampleRatio: 1},
		Service:  service,
		Exporter: exp,
	})
	require.NoError(t, err)
	return tr
}

// setupTraced runs an engine, the API and one worker, all traced. The queue
// retries after 10 ms; its "flaky" jobs fail their first attempt.
func setupTraced(t *testing.T) *tracedCluster {
	t.Helper()
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	t.Cleanup(cancel)
	exp := tracetest.NewInMemoryExporter()
	subTr, srvTr, wrkTr := newTracing(t, exp, "submitter"), newTracing(t, exp, "jq-server"), newTracing(t, exp, "jq-worker")

	st := stores.Postgres(ctx, t, 8)
	disp := stores.Dispatcher(ctx, t)
	q, err := st.QueueCreate(ctx, store.QueueCreateParams{
		Name: "trace-" + uuid.NewString()[:8], BackoffBase: 10 * time.Millisecond, BackoffMax: 10 * time.Millisecond,
	})
	require.NoError(t, err)

	eng, err := engine.New(engine.Options{
		Store: st, Dispatcher: disp, Notifier: st, Log: zap.NewNop(), Tracer: srvTr.Tracer(),
		SchedulerInterval: 50 * time.Millisecond, ReaperInterval: 50 * time.Millisecond,
	})
	require.NoError(t, err)
	engCtx, stopEngine := context.WithCancel(context.Background())
	engDone := make(chan struct{})
	go func() { _ = eng.Run(engCtx); close(engDone) }()

	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	p := new(http.Protocols)
	p.SetHTTP1(true)
	p.SetUnencryptedHTTP2(true)
	srv := &http.Server{Handler: apiserver.New(apiserver.Options{
		Store: st, Engine: eng, Log: zap.NewNop(), Version: buildinfo.Get(),
		Limits:  apiserver.Limits{MaxPayloadBytes: 1 << 20},
		Workers: apiserver.WorkerTiming{HeartbeatInterval: time.Second, HeartbeatTimeout: 10 * time.Second},
		Tracing: apiserver.Tracing{Provider: srvTr.Provider, Propagator: srvTr.Propagator},
	}), Protocols: p, ReadHeaderTimeout: 5 * time.Second}
	served := make(chan struct{})
	go func() { _ = srv.Serve(ln); close(served) }()

	newClient := func(tr *telemetry.Tracing) *rpcclient.Client {
		o := rpcclient.Options{Addr: ln.Addr().String()}
		if tr != nil {
			o.TracerProvider, o.Propagator = tr.Provider, tr.Propagator
		}
		cl, err := rpcclient.New(o)
		require.NoError(t, err)
		return cl
	}
	c := &tracedCluster{
		t: t, ctx: ctx, exp: exp, submitter: subTr.Provider.Tracer("submitter"),
		cl: newClient(subTr), plain: newClient(nil), queue: q.Name, workerID: "w-" + uuid.NewString()[:12],
		done: make(chan executor.JobDone, 64), handlerSpan: map[string][]trace.SpanContext{},
	}
	core, logs := observer.New(zap.DebugLevel)
	c.logs = logs

	mux := queue.NewMux()
	handle := func(ctx context.Context, j *queue.Job) ([]byte, error) {
		c.mu.Lock()
		c.handlerSpan[j.ID] = append(c.handlerSpan[j.ID], trace.SpanContextFromContext(ctx))
		c.mu.Unlock()
		if j.Type == "flaky" && j.Attempt == 1 {
			return nil, errors.New("transient failure")
		}
		return []byte("ok"), nil
	}
	mux.RegisterFunc("flaky", handle)
	mux.RegisterFunc("steady", handle)
	workerCl := newClient(wrkTr)
	ex, err := executor.New(executor.Options{
		Conn: workerconn.New(workerCl), Handler: mux, WorkerID: c.workerID, Hostname: "test", Concurrency: 2,
		Queues: []string{q.Name}, Logger: zap.New(core), ShutdownGrace: 5 * time.Second,
		Tracer: wrkTr.Tracer(), OnJobDone: func(d executor.JobDone) { c.done <- d },
	})
	require.NoError(t, err)
	exCtx, stopWorker := context.WithCancel(context.Background())
	exDone := make(chan struct{})
	go func() { _ = ex.Run(exCtx); close(exDone) }()

	t.Cleanup(func() {
		stopWorker()
		<-exDone
		workerCl.Close()
		c.cl.Close()
		c.plain.Close()
		eng.CloseSessions()
		sctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_ = srv.Shutdown(sctx)
		<-served
		stopEngine()
		<-engDone
		for _, tr := range []*telemetry.Tracing{subTr, srvTr, wrkTr} {
			require.NoError(t, tr.ShutdownWithTimeout(context.Background()))
		}
	})
	return c
}

// submit submits one job through cl and returns its id.
func (c *tracedCluster) submit(ctx context.Context, cl *rpcclient.Client, spec *jqv1.JobSpec) string {
	c.t.Helper()
	spec.Queue = c.queue
	res, err := cl.Jobs.SubmitJob(ctx, connect.NewRequest(&jqv1.SubmitJobRequest{Job: spec}))
	require.NoError(c.t, err)
	return res.Msg.GetJobId()
}

// waitAttempts waits until n handlers of job id returned (their spans have
// ended by then: the executor ends the span before OnJobDone).
func (c *tracedCluster) waitAttempts(id string, n int) []executor.JobDone {
	c.t.Helper()
	var out []executor.JobDone
	timeout := time.After(30 * time.Second)
	for len(out) < n {
		select {
		case d := <-c.done:
			if d.Job.ID == id {
				out = append(out, d)
			} else {
				c.done <- d // another subtest's; hand it back
			}
		case <-timeout:
			c.t.Fatalf("job %s: %d of %d attempts finished", id, len(out), n)
		}
	}
	return out
}

// jobSpans are the exported spans of one job by name, in end order.
func (c *tracedCluster) jobSpans(id string) map[string][]tracetest.SpanStub {
	out := map[string][]tracetest.SpanStub{}
	for _, s := range c.exp.GetSpans() {
		for _, a := range s.Attributes {
			if a.Key == jobtrace.AttrJobID && a.Value.AsString() == id {
				out[s.Name] = append(out[s.Name], s)
			}
		}
	}
	return out
}

func (c *tracedCluster) spanByID(id trace.SpanID) tracetest.SpanStub {
	c.t.Helper()
	for _, s := range c.exp.GetSpans() {
		if s.SpanContext.SpanID() == id {
			return s
		}
	}
	c.t.Fatalf("no span %s exported", id)
	return tracetest.SpanStub{}
}

func attr(s tracetest.SpanStub, key string) string {
	for _, a := range s.Attributes {
		if string(a.Key) == key {
			return a.Value.String()
		}
	}
	return ""
}

// requireContinues checks that the job's assignment and execution spans, one
// per attempt, are children of its submit span (the stored context), in
// parent's trace.
func (c *tracedCluster) requireContinues(id string, parent trace.SpanContext, attempts int) map[string][]tracetest.SpanStub {
	t := c.t
	t.Helper()
	spans := c.jobSpans(id)
	for _, name := range []string{jobtrace.SpanAssign, jobtrace.SpanExecute} {
		require.Len(t, spans[name], attempts, "%s spans of job %s", name, id)
		for i, s := range spans[name] {
			require.Equal(t, parent.TraceID(), s.SpanContext.TraceID(), "%s of attempt %d is in the submitter's trace", name, i+1)
			require.Equal(t, parent.SpanID(), s.Parent.SpanID(), "%s of attempt %d continues the stored context", name, i+1)
			require.True(t, s.Parent.IsRemote(), "the stored context is a remote parent")
			require.Equal(t, fmt.Sprint(i+1), attr(s, "jq.attempt"))
			require.Equal(t, c.queue, attr(s, "jq.queue"))
			require.Equal(t, c.workerID, attr(s, "jq.worker_id"))
			require.NotEmpty(t, attr(s, "jq.job_type"))
		}
	}
	for i, s := range spans[jobtrace.SpanExecute] {
		require.Equal(t, trace.SpanKindConsumer, s.SpanKind)
		require.Equal(t, "jq-worker", resourceService(s))
		c.mu.Lock()
		seen := c.handlerSpan[id][i]
		c.mu.Unlock()
		require.Equal(t, s.SpanContext.SpanID(), seen.SpanID(), "the handler runs inside its execution span")
	}
	for _, s := range spans[jobtrace.SpanAssign] {
		require.Equal(t, "jq-server", resourceService(s))
	}
	return spans
}

func resourceService(s tracetest.SpanStub) string {
	for _, kv := range s.Resource.Attributes() {
		if kv.Key == "service.name" {
			return kv.Value.AsString()
		}
	}
	return ""
}

func TestTracingFollowsJobFromSubmitToExecution(t *testing.T) {
	c := setupTraced(t)

	t.Run("SubmitterTraceAcrossRetry", func(t *testing.T) {
		ctx, root := c.submitter.Start(c.ctx, "submitter")
		id := c.submit(ctx, c.cl, &jqv1.JobSpec{Type: "flaky", Payload: []byte("secret-payload")})
		root.End()
		done := c.waitAttempts(id, 2)
		require.Equal(t, executor.OutcomeFailed, done[0].Outcome)
		require.Equal(t, executor.OutcomeSucceeded, done[1].Outcome)

		spans := c.jobSpans(id)
		require.Len(t, spans[jobtrace.SpanSubmit], 1)
		submit := spans[jobtrace.SpanSubmit][0]
		require.Equal(t, root.SpanContext().TraceID(), submit.SpanContext.TraceID(), "the submit span is in the submitter's trace")
		// submitter → client RPC span → server RPC span → submit span.
		srvRPC := c.spanByID(submit.Parent.SpanID())
		require.Equal(t, trace.SpanKindServer, srvRPC.SpanKind)
		require.Contains(t, srvRPC.Name, "SubmitJob")
		require.Equal(t, "jq-server", resourceService(srvRPC))
		cliRPC := c.spanByID(srvRPC.Parent.SpanID())
		require.Equal(t, trace.SpanKindClient, cliRPC.SpanKind)
		require.Equal(t, root.SpanContext().SpanID(), cliRPC.Parent.SpanID())

		spans = c.requireContinues(id, submit.SpanContext, 2)
		exec := spans[jobtrace.SpanExecute]
		require.Equal(t, codes.Error, exec[0].Status.Code, "the failed attempt's span records the failure")
		require.Equal(t, "error", exec[0].Status.Description)
		require.Equal(t, "failed", attr(exec[0], "jq.outcome"))
		require.NotEqual(t, codes.Error, exec[1].Status.Code)
		require.Equal(t, "succeeded", attr(exec[1], "jq.outcome"))
		require.NotEqual(t, exec[0].SpanContext.SpanID(), exec[1].SpanContext.SpanID())

		for _, s := range c.exp.GetSpans() {
			for _, a := range s.Attributes {
				require.NotContains(t, a.Value.String(), "secret-payload", "no payload on any span")
			}
		}

		// FR-041: the worker's lines about the job carry its trace id.
		lines := c.logs.FilterField(zap.String("job_id", id)).All()
		require.NotEmpty(t, lines)
		for _, l := range lines {
			require.Equal(t, root.SpanContext().TraceID().String(), l.ContextMap()["trace_id"], "log line %q", l.Message)
		}
		require.NotEmpty(t, c.logs.FilterMessage("job failed").FilterField(zap.String("job_id", id)).All())
	})

	t.Run("ServerStartsTheTraceWithoutASubmitter", func(t *testing.T) {
		id := c.submit(c.ctx, c.plain, &jqv1.JobSpec{Type: "steady"})
		c.waitAttempts(id, 1)
		submit := c.jobSpans(id)[jobtrace.SpanSubmit]
		require.Len(t, submit, 1)
		srvRPC := c.spanByID(submit[0].Parent.SpanID())
		require.Equal(t, trace.SpanKindServer, srvRPC.SpanKind)
		require.False(t, srvRPC.Parent.IsValid(), "no caller trace: the server's RPC span is the root")
		c.requireContinues(id, submit[0].SpanContext, 1)
	})

	t.Run("ExplicitTraceContextWins", func(t *testing.T) {
		const traceID, spanID = "4bf92f3577b34da6a3ce929d0e0e4736", "00f067aa0ba902b7"
		id := c.submit(c.ctx, c.plain, &jqv1.JobSpec{Type: "steady", TraceContext: map[string]string{
			"traceparent": "00-" + traceID + "-" + spanID + "-01",
		}})
		c.waitAttempts(id, 1)
		tid, err := trace.TraceIDFromHex(traceID)
		require.NoError(t, err)
		sid, err := trace.SpanIDFromHex(spanID)
		require.NoError(t, err)
		parent := trace.NewSpanContext(trace.SpanContextConfig{TraceID: tid, SpanID: sid, TraceFlags: trace.FlagsSampled, Remote: true})
		c.requireContinues(id, parent, 1)
		require.NotEqual(t, tid, c.jobSpans(id)[jobtrace.SpanSubmit][0].SpanContext.TraceID(),
			"the submit RPC has its own trace; the job follows the context its submitter chose")
	})

	t.Run("LargeTracestateKeepsTraceparent", func(t *testing.T) {
		// 32 members of 52 bytes: a valid tracestate far above the job's 512-byte value limit. The
		// server keeps the job's traceparent and drops the rest rather than failing the submit.
		members := make([]string, 32)
		for i := range members {
			members[i] = fmt.Sprintf("vendor%02d=%s", i, strings.Repeat("v", 43))
		}
		req := connect.NewRequest(&jqv1.SubmitJobRequest{Job: &jqv1.JobSpec{Queue: c.queue, Type: "steady"}})
		req.Header().Set("traceparent", "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01")
		req.Header().Set("tracestate", strings.Join(members, ","))
		res, err := c.plain.Jobs.SubmitJob(c.ctx, req)
		require.NoError(t, err)
		c.waitAttempts(res.Msg.GetJobId(), 1)
		got, err := c.plain.Jobs.GetJob(c.ctx, connect.NewRequest(&jqv1.GetJobRequest{JobId: res.Msg.GetJobId()}))
		require.NoError(t, err)
		tc := got.Msg.GetJob().GetTraceContext()
		require.Len(t, tc, 1)
		require.Contains(t, tc["traceparent"], "4bf92f3577b34da6a3ce929d0e0e4736", "the job continues the caller's trace")
	})
}
