package apiserver_test

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"connectrpc.com/connect"
	"github.com/google/uuid"
	"github.com/stretchr/testify/require"
	"go.uber.org/zap/zaptest"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/timestamppb"

	jqv1 "github.com/jq-dev/jq/api/gen/jq/v1"
	"github.com/jq-dev/jq/api/server"
	"github.com/jq-dev/jq/internal/buildinfo"
	"github.com/jq-dev/jq/queue"
	"github.com/jq-dev/jq/queue/engine"
	"github.com/jq-dev/jq/store"
)

// The API contract the protos promise is what the server enforces: each refusal below is
// INVALID_ARGUMENT (NOT_FOUND for an unknown worker), one short line that quotes little of the
// input, and nothing changes in Postgres.

// requireRefused checks a refusal's code and message.
func requireRefused(t *testing.T, want connect.Code, err error, msgAndArgs ...any) {
	t.Helper()
	requireCode(t, want, err, msgAndArgs...)
	msg := connect.CodeOf(err).String() + ": " + err.(*connect.Error).Message() //nolint:errorlint // requireCode checked it
	require.NotContains(t, msg, "\n", msgAndArgs...)
	require.LessOrEqual(t, len(msg), 200, append([]any{"message too long: %s"}, msg)...)
	require.True(t, utf8.ValidString(msg))
}

// jobCount is the number of jobs in the bundle's database.
func (b *bundle) jobCount() int {
	b.t.Helper()
	n := 0
	p := store.JobListParams{Limit: store.MaxListLimit}
	for {
		page, err := b.store.JobList(b.ctx, p)
		require.NoError(b.t, err)
		n += len(page.Jobs)
		if page.NextCursor == "" {
			return n
		}
		p.Cursor = page.NextCursor
	}
}

func TestSubmitRefusals(t *testing.T) {
	b := setupEngine(t, engine.Options{})
	spec := func(change func(s *jqv1.JobSpec)) *jqv1.JobSpec {
		s := &jqv1.JobSpec{
			Queue: b.queue, Type: "email.send", Payload: []byte(`{}`), IdempotencyKey: uuid.NewString(),
			Labels:       map[string]string{"team": "a"},
			TraceContext: map[string]string{"traceparent": "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"},
		}
		change(s)
		return s
	}
	num := func(i int) string { return fmt.Sprint(i) }
	many := func(n int, k, v func(i int) string) map[string]string {
		m := map[string]string{}
		for i := range n {
			m[k(i)] = v(i)
		}
		return m
	}
	huge := strings.Repeat("x", 400<<10)
	cases := map[string]func(s *jqv1.JobSpec){
		"queue name":          func(s *jqv1.JobSpec) { s.Queue = "Bad Queue" },
		"queue name huge":     func(s *jqv1.JobSpec) { s.Queue = huge },
		"type empty":          func(s *jqv1.JobSpec) { s.Type = "" },
		"type 129 bytes":      func(s *jqv1.JobSpec) { s.Type = strings.Repeat("t", 129) },
		"type space":          func(s *jqv1.JobSpec) { s.Type = "email send" },
		"type NUL":            func(s *jqv1.JobSpec) { s.Type = "email\x00send" },
		"type escape":         func(s *jqv1.JobSpec) { s.Type = "\x1b[2J" },
		"type non-ASCII":      func(s *jqv1.JobSpec) { s.Type = "émail" },
		"priority":            func(s *jqv1.JobSpec) { s.Priority = 10 },
		"max_retries":         func(s *jqv1.JobSpec) { s.MaxRetries = ptr(int32(101)) },
		"ttl zero":            func(s *jqv1.JobSpec) { s.Ttl = durationpb.New(0) },
		"ttl negative":        func(s *jqv1.JobSpec) { s.Ttl = durationpb.New(-time.Second) },
		"ttl over a year":     func(s *jqv1.JobSpec) { s.Ttl = durationpb.New(store.MaxDuration + time.Second) },
		"ttl invalid":         func(s *jqv1.JobSpec) { s.Ttl = &durationpb.Duration{Seconds: 1, Nanos: -1} },
		"timeout zero":        func(s *jqv1.JobSpec) { s.Timeout = durationpb.New(0) },
		"timeout 25h":         func(s *jqv1.JobSpec) { s.Timeout = durationpb.New(25 * time.Hour) },
		"run_at two years":    func(s *jqv1.JobSpec) { s.RunAt = timestamppb.New(time.Now().Add(2 * store.MaxDuration)) },
		"payload":             func(s *jqv1.JobSpec) { s.Payload = make([]byte, 1<<20+1) },
		"key 256 bytes":       func(s *jqv1.JobSpec) { s.IdempotencyKey = strings.Repeat("k", 256) },
		"key newline":         func(s *jqv1.JobSpec) { s.IdempotencyKey = "k\n" },
		"label key empty":     func(s *jqv1.JobSpec) { s.Labels = map[string]string{"": "v"} },
		"label key 64 bytes":  func(s *jqv1.JobSpec) { s.Labels = map[string]string{strings.Repeat("k", 64): "v"} },
		"label key huge":      func(s *jqv1.JobSpec) { s.Labels = map[string]string{huge: "v"} },
		"label value 256":     func(s *jqv1.JobSpec) { s.Labels = map[string]string{"k": strings.Repeat("v", 256)} },
		"label value NUL":     func(s *jqv1.JobSpec) { s.Labels = map[string]string{"k": "v\x00"} },
		"label value escape":  func(s *jqv1.JobSpec) { s.Labels = map[string]string{"k": "\x1b]0;pwned\x07"} },
		"65 labels":           func(s *jqv1.JobSpec) { s.Labels = many(65, func(i int) string { return fmt.Sprint("k", i) }, num) },
		"9 trace entries":     func(s *jqv1.JobSpec) { s.TraceContext = many(9, num, num) },
		"trace key 65 bytes":  func(s *jqv1.JobSpec) { s.TraceContext = map[string]string{strings.Repeat("k", 65): "v"} },
		"trace value 513":     func(s *jqv1.JobSpec) { s.TraceContext = map[string]string{"tracestate": strings.Repeat("v", 513)} },
		"trace value newline": func(s *jqv1.JobSpec) { s.TraceContext = map[string]string{"tracestate": "a\nb"} },
		"trace 2 KiB in all": func(s *jqv1.JobSpec) {
			s.TraceContext = many(5, num, func(int) string { return strings.Repeat("v", 450) })
		},
		"trace 8 x 400 KB": func(s *jqv1.JobSpec) {
			s.TraceContext = many(8, num, func(int) string { return huge })
		},
	}
	for name, change := range cases {
		_, err := b.cl.Jobs.SubmitJob(b.ctx, connect.NewRequest(&jqv1.SubmitJobRequest{Job: spec(change)}))
		requireRefused(t, connect.CodeInvalidArgument, err, name)
		require.NotContains(t, err.Error(), strings.Repeat("x", 64), "%s: the input is not echoed", name)

		// In a batch, one bad spec refuses the whole batch and names its index.
		_, err = b.cl.Jobs.SubmitJobs(b.ctx, connect.NewRequest(&jqv1.SubmitJobsRequest{
			Jobs: []*jqv1.JobSpec{spec(func(*jqv1.JobSpec) {}), spec(change)},
		}))
		requireRefused(t, connect.CodeInvalidArgument, err, name)
		require.ErrorContains(t, err, "jobs[1]", name)
	}
	_, err := b.cl.Jobs.SubmitJob(b.ctx, connect.NewRequest(&jqv1.SubmitJobRequest{}))
	requireRefused(t, connect.CodeInvalidArgument, err, "no spec")
	_, err = b.cl.Jobs.SubmitJobs(b.ctx, connect.NewRequest(&jqv1.SubmitJobsRequest{}))
	requireRefused(t, connect.CodeInvalidArgument, err, "empty batch")
	require.Zero(t, b.jobCount(), "nothing was stored")

	// Every bound itself is accepted.
	_, err = b.cl.Jobs.SubmitJob(b.ctx, connect.NewRequest(&jqv1.SubmitJobRequest{Job: spec(func(s *jqv1.JobSpec) {
		s.Type = strings.Repeat("t", 128)
		s.IdempotencyKey = strings.Repeat("k", 255)
		s.Labels = many(64, func(i int) string { return fmt.Sprintf("%063d", i) }, func(int) string { return strings.Repeat("é", 127) })
		s.TraceContext = many(4, func(i int) string { return fmt.Sprintf("%064d", i) }, func(int) string { return strings.Repeat("v", 448) })
		s.MaxRetries = ptr(int32(100))
		s.Ttl, s.Timeout = durationpb.New(store.MaxDuration), durationpb.New(24*time.Hour)
	})}))
	require.NoError(t, err)
	require.Equal(t, 1, b.jobCount())
}

func TestListJobsRefusals(t *testing.T) {
	b := setup(t)
	for range 3 {
		b.insert(store.JobInsertParams{Labels: map[string]string{"team": "a"}})
	}
	list := func(req *jqv1.ListJobsRequest) (*jqv1.ListJobsResponse, error) {
		res, err := b.cl.Jobs.ListJobs(b.ctx, connect.NewRequest(req))
		if err != nil {
			return nil, err
		}
		return res.Msg, nil
	}
	pending := []jqv1.JobState{jqv1.JobState_JOB_STATE_PENDING}
	for name, req := range map[string]*jqv1.ListJobsRequest{
		"unspecified state": {States: []jqv1.JobState{jqv1.JobState_JOB_STATE_UNSPECIFIED}},
		"unknown state":     {States: []jqv1.JobState{jqv1.JobState_JOB_STATE_PENDING, 99}},
		"negative state":    {States: []jqv1.JobState{-1}},
		"page_size":         {PageSize: 1001},
		"negative size":     {PageSize: -1},
		"queue name":        {Queue: "Bad Queue"},
		"label filter key":  {Labels: map[string]string{strings.Repeat("k", 64): "v"}},
		"label filter NUL":  {Labels: map[string]string{"k": "\x00"}},
		"page_token":        {PageToken: "garbage"},
	} {
		_, err := list(req)
		requireRefused(t, connect.CodeInvalidArgument, err, name)
	}

	// A page token continues only the listing it came from.
	first, err := list(&jqv1.ListJobsRequest{Queue: b.queue, States: pending, PageSize: 1})
	require.NoError(t, err)
	token := first.GetNextPageToken()
	require.NotEmpty(t, token)
	for name, req := range map[string]*jqv1.ListJobsRequest{
		"other queue":  {Queue: "default", States: pending},
		"no queue":     {States: pending},
		"other states": {Queue: b.queue, States: []jqv1.JobState{jqv1.JobState_JOB_STATE_DONE}},
		"no states":    {Queue: b.queue},
		"labels":       {Queue: b.queue, States: pending, Labels: map[string]string{"team": "a"}},
		"newline":      {Queue: b.queue, States: pending, PageToken: token[:10] + "\n" + token[10:]},
		"CRLF":         {Queue: b.queue, States: pending, PageToken: token + "\r\n"},
	} {
		if req.PageToken == "" {
			req.PageToken = token
		}
		_, err := list(req)
		requireRefused(t, connect.CodeInvalidArgument, err, name)
	}
	next, err := list(&jqv1.ListJobsRequest{Queue: b.queue, States: append(pending, pending...), PageSize: 5, PageToken: token})
	require.NoError(t, err, "the same filters (a state repeated) and another page size continue the listing")
	require.Len(t, next.GetJobs(), 2)
	require.NotEqual(t, first.GetJobs()[0].GetId(), next.GetJobs()[0].GetId())
}

// Over Connect's JSON, an enum value name the schema does not know would be dropped by the default
// codec (and the filter with it); the server refuses it. Unknown fields are still ignored.
func TestListJobsJSONUnknownEnum(t *testing.T) {
	b := setup(t)
	b.insert(store.JobInsertParams{})
	srv := httptest.NewServer(apiserver.New(apiserver.Options{Store: testStore, Log: zaptest.NewLogger(t), Version: buildinfo.Get()}))
	t.Cleanup(srv.Close)
	post := func(body, contentType string) (int, map[string]any) {
		t.Helper()
		req, err := http.NewRequestWithContext(b.ctx, http.MethodPost, srv.URL+"/jq.v1.JobService/ListJobs", strings.NewReader(body))
		require.NoError(t, err)
		req.Header.Set("Content-Type", contentType)
		resp, err := srv.Client().Do(req)
		require.NoError(t, err)
		defer resp.Body.Close()
		raw, err := io.ReadAll(resp.Body)
		require.NoError(t, err)
		var out map[string]any
		require.NoError(t, json.Unmarshal(raw, &out), "%s", raw)
		return resp.StatusCode, out
	}
	for _, body := range []string{
		`{"queue":"` + b.queue + `","states":["JOB_STATE_BOGUS"]}`,
		`{"queue":"` + b.queue + `","states":["JOB_STATE_PENDING","` + strings.Repeat("X", 10000) + `"]}`,
		`{"queue":"` + b.queue + `","states":[99]}`,
		`{"queue":"` + b.queue + `","states":["JOB_STATE_UNSPECIFIED"]}`,
		`{"queue":"` + b.queue + `","states":`,
	} {
		status, out := post(body, "application/json; charset=utf-8")
		require.Equal(t, http.StatusBadRequest, status, body)
		plain, _ := post(body, "application/json")
		require.Equal(t, status, plain, "both names of the JSON codec")
		require.Equal(t, "invalid_argument", out["code"], body)
		msg, _ := out["message"].(string)
		require.LessOrEqual(t, len(msg), 200, msg)
		require.NotContains(t, msg, "XXXXXXXXXXXXXXXXXXXXXXXXXXXXXXXXXXXXXXXXXXXXXXXXXXXXXXX")
	}
	status, out := post(`{"queue":"`+b.queue+`","states":["JOB_STATE_PENDING"],"fieldFromTheFuture":{"x":1}}`, "application/json")
	require.Equal(t, http.StatusOK, status, "%v", out)
	require.Len(t, out["jobs"], 1)
}

func TestCreateQueueRefusals(t *testing.T) {
	b := setup(t)
	name := "api-" + uuid.NewString()[:8]
	for label, req := range map[string]*jqv1.CreateQueueRequest{
		"name":               {Name: "Bad Name"},
		"name huge":          {Name: strings.Repeat("q", 400<<10)},
		"max_retries 101":    {Name: name, MaxRetries: ptr(int32(101))},
		"max_retries -1":     {Name: name, MaxRetries: ptr(int32(-1))},
		"ttl zero":           {Name: name, Ttl: durationpb.New(0)},
		"ttl over a year":    {Name: name, Ttl: durationpb.New(store.MaxDuration + time.Second)},
		"backoff_base zero":  {Name: name, BackoffBase: durationpb.New(0)},
		"backoff_max zero":   {Name: name, BackoffMax: durationpb.New(0)},
		"backoff_max < base": {Name: name, BackoffBase: durationpb.New(time.Minute), BackoffMax: durationpb.New(time.Second)},
		"weight 1001":        {Name: name, PriorityWeights: map[int32]int32{9: 1001}},
		"weight 0":           {Name: name, PriorityWeights: map[int32]int32{9: 0}},
		"priority 10":        {Name: name, PriorityWeights: map[int32]int32{10: 1}},
	} {
		_, err := b.cl.Queues.CreateQueue(b.ctx, connect.NewRequest(req))
		requireRefused(t, connect.CodeInvalidArgument, err, label)
	}
	_, err := b.store.QueueGet(b.ctx, name)
	require.ErrorIs(t, err, queue.ErrQueueNotFound, "nothing was created")

	res, err := b.cl.Queues.CreateQueue(b.ctx, connect.NewRequest(&jqv1.CreateQueueRequest{
		Name: name, MaxRetries: ptr(int32(100)), PriorityWeights: map[int32]int32{9: 1000},
	}))
	require.NoError(t, err)
	require.EqualValues(t, 100, res.Msg.GetQueue().GetMaxRetries())
}

// UpdateQueue changes only the settings it names, refuses what create refuses (nothing changes),
// and NOT_FOUND for a queue that does not exist.
func TestUpdateQueue(t *testing.T) {
	b := setup(t)
	name := "upd-" + uuid.NewString()[:8]
	_, err := b.cl.Queues.CreateQueue(b.ctx, connect.NewRequest(&jqv1.CreateQueueRequest{Name: name, Ttl: durationpb.New(time.Hour)}))
	require.NoError(t, err)
	before, err := b.store.QueueGet(b.ctx, name)
	require.NoError(t, err)
	for label, req := range map[string]*jqv1.UpdateQueueRequest{
		"name":               {Name: "Bad Name", MaxRetries: ptr(int32(1))},
		"max_retries 101":    {Name: name, MaxRetries: ptr(int32(101))},
		"ttl negative":       {Name: name, Ttl: durationpb.New(-time.Second)},
		"ttl over a year":    {Name: name, Ttl: durationpb.New(store.MaxDuration + time.Second)},
		"backoff_max < base": {Name: name, BackoffBase: durationpb.New(time.Hour)},
		"weight 0":           {Name: name, PriorityWeights: &jqv1.PriorityWeights{Weights: map[int32]int32{9: 0}}},
		"priority 10":        {Name: name, PriorityWeights: &jqv1.PriorityWeights{Weights: map[int32]int32{10: 1}}},
		"max_wait 1us":       {Name: name, MaxWait: durationpb.New(time.Microsecond)},
	} {
		_, err := b.cl.Queues.UpdateQueue(b.ctx, connect.NewRequest(req))
		requireRefused(t, connect.CodeInvalidArgument, err, label)
	}
	after, err := b.store.QueueGet(b.ctx, name)
	require.NoError(t, err)
	require.Equal(t, before, after, "nothing changed")

	res, err := b.cl.Queues.UpdateQueue(b.ctx, connect.NewRequest(&jqv1.UpdateQueueRequest{Name: name, MaxRetries: ptr(int32(9)),
		PriorityWeights: &jqv1.PriorityWeights{Weights: map[int32]int32{9: 3, 0: 1}}, MaxWait: durationpb.New(time.Minute)}))
	require.NoError(t, err)
	q := res.Msg.GetQueue()
	require.EqualValues(t, 9, q.GetMaxRetries())
	require.Equal(t, map[int32]int32{9: 3, 0: 1}, q.GetPriorityWeights())
	require.Equal(t, time.Minute, q.GetMaxWait().AsDuration())
	require.Equal(t, time.Hour, q.GetTtl().AsDuration(), "not named: kept")

	res, err = b.cl.Queues.UpdateQueue(b.ctx, connect.NewRequest(&jqv1.UpdateQueueRequest{Name: name, Ttl: durationpb.New(0),
		PriorityWeights: &jqv1.PriorityWeights{}}))
	require.NoError(t, err)
	require.Nil(t, res.Msg.GetQueue().GetTtl(), "zero removes the TTL")
	require.Empty(t, res.Msg.GetQueue().GetPriorityWeights(), "empty weights: strict priority")

	_, err = b.cl.Queues.UpdateQueue(b.ctx, connect.NewRequest(&jqv1.UpdateQueueRequest{Name: "nosuch-" + name, MaxRetries: ptr(int32(1))}))
	requireRefused(t, connect.CodeNotFound, err, "unknown queue")
}

func TestRegisterWorkerRefusals(t *testing.T) {
	b := setup(t)
	id := "w-" + uuid.NewString()[:12]
	req := func(change func(r *jqv1.RegisterWorkerRequest)) *jqv1.RegisterWorkerRequest {
		r := &jqv1.RegisterWorkerRequest{WorkerId: id, Hostname: "host-1", Concurrency: 2, Queues: []string{b.queue}, Version: "v1"}
		change(r)
		return r
	}
	queues := func(n int) []string {
		out := make([]string, n)
		for i := range out {
			out[i] = fmt.Sprint("q", i)
		}
		return out
	}
	for name, change := range map[string]func(r *jqv1.RegisterWorkerRequest){
		"id empty":          func(r *jqv1.RegisterWorkerRequest) { r.WorkerId = "" },
		"id 256 bytes":      func(r *jqv1.RegisterWorkerRequest) { r.WorkerId = strings.Repeat("w", 256) },
		"id space":          func(r *jqv1.RegisterWorkerRequest) { r.WorkerId = id + " 2" },
		"id NUL":            func(r *jqv1.RegisterWorkerRequest) { r.WorkerId = id + "\x00" },
		"id non-ASCII":      func(r *jqv1.RegisterWorkerRequest) { r.WorkerId = id + "é" },
		"hostname NUL":      func(r *jqv1.RegisterWorkerRequest) { r.Hostname = "host\x00" },
		"hostname escape":   func(r *jqv1.RegisterWorkerRequest) { r.Hostname = "\x1b]0;pwned\x07" },
		"hostname C1":       func(r *jqv1.RegisterWorkerRequest) { r.Hostname = "host\u009b31m" },
		"hostname 256":      func(r *jqv1.RegisterWorkerRequest) { r.Hostname = strings.Repeat("h", 256) },
		"version 129":       func(r *jqv1.RegisterWorkerRequest) { r.Version = strings.Repeat("v", 129) },
		"version newline":   func(r *jqv1.RegisterWorkerRequest) { r.Version = "v1\nv2" },
		"concurrency 0":     func(r *jqv1.RegisterWorkerRequest) { r.Concurrency = 0 },
		"concurrency 1025":  func(r *jqv1.RegisterWorkerRequest) { r.Concurrency = 1025 },
		"no queues":         func(r *jqv1.RegisterWorkerRequest) { r.Queues = nil },
		"65 queues":         func(r *jqv1.RegisterWorkerRequest) { r.Queues = queues(65) },
		"bad queue":         func(r *jqv1.RegisterWorkerRequest) { r.Queues = []string{b.queue, "Bad Queue"} },
		"duplicate queue":   func(r *jqv1.RegisterWorkerRequest) { r.Queues = []string{b.queue, "default", b.queue} },
		"label key 64":      func(r *jqv1.RegisterWorkerRequest) { r.Labels = map[string]string{strings.Repeat("k", 64): "v"} },
		"label value NUL":   func(r *jqv1.RegisterWorkerRequest) { r.Labels = map[string]string{"k": "\x00"} },
		"label value 256 B": func(r *jqv1.RegisterWorkerRequest) { r.Labels = map[string]string{"k": strings.Repeat("v", 256)} },
	} {
		_, err := b.cl.Workers.RegisterWorker(b.ctx, connect.NewRequest(req(change)))
		requireRefused(t, connect.CodeInvalidArgument, err, name)
	}
	_, err := b.store.WorkerGet(b.ctx, id)
	require.ErrorIs(t, err, queue.ErrWorkerNotFound, "nothing was registered")

	_, err = b.cl.Workers.RegisterWorker(b.ctx, connect.NewRequest(req(func(r *jqv1.RegisterWorkerRequest) {
		r.Queues, r.Concurrency = queues(64), 1024
		r.Hostname, r.Version = strings.Repeat("h", 255), strings.Repeat("v", 128)
	})))
	require.NoError(t, err, "every bound itself is accepted")

	// A malformed worker id is INVALID_ARGUMENT in every call that names one, never a database error.
	bad := "w\x00"
	_, err = b.cl.Workers.Heartbeat(b.ctx, connect.NewRequest(&jqv1.HeartbeatRequest{WorkerId: bad}))
	requireRefused(t, connect.CodeInvalidArgument, err, "heartbeat")
	_, err = b.cl.Workers.DrainWorker(b.ctx, connect.NewRequest(&jqv1.DrainWorkerRequest{WorkerId: bad}))
	requireRefused(t, connect.CodeInvalidArgument, err, "drain")
	_, err = b.cl.Workers.ShutdownWorker(b.ctx, connect.NewRequest(&jqv1.ShutdownWorkerRequest{WorkerId: bad}))
	requireRefused(t, connect.CodeInvalidArgument, err, "shutdown")
	_, err = b.cl.Workers.DeregisterWorker(b.ctx, connect.NewRequest(&jqv1.DeregisterWorkerRequest{WorkerId: bad}))
	requireRefused(t, connect.CodeInvalidArgument, err, "deregister")
	_, err = b.cl.Workers.AckJobs(b.ctx, connect.NewRequest(&jqv1.AckJobsRequest{WorkerId: bad, Leases: []*jqv1.JobLease{{JobId: uuid.NewString(), Attempt: 1}}}))
	requireRefused(t, connect.CodeInvalidArgument, err, "ack")
}

// A worker the server does not know gets NOT_FOUND for its acks and reports (the worker registers
// again), and its leases change nothing.
func TestAckAndReportFromUnknownWorker(t *testing.T) {
	b := setupEngine(t, engine.Options{})
	w := b.register(1)
	j := b.lease(w, b.insert(store.JobInsertParams{}), false)
	stranger := "w-" + uuid.NewString()[:12]
	lease := []*jqv1.JobLease{{JobId: j.ID, Attempt: int32(j.Attempt)}}

	_, err := b.cl.Workers.AckJobs(b.ctx, connect.NewRequest(&jqv1.AckJobsRequest{WorkerId: stranger, Leases: lease}))
	requireRefused(t, connect.CodeNotFound, err, "ack")
	_, err = b.cl.Workers.ReportJobs(b.ctx, connect.NewRequest(&jqv1.ReportJobsRequest{
		WorkerId: stranger,
		Reports: []*jqv1.JobReport{{
			JobId: j.ID, Attempt: int32(j.Attempt),
			Outcome: &jqv1.JobReport_Success{Success: &jqv1.JobSuccess{}},
		}},
	}))
	requireRefused(t, connect.CodeNotFound, err, "report")
	got, err := b.store.JobGet(b.ctx, j.ID)
	require.NoError(t, err)
	require.Equal(t, queue.StateAssigned, got.State, "nothing changed")

	// The worker that holds the job is known, and its ack applies.
	res, err := b.cl.Workers.AckJobs(b.ctx, connect.NewRequest(&jqv1.AckJobsRequest{WorkerId: w, Leases: lease}))
	require.NoError(t, err)
	require.True(t, res.Msg.GetResults()[0].GetOk())
	// A known worker's stale lease is a per-lease verdict, not NOT_FOUND.
	other := b.register(1)
	res, err = b.cl.Workers.AckJobs(b.ctx, connect.NewRequest(&jqv1.AckJobsRequest{WorkerId: other, Leases: lease}))
	require.NoError(t, err)
	require.False(t, res.Msg.GetResults()[0].GetOk())
}

func ptr[T any](v T) *T { return &v }
