package e2e

// End-to-end tests of the core loop with the real binary: a server process and
// worker processes against the real Postgres and Redis, driven through the API.

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"connectrpc.com/connect"
	"github.com/stretchr/testify/require"
	"google.golang.org/protobuf/types/known/timestamppb"

	jqv1 "github.com/jq-dev/jq/api/gen/jq/v1"
	"github.com/jq-dev/jq/api/rpcclient"
	"github.com/jq-dev/jq/internal/testenv"
	"github.com/jq-dev/jq/test/internal/jqbin"
)

// cluster is one server process (more can be added) on a fresh database and
// a fresh Redis key prefix.
type cluster struct {
	t       *testing.T
	dsn     string
	prefix  string
	servers []jqbin.ServerEnv
	procs   []*jqbin.Process // the server processes, in start order
	client  *rpcclient.Client
}

func newCluster(t *testing.T) *cluster {
	t.Helper()
	_, prefix := testenv.NewRedis(t)
	return &cluster{t: t, dsn: testenv.NewDatabase(t), prefix: prefix}
}

// startServer starts one more server replica and waits until it serves.
func (c *cluster) startServer(extraEnv ...string) jqbin.ServerEnv {
	c.t.Helper()
	se := jqbin.NewServerEnv(c.t, c.dsn)
	se.Env = append(se.Env, "JQ_REDIS_KEY_PREFIX="+c.prefix, "JQ_SCHEDULER_INTERVAL_MS=100")
	se.Env = append(se.Env, extraEnv...)
	p := jqbin.Start(c.t, se.Env, "--role=server")
	p.WaitLog(c.t, "server started")
	c.servers = append(c.servers, se)
	c.procs = append(c.procs, p)
	if c.client == nil {
		cl, err := rpcclient.New(rpcclient.Options{Addr: se.Addr()})
		require.NoError(c.t, err)
		c.t.Cleanup(cl.Close)
		c.client = cl
	}
	return se
}

// startWorker starts a worker process against server i.
func (c *cluster) startWorker(i int, id string, concurrency int, queues string) *jqbin.Process {
	c.t.Helper()
	env := []string{
		"JQ_WORKER_HEALTH_PORT=" + strconv.Itoa(jqbin.FreePort(c.t)),
		"JQ_WORKER_METRICS_PORT=" + strconv.Itoa(jqbin.FreePort(c.t)),
	}
	return jqbin.Start(c.t, env, "--role=worker", "--server-addr", c.servers[i].Addr(), "--worker-id", id,
		"--concurrency", strconv.Itoa(concurrency), "--queues", queues)
}

func (c *cluster) ctx() context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	c.t.Cleanup(cancel)
	return ctx
}

func (c *cluster) submit(ctx context.Context, spec *jqv1.JobSpec) string {
	c.t.Helper()
	resp, err := c.client.Jobs.SubmitJob(ctx, connect.NewRequest(&jqv1.SubmitJobRequest{Job: spec}))
	require.NoError(c.t, err)
	return resp.Msg.GetJobId()
}

func (c *cluster) job(ctx context.Context, id string) *jqv1.Job {
	c.t.Helper()
	resp, err := c.client.Jobs.GetJob(ctx, connect.NewRequest(&jqv1.GetJobRequest{JobId: id}))
	require.NoError(c.t, err)
	return resp.Msg.GetJob()
}

func (c *cluster) waitState(ctx context.Context, id string, want jqv1.JobState) *jqv1.Job {
	c.t.Helper()
	var j *jqv1.Job
	testenv.Eventually(c.t, time.Minute, func() error {
		j = c.job(ctx, id)
		if j.GetState() != want {
			return fmt.Errorf("job %s is %v, want %v", id, j.GetState(), want)
		}
		return nil
	})
	return j
}

func TestJobLifecycleEvents(t *testing.T) {
	t.Parallel()
	c := newCluster(t)
	c.startServer()
	ctx := c.ctx()
	c.startWorker(0, "w-lifecycle", 2, "default")

	id := c.submit(ctx, &jqv1.JobSpec{Queue: "default", Type: "sleep", Payload: []byte(`{"ms":20}`), KeepResult: true})
	j := c.waitState(ctx, id, jqv1.JobState_JOB_STATE_DONE)
	require.Equal(t, "w-lifecycle", j.GetWorkerId())
	require.EqualValues(t, 1, j.GetAttempt())
	require.JSONEq(t, `{"slept_ms":20}`, string(j.GetResult().GetData()))
	require.Len(t, j.GetResult().GetChecksumSha256(), 64)

	evs, err := c.client.Jobs.ListJobEvents(ctx, connect.NewRequest(&jqv1.ListJobEventsRequest{JobId: id}))
	require.NoError(t, err)
	var path []string
	var last time.Time
	for i, e := range evs.Msg.GetEvents() {
		require.EqualValues(t, i+1, e.GetSeq())
		path = append(path, e.GetFromState().String()+"->"+e.GetToState().String())
		at := e.GetTimestamp().AsTime()
		require.False(t, at.Before(last), "event timestamps go backwards")
		last = at
	}
	require.Equal(t, []string{
		"JOB_STATE_UNSPECIFIED->JOB_STATE_PENDING",
		"JOB_STATE_PENDING->JOB_STATE_ASSIGNED",
		"JOB_STATE_ASSIGNED->JOB_STATE_RUNNING",
		"JOB_STATE_RUNNING->JOB_STATE_DONE",
	}, path)
	require.Equal(t, "w-lifecycle", evs.Msg.GetEvents()[1].GetWorkerId())
}

// With no worker running, jobs of mixed priorities wait; one worker with
// concurrency 1 then runs them priority 9 first, FIFO within a priority, and
// a job whose run_at is in the future does not start before it.
func TestDispatchOrder(t *testing.T) {
	t.Parallel()
	c := newCluster(t)
	c.startServer()
	ctx := c.ctx()

	type sub struct {
		id   string
		prio int32
		seq  int
	}
	var subs []sub
	prios := []int32{0, 5, 9, 5, 0, 9, 1, 5, 9, 0, 3, 7}
	for i, p := range prios {
		id := c.submit(ctx, &jqv1.JobSpec{Queue: "default", Type: "noop", Priority: p})
		subs = append(subs, sub{id: id, prio: p, seq: i})
	}
	runAt := time.Now().Add(1500 * time.Millisecond)
	delayed := c.submit(ctx, &jqv1.JobSpec{Queue: "default", Type: "noop", Priority: 9, RunAt: timestamppb.New(runAt)})

	c.startWorker(0, "w-order", 1, "default")
	for _, s := range subs {
		c.waitState(ctx, s.id, jqv1.JobState_JOB_STATE_DONE)
	}
	want := slices.Clone(subs)
	slices.SortStableFunc(want, func(a, b sub) int { return int(b.prio - a.prio) })
	// One slot: the worker claims its next job only when the previous one has been reported, so
	// the claims (the PENDING→ASSIGNED events, one statement each, stamped with its start) follow
	// the dispatch order. (The handlers' own start and end times, which a report carries as
	// durations, are exact to within the calls' latency: two sub-millisecond jobs can swap there.)
	claimed := map[string]time.Time{}
	for _, s := range subs {
		evs, err := c.client.Jobs.ListJobEvents(ctx, connect.NewRequest(&jqv1.ListJobEventsRequest{JobId: s.id}))
		require.NoError(t, err)
		require.GreaterOrEqual(t, len(evs.Msg.GetEvents()), 2)
		e := evs.Msg.GetEvents()[1]
		require.Equal(t, jqv1.JobState_JOB_STATE_ASSIGNED, e.GetToState())
		claimed[s.id] = e.GetTimestamp().AsTime()
	}
	claims := map[time.Time]bool{}
	for i, before := range want {
		claims[claimed[before.id]] = true
		for _, after := range want[i+1:] {
			require.False(t, claimed[after.id].Before(claimed[before.id]),
				"dispatch order must be priority desc, then FIFO: %+v claimed before %+v", after, before)
		}
	}
	t.Logf("%d jobs in %d claims", len(want), len(claims))

	d := c.waitState(ctx, delayed, jqv1.JobState_JOB_STATE_DONE)
	require.False(t, d.GetStartedAt().AsTime().Before(runAt), "a job ran before its run_at")
}

func TestIdempotentSubmit(t *testing.T) {
	t.Parallel()
	c := newCluster(t)
	c.startServer()
	ctx := c.ctx()
	spec := func(payload string) *jqv1.JobSpec {
		return &jqv1.JobSpec{Queue: "default", Type: "noop", Payload: []byte(payload), IdempotencyKey: "order-42"}
	}
	ids := make([]string, 50)
	var wg sync.WaitGroup
	for i := range ids {
		wg.Go(func() {
			resp, err := c.client.Jobs.SubmitJob(ctx, connect.NewRequest(&jqv1.SubmitJobRequest{Job: spec(`{"n":1}`)}))
			if err == nil {
				ids[i] = resp.Msg.GetJobId()
			}
		})
	}
	wg.Wait()
	for _, id := range ids {
		require.NotEmpty(t, id)
		require.Equal(t, ids[0], id, "one key, one job")
	}
	list, err := c.client.Jobs.ListJobs(ctx, connect.NewRequest(&jqv1.ListJobsRequest{Queue: "default"}))
	require.NoError(t, err)
	require.Len(t, list.Msg.GetJobs(), 1)

	_, err = c.client.Jobs.SubmitJob(ctx, connect.NewRequest(&jqv1.SubmitJobRequest{Job: spec(`{"n":2}`)}))
	require.Equal(t, connect.CodeFailedPrecondition, connect.CodeOf(err), "%v", err)
}

// A report carrying an attempt that is not the job's current one is refused
// and changes nothing; the fencing token is what makes a late worker harmless.
func TestStaleReportRejected(t *testing.T) {
	t.Parallel()
	c := newCluster(t)
	c.startServer()
	ctx := c.ctx()
	w := c.client.Workers
	_, err := w.RegisterWorker(ctx, connect.NewRequest(&jqv1.RegisterWorkerRequest{WorkerId: "w-fence", Hostname: "test", Concurrency: 1, Queues: []string{"default"}}))
	require.NoError(t, err)
	id := c.submit(ctx, &jqv1.JobSpec{Queue: "default", Type: "noop"})

	sctx, cancel := context.WithCancel(ctx)
	defer cancel()
	stream, err := w.StreamJobs(sctx, connect.NewRequest(&jqv1.StreamJobsRequest{WorkerId: "w-fence", Capacity: 1}))
	require.NoError(t, err)
	var a *jqv1.Assignment
	for a == nil { // the first message is an empty keepalive
		require.True(t, stream.Receive(), "%v", stream.Err())
		a = stream.Msg().GetAssignment()
	}
	require.Equal(t, id, a.GetJob().GetId())
	require.EqualValues(t, 1, a.GetAttempt())

	before, err := c.client.Jobs.ListJobEvents(ctx, connect.NewRequest(&jqv1.ListJobEventsRequest{JobId: id}))
	require.NoError(t, err)
	for _, attempt := range []int32{2, 7} { // not the current attempt (1)
		rep, err := w.ReportJobs(ctx, connect.NewRequest(&jqv1.ReportJobsRequest{WorkerId: "w-fence", Reports: []*jqv1.JobReport{{
			JobId: id, Attempt: attempt, Outcome: &jqv1.JobReport_Success{Success: &jqv1.JobSuccess{Result: []byte("late")}},
		}}}))
		require.NoError(t, err)
		require.False(t, rep.Msg.GetResults()[0].GetOk())
		require.Contains(t, rep.Msg.GetResults()[0].GetError(), "stale")
	}
	// Another worker's report for the right attempt is refused too: NOT_FOUND while that worker is
	// not registered, a stale lease once it is.
	other := &jqv1.ReportJobsRequest{WorkerId: "w-other", Reports: []*jqv1.JobReport{{
		JobId: id, Attempt: 1, Outcome: &jqv1.JobReport_Success{Success: &jqv1.JobSuccess{}},
	}}}
	_, err = w.ReportJobs(ctx, connect.NewRequest(other))
	require.Equal(t, connect.CodeNotFound, connect.CodeOf(err), "%v", err)
	_, err = w.RegisterWorker(ctx, connect.NewRequest(&jqv1.RegisterWorkerRequest{WorkerId: "w-other", Hostname: "test", Concurrency: 1, Queues: []string{"default"}}))
	require.NoError(t, err)
	rep, err := w.ReportJobs(ctx, connect.NewRequest(other))
	require.NoError(t, err)
	require.False(t, rep.Msg.GetResults()[0].GetOk())

	j := c.job(ctx, id)
	require.Equal(t, jqv1.JobState_JOB_STATE_ASSIGNED, j.GetState())
	require.Nil(t, j.GetResult())
	after, err := c.client.Jobs.ListJobEvents(ctx, connect.NewRequest(&jqv1.ListJobEventsRequest{JobId: id}))
	require.NoError(t, err)
	require.Len(t, after.Msg.GetEvents(), len(before.Msg.GetEvents()), "a refused report writes no event")

	// The current attempt's report is accepted (and implies the ack).
	rep, err = w.ReportJobs(ctx, connect.NewRequest(&jqv1.ReportJobsRequest{WorkerId: "w-fence", Reports: []*jqv1.JobReport{{
		JobId: id, Attempt: 1, Outcome: &jqv1.JobReport_Success{Success: &jqv1.JobSuccess{Result: []byte(`"ok"`)}},
	}}}))
	require.NoError(t, err)
	require.True(t, rep.Msg.GetResults()[0].GetOk(), rep.Msg.GetResults()[0].GetError())
	require.Equal(t, jqv1.JobState_JOB_STATE_DONE, c.job(ctx, id).GetState())
}

func TestSubmitValidation(t *testing.T) {
	t.Parallel()
	c := newCluster(t)
	c.startServer("JQ_SERVER_MAX_PAYLOAD_BYTES=1024", "JQ_SERVER_MAX_RESULT_BYTES=1024", "JQ_GRPC_MAX_MESSAGE_BYTES=65536")
	ctx := c.ctx()
	cases := map[string]*jqv1.JobSpec{
		"queue name":   {Queue: "Bad Queue", Type: "noop"},
		"type":         {Queue: "default"},
		"priority":     {Queue: "default", Type: "noop", Priority: 10},
		"payload size": {Queue: "default", Type: "noop", Payload: make([]byte, 1025)},
		"max_retries":  {Queue: "default", Type: "noop", MaxRetries: ptr[int32](-1)},
		"NUL in type":  {Queue: "default", Type: "no\x00op"},
		"NUL in label": {Queue: "default", Type: "noop", Labels: map[string]string{"k": "v\x00"}},
	}
	for name, spec := range cases {
		_, err := c.client.Jobs.SubmitJob(ctx, connect.NewRequest(&jqv1.SubmitJobRequest{Job: spec}))
		require.Equal(t, connect.CodeInvalidArgument, connect.CodeOf(err), "%s: %v", name, err)
	}
	_, err := c.client.Jobs.SubmitJob(ctx, connect.NewRequest(&jqv1.SubmitJobRequest{Job: &jqv1.JobSpec{Queue: "nope", Type: "noop"}}))
	require.Equal(t, connect.CodeNotFound, connect.CodeOf(err))
	require.Contains(t, err.Error(), "nope")
	// A bad item fails the whole batch and nothing is written.
	_, err = c.client.Jobs.SubmitJobs(ctx, connect.NewRequest(&jqv1.SubmitJobsRequest{Jobs: []*jqv1.JobSpec{
		{Queue: "default", Type: "noop"}, {Queue: "default", Type: "noop", Priority: 42},
	}}))
	require.Equal(t, connect.CodeInvalidArgument, connect.CodeOf(err))
	require.Contains(t, err.Error(), "jobs[1]")
	// grpc.max_message_bytes bounds every request.
	_, err = c.client.Jobs.SubmitJob(ctx, connect.NewRequest(&jqv1.SubmitJobRequest{Job: &jqv1.JobSpec{
		Queue: "default", Type: "noop", Labels: map[string]string{"big": strings.Repeat("x", 70000)},
	}}))
	require.Equal(t, connect.CodeResourceExhausted, connect.CodeOf(err), "%v", err)
	list, err := c.client.Jobs.ListJobs(ctx, connect.NewRequest(&jqv1.ListJobsRequest{Queue: "default"}))
	require.NoError(t, err)
	require.Empty(t, list.Msg.GetJobs())
}

func ptr[T any](v T) *T { return &v }

// Two server processes and four worker processes (the in-process variant in
// queue/engine counts handler executions of 20,000 jobs; this one proves the
// same wiring across real processes): every job DONE with exactly one
// assignment, and nothing taken from a queue no worker serves.
func TestTwoServerProcessesFourWorkerProcesses(t *testing.T) {
	t.Parallel()
	c := newCluster(t)
	c.startServer()
	c.startServer()
	ctx := c.ctx()
	for _, q := range []string{"alpha", "beta", "gamma"} {
		_, err := c.client.Queues.CreateQueue(ctx, connect.NewRequest(&jqv1.CreateQueueRequest{Name: q}))
		require.NoError(t, err)
	}
	c.startWorker(0, "p-w1", 4, "alpha")
	c.startWorker(0, "p-w2", 8, "alpha,beta")
	c.startWorker(1, "p-w3", 2, "beta")
	c.startWorker(1, "p-w4", 16, "alpha,beta")

	const perQueue = 1000
	for _, q := range []string{"alpha", "beta"} {
		for off := 0; off < perQueue; off += 250 {
			specs := make([]*jqv1.JobSpec, 250)
			for k := range specs {
				specs[k] = &jqv1.JobSpec{Queue: q, Type: "noop", Priority: int32(k % 10)}
			}
			_, err := c.client.Jobs.SubmitJobs(ctx, connect.NewRequest(&jqv1.SubmitJobsRequest{Jobs: specs}))
			require.NoError(t, err)
		}
	}
	gamma := c.submit(ctx, &jqv1.JobSpec{Queue: "gamma", Type: "noop"})

	testenv.Eventually(t, 2*time.Minute, func() error {
		for _, q := range []string{"alpha", "beta"} {
			st, err := c.client.Queues.GetQueueStats(ctx, connect.NewRequest(&jqv1.GetQueueStatsRequest{Name: q}))
			if err != nil {
				return err
			}
			if st.Msg.GetStats().GetDone() != perQueue {
				return fmt.Errorf("queue %s: %d of %d DONE", q, st.Msg.GetStats().GetDone(), perQueue)
			}
		}
		return nil
	})
	workersSeen := map[string]bool{}
	for _, q := range []string{"alpha", "beta"} {
		token := ""
		for {
			page, err := c.client.Jobs.ListJobs(ctx, connect.NewRequest(&jqv1.ListJobsRequest{Queue: q, PageSize: 1000, PageToken: token}))
			require.NoError(t, err)
			for _, j := range page.Msg.GetJobs() {
				require.EqualValues(t, 1, j.GetAttempt(), "job %s was assigned more than once", j.GetId())
				workersSeen[j.GetWorkerId()] = true
				if q == "beta" {
					require.NotEqual(t, "p-w1", j.GetWorkerId(), "p-w1 does not serve beta")
				} else {
					require.NotEqual(t, "p-w3", j.GetWorkerId(), "p-w3 does not serve alpha")
				}
			}
			if token = page.Msg.GetNextPageToken(); token == "" {
				break
			}
		}
	}
	require.Len(t, workersSeen, 4, "every worker took part")
	require.Equal(t, jqv1.JobState_JOB_STATE_PENDING, c.job(ctx, gamma).GetState())
}
