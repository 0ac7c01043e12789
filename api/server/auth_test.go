package apiserver_test

// The authorization matrix: every RPC of every service, called with no
// credentials, with a token of each role, and as a worker or producer acting
// on another principal's worker id or job. Each call's code is what
// docs/security.md's table says, and a refused call changes nothing in
// Postgres (a digest of every table is compared before and after).

import (
	"context"
	"crypto/tls"
	"slices"
	"testing"
	"time"

	"connectrpc.com/connect"
	"github.com/google/uuid"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/zap/zaptest"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/reflect/protoregistry"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/jq-dev/jq/api/auth"
	jqv1 "github.com/jq-dev/jq/api/gen/jq/v1"
	"github.com/jq-dev/jq/api/gen/jq/v1/jqv1connect"
	"github.com/jq-dev/jq/api/rpcclient"
	"github.com/jq-dev/jq/api/server"
	"github.com/jq-dev/jq/internal/testenv"
	"github.com/jq-dev/jq/internal/testenv/stores"
	"github.com/jq-dev/jq/queue"
	"github.com/jq-dev/jq/queue/engine"
	"github.com/jq-dev/jq/roles/telemetry"
	"github.com/jq-dev/jq/store"
)

// The principals of the matrix; producerB and workerB are the "other" ones.
const (
	callerNone      = "none"
	callerProducer  = "producer"
	callerProducerB = "producer-b"
	callerWorker    = "worker"
	callerWorkerB   = "worker-b"
	callerViewer    = "viewer"
	callerAdmin     = "admin"
)

// wantRoles is docs/security.md's table, written out again here (not read from package auth):
// the roles that may call each procedure.
var wantRoles = map[string][]string{
	jqv1connect.JobServiceSubmitJobProcedure:           {"producer", "admin"},
	jqv1connect.JobServiceSubmitJobsProcedure:          {"producer", "admin"},
	jqv1connect.JobServiceGetJobProcedure:              {"producer", "viewer", "admin"},
	jqv1connect.JobServiceListJobsProcedure:            {"producer", "viewer", "admin"},
	jqv1connect.JobServiceListJobEventsProcedure:       {"producer", "viewer", "admin"},
	jqv1connect.JobServiceGetJobResultProcedure:        {"producer", "viewer", "admin"},
	jqv1connect.JobServiceWatchJobProcedure:            {"producer", "viewer", "admin"},
	jqv1connect.JobServiceWatchEventsProcedure:         {"producer", "viewer", "admin"},
	jqv1connect.JobServiceCancelJobProcedure:           {"producer", "admin"},
	jqv1connect.JobServiceRetryJobProcedure:            {"admin"},
	jqv1connect.JobServiceDeleteJobProcedure:           {"admin"},
	jqv1connect.QueueServiceCreateQueueProcedure:       {"admin"},
	jqv1connect.QueueServiceDeleteQueueProcedure:       {"admin"},
	jqv1connect.QueueServiceUpdateQueueProcedure:       {"admin"},
	jqv1connect.QueueServicePauseQueueProcedure:        {"admin"},
	jqv1connect.QueueServiceResumeQueueProcedure:       {"admin"},
	jqv1connect.QueueServiceListQueuesProcedure:        {"viewer", "admin"},
	jqv1connect.QueueServiceGetQueueProcedure:          {"viewer", "admin"},
	jqv1connect.QueueServiceGetQueueStatsProcedure:     {"viewer", "admin"},
	jqv1connect.WorkerServiceRegisterWorkerProcedure:   {"worker", "admin"},
	jqv1connect.WorkerServiceHeartbeatProcedure:        {"worker", "admin"},
	jqv1connect.WorkerServiceStreamJobsProcedure:       {"worker", "admin"},
	jqv1connect.WorkerServiceAckJobsProcedure:          {"worker", "admin"},
	jqv1connect.WorkerServiceReportJobsProcedure:       {"worker", "admin"},
	jqv1connect.WorkerServiceReportProgressProcedure:   {"worker", "admin"},
	jqv1connect.WorkerServiceDeregisterWorkerProcedure: {"worker", "admin"},
	jqv1connect.WorkerServiceListWorkersProcedure:      {"viewer", "admin"},
	jqv1connect.WorkerServiceDrainWorkerProcedure:      {"admin"},
	jqv1connect.WorkerServiceResumeWorkerProcedure:     {"admin"},
	jqv1connect.WorkerServiceShutdownWorkerProcedure:   {"admin"},
	jqv1connect.AdminServiceGetStatusProcedure:         {"viewer", "admin"},
	jqv1connect.AdminServiceGetVersionProcedure:        {"producer", "worker", "viewer", "admin"},
	jqv1connect.AdminServiceGetStatsProcedure:          {"viewer", "admin"},
	jqv1connect.AdminServicePeekQueueProcedure:         {"viewer", "admin"},
	jqv1connect.AdminServicePurgeDeadLettersProcedure:  {"admin"},
	// Schedules: admins change them, viewers read them.
	jqv1connect.ScheduleServiceCreateScheduleProcedure:  {"admin"},
	jqv1connect.ScheduleServiceUpdateScheduleProcedure:  {"admin"},
	jqv1connect.ScheduleServicePauseScheduleProcedure:   {"admin"},
	jqv1connect.ScheduleServiceResumeScheduleProcedure:  {"admin"},
	jqv1connect.ScheduleServiceTriggerScheduleProcedure: {"admin"},
	jqv1connect.ScheduleServiceDeleteScheduleProcedure:  {"admin"},
	jqv1connect.ScheduleServiceListSchedulesProcedure:   {"viewer", "admin"},
	jqv1connect.ScheduleServiceGetScheduleProcedure:     {"viewer", "admin"},
	// Constraints: admins change them, viewers read them, as queues.
	jqv1connect.ConstraintServiceCreateConstraintProcedure: {"admin"},
	jqv1connect.ConstraintServiceDeleteConstraintProcedure: {"admin"},
	jqv1connect.ConstraintServiceListConstraintsProcedure:  {"viewer", "admin"},
	jqv1connect.ConstraintServiceGetConstraintProcedure:    {"viewer", "admin"},
}

// ownedByA are the procedures that act on principal A's worker id or job: B, holding the same
// role, is refused with PERMISSION_DENIED.
var ownedByA = map[string]string{
	jqv1connect.WorkerServiceRegisterWorkerProcedure:   callerWorkerB,
	jqv1connect.WorkerServiceHeartbeatProcedure:        callerWorkerB,
	jqv1connect.WorkerServiceStreamJobsProcedure:       callerWorkerB,
	jqv1connect.WorkerServiceAckJobsProcedure:          callerWorkerB,
	jqv1connect.WorkerServiceReportJobsProcedure:       callerWorkerB,
	jqv1connect.WorkerServiceReportProgressProcedure:   callerWorkerB,
	jqv1connect.WorkerServiceDeregisterWorkerProcedure: callerWorkerB,
	jqv1connect.JobServiceGetJobProcedure:              callerProducerB,
	jqv1connect.JobServiceListJobEventsProcedure:       callerProducerB,
	jqv1connect.JobServiceGetJobResultProcedure:        callerProducerB,
	jqv1connect.JobServiceWatchJobProcedure:            callerProducerB,
	jqv1connect.JobServiceCancelJobProcedure:           callerProducerB,
}

type authFixture struct {
	ctx     context.Context
	st      *stores.PG
	addr    string
	tokens  map[string]string // caller → token
	queue   string
	job     *queue.Job // PENDING, submitted by producer A
	dead    *queue.Job // DEAD_LETTERED, for retry
	running *queue.Job // RUNNING on worker A, attempt 1
	workerA string     // registered by worker A
	sched   string     // a schedule, created by the admin
	constr  string     // a constraint on queue, created by the admin
	reg     *prometheus.Registry
	// With certificates (setupAuthTLS), each caller presents its own client certificate, mapped
	// to its role by a rule on its common name, and sends no token.
	ca    *testenv.CA
	certs map[string]testenv.Cert
}

// Authentication by token (setupAuth) or by client certificate (setupAuthTLS).
func setupAuth(t *testing.T) *authFixture    { return setupAuthWith(t, false) }
func setupAuthTLS(t *testing.T) *authFixture { return setupAuthWith(t, true) }

func setupAuthWith(t *testing.T, certs bool) *authFixture {
	t.Helper()
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	t.Cleanup(cancel)
	st, eng := runEngine(ctx, t, engine.Options{})

	f := &authFixture{ctx: ctx, st: st, tokens: map[string]string{}, reg: prometheus.NewRegistry()}
	var entries []auth.TokenEntry
	for caller, role := range map[string]auth.Role{
		callerProducer: auth.RoleProducer, callerProducerB: auth.RoleProducer,
		callerWorker: auth.RoleWorker, callerWorkerB: auth.RoleWorker,
		callerViewer: auth.RoleViewer, callerAdmin: auth.RoleAdmin,
	} {
		tok, err := auth.NewToken()
		require.NoError(t, err)
		f.tokens[caller] = tok
		entries = append(entries, auth.TokenEntry{Name: caller, Roles: []auth.Role{role}, SHA256: auth.HashToken(tok)})
	}
	var rules []auth.CertRule
	if certs {
		f.ca, f.certs = testenv.NewCA(t, "jq-matrix"), map[string]testenv.Cert{}
		for _, e := range entries {
			cn := "cn-" + e.Name
			f.certs[e.Name] = f.ca.Client(cn, nil)
			r, err := auth.ParseCertRule("cn=" + cn + ";roles=" + string(e.Roles[0]))
			require.NoError(t, err)
			rules = append(rules, r)
		}
		entries = nil // certificates only
	}
	refused := telemetry.NewAuthMetrics(f.reg)
	a, err := auth.New(auth.Options{Tokens: entries, CertRules: rules, Denied: refused, Log: zaptest.NewLogger(t)})
	require.NoError(t, err)
	sch, err := engine.NewSchedules(eng, engine.ScheduleOptions{Store: st})
	require.NoError(t, err)
	opts := apiserver.Options{
		Store: st, Engine: eng, Schedules: sch, Log: zaptest.NewLogger(t), Auth: a, Refused: refused,
		Limits:  apiserver.Limits{MaxPayloadBytes: 1 << 20},
		Workers: apiserver.WorkerTiming{HeartbeatInterval: time.Second, HeartbeatTimeout: 10 * time.Second},
	}
	if certs {
		// As a server with authentication on: a certificate is verified when given, not required.
		f.addr = serveTLS(t, opts, f.ca.Server("jq-server"), f.ca.CertFile, tls.VerifyClientCertIfGiven)
	} else {
		f.addr = serveAddr(t, opts)
	}

	// Fixtures, made through the API by their owners.
	f.queue = "auth-" + uuid.NewString()[:8]
	_, err = f.client(t, callerAdmin).Queues.CreateQueue(ctx, connect.NewRequest(&jqv1.CreateQueueRequest{Name: f.queue}))
	require.NoError(t, err)
	f.sched = "sc-" + uuid.NewString()[:8]
	_, err = f.client(t, callerAdmin).Schedules.CreateSchedule(ctx, connect.NewRequest(&jqv1.CreateScheduleRequest{
		Name: f.sched, Cron: "@hourly", Template: &jqv1.JobTemplate{Queue: f.queue, Type: "noop"}}))
	require.NoError(t, err)
	f.constr = "co-" + uuid.NewString()[:8]
	_, err = f.client(t, callerAdmin).Constraints.CreateConstraint(ctx, connect.NewRequest(&jqv1.CreateConstraintRequest{
		Name: f.constr, Match: &jqv1.JobMatcher{Queue: f.queue}, Key: "{{.labels.tenant}}", Concurrency: 10}))
	require.NoError(t, err)
	f.workerA = "wa-" + uuid.NewString()[:8]
	_, err = f.client(t, callerWorker).Workers.RegisterWorker(ctx, connect.NewRequest(&jqv1.RegisterWorkerRequest{
		WorkerId: f.workerA, Hostname: "a", Concurrency: 1, Queues: []string{f.queue}}))
	require.NoError(t, err)
	submit := func() *queue.Job {
		res, err := f.client(t, callerProducer).Jobs.SubmitJob(ctx, connect.NewRequest(&jqv1.SubmitJobRequest{
			Job: &jqv1.JobSpec{Queue: f.queue, Type: "noop", RunAt: nil}}))
		require.NoError(t, err)
		j, err := st.JobGet(ctx, res.Msg.GetJobId())
		require.NoError(t, err)
		return j
	}
	f.job, f.dead, f.running = submit(), submit(), submit()
	_, err = eng.JobCancel(ctx, f.dead.ID)
	require.NoError(t, err)
	jobs, err := st.JobAssignMany(ctx, store.JobAssignParams{WorkerID: f.workerA, IDs: []string{f.running.ID}})
	require.NoError(t, err)
	outs, err := st.JobAckMany(ctx, []store.JobLease{{ID: jobs[0].ID, Attempt: jobs[0].Attempt, WorkerID: f.workerA}})
	require.NoError(t, err)
	require.NoError(t, outs[0].Err)
	f.running = outs[0].Job
	// Paused: the engine dispatches nothing while the matrix runs, so only the calls change state.
	_, err = st.QueueSetPaused(ctx, store.QueueSetPausedParams{Name: f.queue, Paused: true})
	require.NoError(t, err)
	if certs {
		require.Equal(t, "cert:cn:cn-"+callerProducer, f.job.Principal)
	} else {
		require.Equal(t, "token:"+callerProducer, f.job.Principal)
	}
	return f
}

func (f *authFixture) client(t *testing.T, caller string) *rpcclient.Client {
	t.Helper()
	opts := rpcclient.Options{Addr: f.addr, Token: f.tokens[caller]}
	if f.ca != nil {
		opts = rpcclient.Options{Addr: f.addr, CAFile: f.ca.CertFile, CertFile: f.certs[caller].CertFile, KeyFile: f.certs[caller].KeyFile}
	}
	cl, err := rpcclient.New(opts)
	require.NoError(t, err)
	t.Cleanup(cl.Close)
	return cl
}

// digest is a fingerprint of every row of the tables a request could change.
func (f *authFixture) digest(t *testing.T) string {
	t.Helper()
	var d string
	err := f.st.Pool().QueryRow(f.ctx, `SELECT
		(SELECT coalesce(md5(string_agg(j::text, '|' ORDER BY id)), '') FROM jobs j) ||
		(SELECT coalesce(md5(string_agg(e::text, '|' ORDER BY id)), '') FROM job_events e) ||
		(SELECT coalesce(md5(string_agg(b::text, '|' ORDER BY id)), '') FROM event_batches b) ||
		(SELECT coalesce(md5(string_agg(w::text, '|' ORDER BY id)), '') FROM workers w) ||
		(SELECT coalesce(md5(string_agg(q::text, '|' ORDER BY name)), '') FROM queues q) ||
		(SELECT coalesce(md5(string_agg(s::text, '|' ORDER BY name)), '') FROM schedules s) ||
		(SELECT coalesce(md5(string_agg(c::text, '|' ORDER BY name)), '') FROM constraints c) ||
		(SELECT gen::text FROM constraint_generation)`).Scan(&d)
	require.NoError(t, err)
	return d
}

// calls makes one valid request per procedure, aimed at A's fixtures.
func (f *authFixture) calls() map[string]func(ctx context.Context, cl *rpcclient.Client) error {
	lease := []*jqv1.JobLease{{JobId: f.running.ID, Attempt: int32(f.running.Attempt)}}
	return map[string]func(context.Context, *rpcclient.Client) error{
		jqv1connect.JobServiceSubmitJobProcedure: func(ctx context.Context, cl *rpcclient.Client) error {
			_, err := cl.Jobs.SubmitJob(ctx, connect.NewRequest(&jqv1.SubmitJobRequest{Job: &jqv1.JobSpec{Queue: f.queue, Type: "noop"}}))
			return err
		},
		jqv1connect.JobServiceSubmitJobsProcedure: func(ctx context.Context, cl *rpcclient.Client) error {
			_, err := cl.Jobs.SubmitJobs(ctx, connect.NewRequest(&jqv1.SubmitJobsRequest{Jobs: []*jqv1.JobSpec{{Queue: f.queue, Type: "noop"}}}))
			return err
		},
		jqv1connect.JobServiceGetJobProcedure: func(ctx context.Context, cl *rpcclient.Client) error {
			_, err := cl.Jobs.GetJob(ctx, connect.NewRequest(&jqv1.GetJobRequest{JobId: f.job.ID}))
			return err
		},
		jqv1connect.JobServiceWatchJobProcedure: func(ctx context.Context, cl *rpcclient.Client) error {
			// The paused queue keeps the job PENDING: the stream's first message is the answer.
			st, err := cl.Jobs.WatchJob(ctx, connect.NewRequest(&jqv1.WatchJobRequest{JobId: f.job.ID}))
			if err != nil {
				return err
			}
			defer func() { _ = st.Close() }()
			if st.Receive() {
				return nil
			}
			return st.Err()
		},
		jqv1connect.JobServiceWatchEventsProcedure: func(ctx context.Context, cl *rpcclient.Client) error {
			// The first message says the stream is open.
			st, err := cl.Jobs.WatchEvents(ctx, connect.NewRequest(&jqv1.WatchEventsRequest{Queue: f.queue}))
			if err != nil {
				return err
			}
			defer func() { _ = st.Close() }()
			if st.Receive() {
				return nil
			}
			return st.Err()
		},
		jqv1connect.JobServiceListJobsProcedure: func(ctx context.Context, cl *rpcclient.Client) error {
			_, err := cl.Jobs.ListJobs(ctx, connect.NewRequest(&jqv1.ListJobsRequest{Queue: f.queue}))
			return err
		},
		jqv1connect.JobServiceListJobEventsProcedure: func(ctx context.Context, cl *rpcclient.Client) error {
			_, err := cl.Jobs.ListJobEvents(ctx, connect.NewRequest(&jqv1.ListJobEventsRequest{JobId: f.job.ID}))
			return err
		},
		jqv1connect.JobServiceGetJobResultProcedure: func(ctx context.Context, cl *rpcclient.Client) error {
			_, err := cl.Jobs.GetJobResult(ctx, connect.NewRequest(&jqv1.GetJobResultRequest{JobId: f.job.ID}))
			return err
		},
		jqv1connect.JobServiceCancelJobProcedure: func(ctx context.Context, cl *rpcclient.Client) error {
			_, err := cl.Jobs.CancelJob(ctx, connect.NewRequest(&jqv1.CancelJobRequest{JobId: f.job.ID}))
			return err
		},
		jqv1connect.JobServiceRetryJobProcedure: func(ctx context.Context, cl *rpcclient.Client) error {
			_, err := cl.Jobs.RetryJob(ctx, connect.NewRequest(&jqv1.RetryJobRequest{JobId: f.dead.ID}))
			return err
		},
		jqv1connect.JobServiceDeleteJobProcedure: func(ctx context.Context, cl *rpcclient.Client) error {
			_, err := cl.Jobs.DeleteJob(ctx, connect.NewRequest(&jqv1.DeleteJobRequest{JobId: f.dead.ID}))
			return err
		},
		jqv1connect.QueueServiceCreateQueueProcedure: func(ctx context.Context, cl *rpcclient.Client) error {
			_, err := cl.Queues.CreateQueue(ctx, connect.NewRequest(&jqv1.CreateQueueRequest{Name: "new-" + uuid.NewString()[:8]}))
			return err
		},
		jqv1connect.QueueServiceDeleteQueueProcedure: func(ctx context.Context, cl *rpcclient.Client) error {
			_, err := cl.Queues.DeleteQueue(ctx, connect.NewRequest(&jqv1.DeleteQueueRequest{Name: f.queue, Force: true}))
			return err
		},
		jqv1connect.QueueServiceUpdateQueueProcedure: func(ctx context.Context, cl *rpcclient.Client) error {
			_, err := cl.Queues.UpdateQueue(ctx, connect.NewRequest(&jqv1.UpdateQueueRequest{Name: "default", MaxRetries: ptr(int32(3))}))
			return err
		},
		jqv1connect.QueueServicePauseQueueProcedure: func(ctx context.Context, cl *rpcclient.Client) error {
			_, err := cl.Queues.PauseQueue(ctx, connect.NewRequest(&jqv1.PauseQueueRequest{Name: "default"}))
			return err
		},
		jqv1connect.QueueServiceResumeQueueProcedure: func(ctx context.Context, cl *rpcclient.Client) error {
			_, err := cl.Queues.ResumeQueue(ctx, connect.NewRequest(&jqv1.ResumeQueueRequest{Name: f.queue}))
			return err
		},
		jqv1connect.QueueServiceListQueuesProcedure: func(ctx context.Context, cl *rpcclient.Client) error {
			_, err := cl.Queues.ListQueues(ctx, connect.NewRequest(&jqv1.ListQueuesRequest{}))
			return err
		},
		jqv1connect.QueueServiceGetQueueProcedure: func(ctx context.Context, cl *rpcclient.Client) error {
			_, err := cl.Queues.GetQueue(ctx, connect.NewRequest(&jqv1.GetQueueRequest{Name: f.queue}))
			return err
		},
		jqv1connect.QueueServiceGetQueueStatsProcedure: func(ctx context.Context, cl *rpcclient.Client) error {
			_, err := cl.Queues.GetQueueStats(ctx, connect.NewRequest(&jqv1.GetQueueStatsRequest{Name: f.queue}))
			return err
		},
		jqv1connect.WorkerServiceRegisterWorkerProcedure: func(ctx context.Context, cl *rpcclient.Client) error {
			_, err := cl.Workers.RegisterWorker(ctx, connect.NewRequest(&jqv1.RegisterWorkerRequest{
				WorkerId: f.workerA, Hostname: "x", Concurrency: 1, Queues: []string{f.queue}}))
			return err
		},
		jqv1connect.WorkerServiceHeartbeatProcedure: func(ctx context.Context, cl *rpcclient.Client) error {
			_, err := cl.Workers.Heartbeat(ctx, connect.NewRequest(&jqv1.HeartbeatRequest{WorkerId: f.workerA}))
			return err
		},
		jqv1connect.WorkerServiceStreamJobsProcedure: func(ctx context.Context, cl *rpcclient.Client) error {
			ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
			defer cancel()
			s, err := cl.Workers.StreamJobs(ctx, connect.NewRequest(&jqv1.StreamJobsRequest{WorkerId: f.workerA}))
			if err != nil {
				return err
			}
			defer func() { _ = s.Close() }()
			if s.Receive() {
				return nil // the opening keepalive: the stream was accepted
			}
			return s.Err()
		},
		jqv1connect.WorkerServiceAckJobsProcedure: func(ctx context.Context, cl *rpcclient.Client) error {
			_, err := cl.Workers.AckJobs(ctx, connect.NewRequest(&jqv1.AckJobsRequest{WorkerId: f.workerA, Leases: lease}))
			return err
		},
		jqv1connect.WorkerServiceReportJobsProcedure: func(ctx context.Context, cl *rpcclient.Client) error {
			_, err := cl.Workers.ReportJobs(ctx, connect.NewRequest(&jqv1.ReportJobsRequest{WorkerId: f.workerA, Reports: []*jqv1.JobReport{{
				JobId: f.running.ID, Attempt: int32(f.running.Attempt),
				Outcome: &jqv1.JobReport_Success{Success: &jqv1.JobSuccess{Result: []byte("forged")}},
			}}}))
			return err
		},
		jqv1connect.WorkerServiceReportProgressProcedure: func(ctx context.Context, cl *rpcclient.Client) error {
			_, err := cl.Workers.ReportProgress(ctx, connect.NewRequest(&jqv1.ReportProgressRequest{WorkerId: f.workerA,
				Updates: []*jqv1.JobProgressUpdate{{JobId: f.running.ID, Attempt: int32(f.running.Attempt), Percent: 50}}}))
			return err
		},
		jqv1connect.WorkerServiceDeregisterWorkerProcedure: func(ctx context.Context, cl *rpcclient.Client) error {
			_, err := cl.Workers.DeregisterWorker(ctx, connect.NewRequest(&jqv1.DeregisterWorkerRequest{WorkerId: f.workerA}))
			return err
		},
		jqv1connect.WorkerServiceListWorkersProcedure: func(ctx context.Context, cl *rpcclient.Client) error {
			_, err := cl.Workers.ListWorkers(ctx, connect.NewRequest(&jqv1.ListWorkersRequest{}))
			return err
		},
		jqv1connect.WorkerServiceDrainWorkerProcedure: func(ctx context.Context, cl *rpcclient.Client) error {
			_, err := cl.Workers.DrainWorker(ctx, connect.NewRequest(&jqv1.DrainWorkerRequest{WorkerId: f.workerA}))
			return err
		},
		jqv1connect.WorkerServiceResumeWorkerProcedure: func(ctx context.Context, cl *rpcclient.Client) error {
			_, err := cl.Workers.ResumeWorker(ctx, connect.NewRequest(&jqv1.ResumeWorkerRequest{WorkerId: f.workerA}))
			return err
		},
		jqv1connect.WorkerServiceShutdownWorkerProcedure: func(ctx context.Context, cl *rpcclient.Client) error {
			_, err := cl.Workers.ShutdownWorker(ctx, connect.NewRequest(&jqv1.ShutdownWorkerRequest{WorkerId: f.workerA}))
			return err
		},
		jqv1connect.AdminServiceGetStatusProcedure: func(ctx context.Context, cl *rpcclient.Client) error {
			_, err := cl.Admin.GetStatus(ctx, connect.NewRequest(&jqv1.GetStatusRequest{}))
			return err
		},
		jqv1connect.AdminServiceGetVersionProcedure: func(ctx context.Context, cl *rpcclient.Client) error {
			_, err := cl.Admin.GetVersion(ctx, connect.NewRequest(&jqv1.GetVersionRequest{}))
			return err
		},
		jqv1connect.AdminServiceGetStatsProcedure: func(ctx context.Context, cl *rpcclient.Client) error {
			_, err := cl.Admin.GetStats(ctx, connect.NewRequest(&jqv1.GetStatsRequest{}))
			return err
		},
		jqv1connect.AdminServicePeekQueueProcedure: func(ctx context.Context, cl *rpcclient.Client) error {
			_, err := cl.Admin.PeekQueue(ctx, connect.NewRequest(&jqv1.PeekQueueRequest{Queue: f.queue}))
			return err
		},
		jqv1connect.AdminServicePurgeDeadLettersProcedure: func(ctx context.Context, cl *rpcclient.Client) error {
			_, err := cl.Admin.PurgeDeadLetters(ctx, connect.NewRequest(&jqv1.PurgeDeadLettersRequest{Confirm: true}))
			return err
		},
		jqv1connect.ScheduleServiceCreateScheduleProcedure: func(ctx context.Context, cl *rpcclient.Client) error {
			_, err := cl.Schedules.CreateSchedule(ctx, connect.NewRequest(&jqv1.CreateScheduleRequest{
				Name: "new-" + uuid.NewString()[:8], Cron: "0 3 * * *", TimeZone: "Europe/Berlin",
				Template: &jqv1.JobTemplate{Queue: f.queue, Type: "noop"}}))
			return err
		},
		jqv1connect.ScheduleServiceListSchedulesProcedure: func(ctx context.Context, cl *rpcclient.Client) error {
			_, err := cl.Schedules.ListSchedules(ctx, connect.NewRequest(&jqv1.ListSchedulesRequest{}))
			return err
		},
		jqv1connect.ScheduleServiceGetScheduleProcedure: func(ctx context.Context, cl *rpcclient.Client) error {
			_, err := cl.Schedules.GetSchedule(ctx, connect.NewRequest(&jqv1.GetScheduleRequest{Name: f.sched}))
			return err
		},
		jqv1connect.ScheduleServiceUpdateScheduleProcedure: func(ctx context.Context, cl *rpcclient.Client) error {
			_, err := cl.Schedules.UpdateSchedule(ctx, connect.NewRequest(&jqv1.UpdateScheduleRequest{
				Name: f.sched, Cron: "@hourly", Template: &jqv1.JobTemplate{Queue: f.queue, Type: "noop"}}))
			return err
		},
		jqv1connect.ScheduleServicePauseScheduleProcedure: func(ctx context.Context, cl *rpcclient.Client) error {
			_, err := cl.Schedules.PauseSchedule(ctx, connect.NewRequest(&jqv1.PauseScheduleRequest{Name: f.sched}))
			return err
		},
		jqv1connect.ScheduleServiceResumeScheduleProcedure: func(ctx context.Context, cl *rpcclient.Client) error {
			_, err := cl.Schedules.ResumeSchedule(ctx, connect.NewRequest(&jqv1.ResumeScheduleRequest{Name: f.sched}))
			return err
		},
		jqv1connect.ScheduleServiceTriggerScheduleProcedure: func(ctx context.Context, cl *rpcclient.Client) error {
			_, err := cl.Schedules.TriggerSchedule(ctx, connect.NewRequest(&jqv1.TriggerScheduleRequest{Name: f.sched}))
			return err
		},
		jqv1connect.ScheduleServiceDeleteScheduleProcedure: func(ctx context.Context, cl *rpcclient.Client) error {
			_, err := cl.Schedules.DeleteSchedule(ctx, connect.NewRequest(&jqv1.DeleteScheduleRequest{Name: f.sched}))
			return err
		},
		jqv1connect.ConstraintServiceCreateConstraintProcedure: func(ctx context.Context, cl *rpcclient.Client) error {
			_, err := cl.Constraints.CreateConstraint(ctx, connect.NewRequest(&jqv1.CreateConstraintRequest{
				Name: "new-" + uuid.NewString()[:8], Match: &jqv1.JobMatcher{Queue: f.queue, Type: "noop"},
				Rate: &jqv1.RateLimit{Limit: 100, Interval: durationpb.New(time.Minute)}}))
			return err
		},
		jqv1connect.ConstraintServiceListConstraintsProcedure: func(ctx context.Context, cl *rpcclient.Client) error {
			_, err := cl.Constraints.ListConstraints(ctx, connect.NewRequest(&jqv1.ListConstraintsRequest{}))
			return err
		},
		jqv1connect.ConstraintServiceGetConstraintProcedure: func(ctx context.Context, cl *rpcclient.Client) error {
			_, err := cl.Constraints.GetConstraint(ctx, connect.NewRequest(&jqv1.GetConstraintRequest{Name: f.constr}))
			return err
		},
		jqv1connect.ConstraintServiceDeleteConstraintProcedure: func(ctx context.Context, cl *rpcclient.Client) error {
			_, err := cl.Constraints.DeleteConstraint(ctx, connect.NewRequest(&jqv1.DeleteConstraintRequest{Name: f.constr}))
			return err
		},
	}
}

// TestAuthorizationMatrix refuses every call the table does not allow, and lets every allowed
// one through authorization. Only refusals run here: allowed calls that change state would change
// the fixtures the next call needs (they run in TestAuthorizationAllowed).
func TestAuthorizationMatrix(t *testing.T) {
	t.Run("Tokens", func(t *testing.T) { testAuthorizationMatrix(t, setupAuth(t)) })
	t.Run("Certificates", func(t *testing.T) { testAuthorizationMatrix(t, setupAuthTLS(t)) })
}

func testAuthorizationMatrix(t *testing.T, f *authFixture) {
	calls := f.calls()
	require.Len(t, calls, len(wantRoles), "one call per procedure")
	for _, procedure := range sortedKeys(wantRoles) {
		call, ok := calls[procedure]
		require.True(t, ok, "no call for %s", procedure)
		for _, caller := range []string{callerNone, callerProducer, callerWorker, callerViewer} {
			role := caller
			allowed := slices.Contains(wantRoles[procedure], role)
			if allowed {
				continue
			}
			before := f.digest(t)
			err := call(f.ctx, f.client(t, caller))
			want := connect.CodePermissionDenied
			if caller == callerNone {
				want = connect.CodeUnauthenticated
			}
			requireCode(t, want, err, "%s as %s", procedure, caller)
			require.Equal(t, before, f.digest(t), "%s as %s changed the database", procedure, caller)
		}
		if other, ok := ownedByA[procedure]; ok {
			before := f.digest(t)
			err := call(f.ctx, f.client(t, other))
			requireCode(t, connect.CodePermissionDenied, err, "%s as %s on A's worker/job", procedure, other)
			require.Equal(t, before, f.digest(t), "%s as %s changed the database", procedure, other)
		}
	}
	// Every refusal was counted by reason.
	require.Positive(t, counterValue(t, f.reg, "jq_auth_denied_total", auth.ReasonMissing))
	require.Positive(t, counterValue(t, f.reg, "jq_auth_denied_total", auth.ReasonForbidden))
	require.Positive(t, counterValue(t, f.reg, "jq_auth_denied_total", auth.ReasonNotOwner))

	// A token that matches no configured hash.
	opts := rpcclient.Options{Addr: f.addr, Token: "jq_not-a-real-token"}
	if f.ca != nil {
		opts.CAFile = f.ca.CertFile
	}
	bad, err := rpcclient.New(opts)
	require.NoError(t, err)
	defer bad.Close()
	_, err = bad.Admin.GetVersion(f.ctx, connect.NewRequest(&jqv1.GetVersionRequest{}))
	requireCode(t, connect.CodeUnauthenticated, err)
	require.Contains(t, err.Error(), "invalid token")
}

// TestAuthorizationAllowed runs every call each allowed role may make, on fresh fixtures per call:
// none is refused by authentication or authorization (what it then does is the handlers' business,
// tested elsewhere).
func TestAuthorizationAllowed(t *testing.T) {
	for _, procedure := range sortedKeys(wantRoles) {
		t.Run(procedure[1:], func(t *testing.T) {
			f := setupAuth(t)
			for _, caller := range wantRoles[procedure] {
				err := f.calls()[procedure](f.ctx, f.client(t, caller))
				code := connect.CodeOf(err)
				require.NotContains(t, []connect.Code{connect.CodeUnauthenticated, connect.CodePermissionDenied}, code,
					"%s as %s: %v", procedure, caller, err)
			}
		})
	}
}

// TestWorkerCannotForgeReport is the attack of the issue: a second worker principal quotes the real
// worker's id (visible to viewers in ListWorkers) to report a RUNNING job done. It is refused, and the
// job's real worker still reports it.
func TestWorkerCannotForgeReport(t *testing.T) {
	f := setupAuth(t)
	forged := f.calls()[jqv1connect.WorkerServiceReportJobsProcedure]
	requireCode(t, connect.CodePermissionDenied, forged(f.ctx, f.client(t, callerWorkerB)))
	j, err := f.st.JobGet(f.ctx, f.running.ID)
	require.NoError(t, err)
	require.Equal(t, queue.StateRunning, j.State)

	require.NoError(t, forged(f.ctx, f.client(t, callerWorker)))
	j, err = f.st.JobGet(f.ctx, f.running.ID)
	require.NoError(t, err)
	require.Equal(t, queue.StateDone, j.State)
}

// TestProducerSeesOwnJobs: a producer's list holds only the jobs it submitted.
func TestProducerSeesOwnJobs(t *testing.T) {
	f := setupAuth(t)
	list := func(caller string) []string {
		res, err := f.client(t, caller).Jobs.ListJobs(f.ctx, connect.NewRequest(&jqv1.ListJobsRequest{Queue: f.queue}))
		require.NoError(t, err)
		var ids []string
		for _, j := range res.Msg.GetJobs() {
			ids = append(ids, j.GetId())
		}
		return ids
	}
	require.Len(t, list(callerProducer), 3)
	require.Empty(t, list(callerProducerB))
	require.Len(t, list(callerViewer), 3)
	// The same idempotency key from B conflicts instead of handing B A's job.
	spec := &jqv1.JobSpec{Queue: f.queue, Type: "noop", IdempotencyKey: "k-1"}
	_, err := f.client(t, callerProducer).Jobs.SubmitJob(f.ctx, connect.NewRequest(&jqv1.SubmitJobRequest{Job: spec}))
	require.NoError(t, err)
	_, err = f.client(t, callerProducerB).Jobs.SubmitJob(f.ctx, connect.NewRequest(&jqv1.SubmitJobRequest{Job: spec}))
	requireCode(t, connect.CodeFailedPrecondition, err)
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}

// counterValue reads one reason's count from the registry.
func counterValue(t *testing.T, reg *prometheus.Registry, name, reason string) float64 {
	t.Helper()
	mfs, err := reg.Gather()
	require.NoError(t, err)
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
		for _, m := range mf.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == "reason" && l.GetValue() == reason {
					return m.GetCounter().GetValue()
				}
			}
		}
	}
	t.Fatalf("no %s{reason=%q}", name, reason)
	return 0
}

// TestWorkerAndStreamLimits: a principal past auth.max_workers_per_principal or
// auth.max_streams_per_principal gets RESOURCE_EXHAUSTED; a worker registering again does not count
// twice, and a closed stream frees its slot.
func TestWorkerAndStreamLimits(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	st, eng := runEngine(ctx, t, engine.Options{})

	tok, err := auth.NewToken()
	require.NoError(t, err)
	reg := prometheus.NewRegistry()
	refused := telemetry.NewAuthMetrics(reg)
	a, err := auth.New(auth.Options{Denied: refused,
		Tokens: []auth.TokenEntry{{Name: "w", Roles: []auth.Role{auth.RoleWorker}, SHA256: auth.HashToken(tok), Queues: []string{"default"}}}})
	require.NoError(t, err)
	addr := serveAddr(t, apiserver.Options{Store: st, Engine: eng, Log: zaptest.NewLogger(t), Auth: a, Refused: refused,
		Limits: apiserver.Limits{MaxWorkers: 100, MaxWorkersPerPrincipal: 2, MaxStreams: 100, MaxStreamsPerPrincipal: 1}})
	cl, err := rpcclient.New(rpcclient.Options{Addr: addr, Token: tok})
	require.NoError(t, err)
	defer cl.Close()
	register := func(id string, queues ...string) error {
		if len(queues) == 0 {
			queues = []string{"default"}
		}
		_, err := cl.Workers.RegisterWorker(ctx, connect.NewRequest(&jqv1.RegisterWorkerRequest{WorkerId: id, Hostname: "h", Concurrency: 1, Queues: queues}))
		return err
	}
	requireCode(t, connect.CodePermissionDenied, register("w0", "other"), "a queue outside the principal's list")
	require.NoError(t, register("w1"))
	require.NoError(t, register("w2"))
	require.NoError(t, register("w1"), "registering again is not one more worker")
	err = register("w3")
	requireCode(t, connect.CodeResourceExhausted, err)
	require.Contains(t, err.Error(), "auth.max_workers_per_principal")

	open := func(ctx context.Context, id string) (*connect.ServerStreamForClient[jqv1.StreamJobsResponse], error) {
		s, err := cl.Workers.StreamJobs(ctx, connect.NewRequest(&jqv1.StreamJobsRequest{WorkerId: id}))
		if err != nil {
			return nil, err
		}
		if !s.Receive() {
			return nil, s.Err()
		}
		return s, nil
	}
	sctx, closeFirst := context.WithCancel(ctx)
	first, err := open(sctx, "w1")
	require.NoError(t, err)
	_, err = open(ctx, "w2")
	requireCode(t, connect.CodeResourceExhausted, err)
	require.Contains(t, err.Error(), "auth.max_streams_per_principal")
	closeFirst()
	_ = first.Close()
	testenv.Eventually(t, 10*time.Second, func() error {
		s, err := open(ctx, "w2")
		if err == nil {
			_ = s.Close()
		}
		return err
	})
	require.Equal(t, 1.0, counterValue(t, reg, "jq_api_limited_total", auth.ReasonWorkerLimit))
	require.GreaterOrEqual(t, counterValue(t, reg, "jq_api_limited_total", auth.ReasonStreamLimit), 1.0)
}

// TestWatchStreamLimits: WatchJob and WatchEvents streams are held open and re-read the store, so
// a principal past auth.max_streams_per_principal gets RESOURCE_EXHAUSTED for one more (counted
// apart from assignment streams), and a closed stream frees its slot.
func TestWatchStreamLimits(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	st, eng := runEngine(ctx, t, engine.Options{})

	tok, err := auth.NewToken()
	require.NoError(t, err)
	reg := prometheus.NewRegistry()
	refused := telemetry.NewAuthMetrics(reg)
	a, err := auth.New(auth.Options{Denied: refused,
		Tokens: []auth.TokenEntry{{Name: "v", Roles: []auth.Role{auth.RoleViewer}, SHA256: auth.HashToken(tok)}}})
	require.NoError(t, err)
	addr := serveAddr(t, apiserver.Options{Store: st, Engine: eng, Log: zaptest.NewLogger(t), Auth: a, Refused: refused,
		Limits: apiserver.Limits{MaxStreams: 100, MaxStreamsPerPrincipal: 2}})
	cl, err := rpcclient.New(rpcclient.Options{Addr: addr, Token: tok})
	require.NoError(t, err)
	defer cl.Close()

	watchEvents := func(ctx context.Context) (*connect.ServerStreamForClient[jqv1.WatchEventsResponse], error) {
		s, err := cl.Jobs.WatchEvents(ctx, connect.NewRequest(&jqv1.WatchEventsRequest{}))
		if err != nil {
			return nil, err
		}
		if !s.Receive() {
			return nil, s.Err()
		}
		return s, nil
	}
	sctx, closeFirst := context.WithCancel(ctx)
	first, err := watchEvents(sctx)
	require.NoError(t, err)
	second, err := watchEvents(ctx)
	require.NoError(t, err)
	defer func() { _ = second.Close() }()
	_, err = watchEvents(ctx)
	requireCode(t, connect.CodeResourceExhausted, err)
	require.Contains(t, err.Error(), "watch streams")
	require.Contains(t, err.Error(), "auth.max_streams_per_principal")

	// WatchJob counts against the same bound (its job need not exist: the slot is taken first).
	wj, err := cl.Jobs.WatchJob(ctx, connect.NewRequest(&jqv1.WatchJobRequest{JobId: "00000000-0000-4000-8000-000000000001"}))
	require.NoError(t, err)
	require.False(t, wj.Receive())
	requireCode(t, connect.CodeResourceExhausted, wj.Err())
	_ = wj.Close()

	closeFirst()
	_ = first.Close()
	testenv.Eventually(t, 10*time.Second, func() error {
		s, err := watchEvents(ctx)
		if err == nil {
			_ = s.Close()
		}
		return err
	})
	require.GreaterOrEqual(t, counterValue(t, reg, "jq_api_limited_total", auth.ReasonStreamLimit), 2.0)
}

// TestWantRolesCoverEveryProcedure: every jq.v1 RPC is in the matrix above, so a new RPC cannot
// go untested for its refusals.
func TestWantRolesCoverEveryProcedure(t *testing.T) {
	n := 0
	protoregistry.GlobalFiles.RangeFiles(func(fd protoreflect.FileDescriptor) bool {
		if fd.Package() != "jq.v1" {
			return true
		}
		for i := range fd.Services().Len() {
			sd := fd.Services().Get(i)
			for j := range sd.Methods().Len() {
				proc := "/" + string(sd.FullName()) + "/" + string(sd.Methods().Get(j).Name())
				_, ok := wantRoles[proc]
				assert.True(t, ok, "%s has no line in wantRoles", proc)
				n++
			}
		}
		return true
	})
	require.Positive(t, n)
}
