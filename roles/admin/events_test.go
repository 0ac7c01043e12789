package admin

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"connectrpc.com/connect"
	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"go.yaml.in/yaml/v3"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/jq-dev/jq/api/apierr"
	jqv1 "github.com/jq-dev/jq/api/gen/jq/v1"
	"github.com/jq-dev/jq/api/gen/jq/v1/jqv1connect"
	"github.com/jq-dev/jq/config"
	"github.com/jq-dev/jq/queue"
	"github.com/jq-dev/jq/store/kafka"
)

var t0 = time.Date(2030, 1, 2, 15, 4, 5, 123_000_000, time.UTC)

func ev(job, q string, seq int64, from, to jqv1.JobState, at time.Time) *jqv1.JobEvent {
	return &jqv1.JobEvent{JobId: job, Queue: q, Seq: seq, FromState: from, ToState: to, Timestamp: timestamppb.New(at),
		Reason: "assigned", WorkerId: "w-1", Attempt: int32(seq), Type: "noop"}
}

// syncBuffer is written by the command while the test reads it.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

func (s *syncBuffer) lines() []string {
	out := strings.TrimSpace(s.String())
	if out == "" {
		return nil
	}
	return strings.Split(out, "\n")
}

func testEnv(ctx context.Context, output string) (*runEnv, *syncBuffer, *syncBuffer) {
	stdout, stderr := &syncBuffer{}, &syncBuffer{}
	cfg := config.Default()
	return &runEnv{Env: Env{Config: &cfg, Stdout: stdout, Stderr: stderr}, ctx: ctx, now: time.Now,
		globals: &Globals{Output: output, Timeout: 5 * time.Second, ServerAddr: "127.0.0.1:1"}}, stdout, stderr
}

func TestEventLineTable(t *testing.T) {
	t.Parallel()
	re, out, _ := testEnv(context.Background(), "table")
	p := &eventPrinter{re: re}
	p.print(ev("6f1c2b8e-8a4e-4d43-9a3c-0d5e8f7a1b2c", "emails", 2, jqv1.JobState_JOB_STATE_PENDING, jqv1.JobState_JOB_STATE_ASSIGNED, t0))
	sub := ev("6f1c2b8e-8a4e-4d43-9a3c-0d5e8f7a1b2c", "emails", 1, jqv1.JobState_JOB_STATE_UNSPECIFIED, jqv1.JobState_JOB_STATE_PENDING, t0)
	sub.WorkerId, sub.Reason, sub.Attempt = "", "submitted", 0
	p.print(sub)
	lines := out.lines()
	require.Len(t, lines, 3, "a header, then one line per event")
	require.Equal(t, []string{"TIME", "JOB", "QUEUE", "FROM→TO", "REASON", "WORKER", "ATTEMPT"}, strings.Fields(lines[0]))
	require.Equal(t, []string{"2030-01-02T15:04:05.123Z", "6f1c2b8e-8a4e-4d43-9a3c-0d5e8f7a1b2c", "emails",
		"PENDING→ASSIGNED", "assigned", "w-1", "2"}, strings.Fields(lines[1]))
	require.Equal(t, []string{"2030-01-02T15:04:05.123Z", "6f1c2b8e-8a4e-4d43-9a3c-0d5e8f7a1b2c", "emails",
		"-→PENDING", "submitted", "-", "0"}, strings.Fields(lines[2]))
	require.Equal(t, strings.Index(lines[0], "REASON"), strings.Index(lines[1], "assigned"), "columns align")
	require.Equal(t, strings.Index(lines[1], "assigned"), strings.Index(lines[2], "submitted"), "columns align")

	// With colour the to-state is painted and the columns still align.
	re.color = true
	colored := (&eventPrinter{re: re}).line(ev("j", "q", 2, jqv1.JobState_JOB_STATE_PENDING, jqv1.JobState_JOB_STATE_ASSIGNED, t0))
	require.Contains(t, colored, "\x1b[36mASSIGNED\x1b[0m")
	re.color = false
	plain := (&eventPrinter{re: re}).line(ev("j", "q", 2, jqv1.JobState_JOB_STATE_PENDING, jqv1.JobState_JOB_STATE_ASSIGNED, t0))
	require.Equal(t, strings.Index(plain, "assigned")+len("\x1b[36m\x1b[0m"), strings.Index(colored, "assigned"))
}

func TestEventLineJSONAndYAML(t *testing.T) {
	t.Parallel()
	re, out, _ := testEnv(context.Background(), "json")
	p := &eventPrinter{re: re}
	e := ev("j-1", "emails", 3, jqv1.JobState_JOB_STATE_RUNNING, jqv1.JobState_JOB_STATE_DONE, t0)
	p.print(e)
	p.print(e)
	lines := out.lines()
	require.Len(t, lines, 2, "one object per line, no header")
	var m map[string]any
	require.NoError(t, json.Unmarshal([]byte(lines[0]), &m))
	for _, f := range []string{"job_id", "queue", "seq", "from_state", "to_state", "timestamp", "worker_id", "reason", "attempt", "type"} {
		require.Contains(t, m, f)
	}
	require.Equal(t, "JOB_STATE_DONE", m["to_state"])
	require.Equal(t, "2030-01-02T15:04:05.123Z", m["timestamp"])

	re, out, _ = testEnv(context.Background(), "yaml")
	(&eventPrinter{re: re}).print(e)
	(&eventPrinter{re: re}).print(e)
	docs := strings.Split(out.String(), "---\n")
	require.Len(t, docs, 3)
	var y map[string]any
	require.NoError(t, yaml.Unmarshal([]byte(docs[1]), &y))
	require.Equal(t, "j-1", y["job_id"])
}

func TestEventFilter(t *testing.T) {
	t.Parallel()
	e := ev("6F1C2B8E-8a4e-4d43-9a3c-0d5e8f7a1b2c", "emails", 1, 0, jqv1.JobState_JOB_STATE_PENDING, t0)
	require.True(t, eventFilter{}.match(e))
	require.True(t, eventFilter{queue: "emails"}.match(e))
	require.False(t, eventFilter{queue: "sms"}.match(e))
	require.True(t, eventFilter{job: "6f1c2b8e-8a4e-4d43-9a3c-0d5e8f7a1b2c"}.match(e), "job ids compare in any case")
	require.False(t, eventFilter{job: "00000000-8a4e-4d43-9a3c-0d5e8f7a1b2c"}.match(e))
	require.False(t, eventFilter{queue: "sms", job: "6f1c2b8e-8a4e-4d43-9a3c-0d5e8f7a1b2c"}.match(e))
}

func TestSeqsDropDuplicates(t *testing.T) {
	t.Parallel()
	s := newSeqs()
	require.True(t, s.fresh(ev("a", "q", 1, 0, 0, t0)))
	require.True(t, s.fresh(ev("a", "q", 2, 0, 0, t0)))
	require.True(t, s.fresh(ev("b", "q", 1, 0, 0, t0)))
	require.False(t, s.fresh(ev("a", "q", 2, 0, 0, t0)), "a redelivery")
	require.False(t, s.fresh(ev("a", "q", 1, 0, 0, t0)))
	require.True(t, s.fresh(ev("a", "q", 3, 0, 0, t0)))
}

// fakeStream serves messages, then blocks until ctx ends or returns end.
type fakeStream struct {
	msgs [][]byte
	end  error
}

func (f *fakeStream) Next(ctx context.Context) ([]byte, error) {
	if len(f.msgs) > 0 {
		m := f.msgs[0]
		f.msgs = f.msgs[1:]
		return m, nil
	}
	if f.end != nil {
		return nil, f.end
	}
	<-ctx.Done()
	return nil, ctx.Err()
}

func (f *fakeStream) Close() error { return nil }

func marshal(t *testing.T, e *jqv1.JobEvent) []byte {
	t.Helper()
	b, err := proto.Marshal(e)
	require.NoError(t, err)
	return b
}

func TestFollowStream(t *testing.T) {
	t.Parallel()
	re, out, stderr := testEnv(context.Background(), "json")
	re.globals.Output = "table"
	a1 := ev("a", "emails", 1, 0, jqv1.JobState_JOB_STATE_PENDING, t0)
	a2 := ev("a", "emails", 2, jqv1.JobState_JOB_STATE_PENDING, jqv1.JobState_JOB_STATE_ASSIGNED, t0)
	b1 := ev("b", "sms", 1, 0, jqv1.JobState_JOB_STATE_PENDING, t0)
	boom := errors.New("broker gone")
	s := &fakeStream{msgs: [][]byte{marshal(t, a1), []byte("\xff not protobuf"), marshal(t, b1), marshal(t, a2), marshal(t, a1)}, end: boom}
	p := &eventPrinter{re: re, filter: eventFilter{queue: "emails"}}
	require.ErrorIs(t, followStream(context.Background(), s, p, newSeqs()), boom)
	lines := out.lines()
	require.Len(t, lines, 3, "header, a1, a2: b1 is filtered, the redelivered a1 dropped: %q", lines)
	require.Contains(t, lines[1], "-→PENDING")
	require.Contains(t, lines[2], "PENDING→ASSIGNED")
	require.Contains(t, stderr.String(), "skipped a message that is not a jq.v1.JobEvent")
}

// fakeJobs is the API as the poller sees it: jobs with their events.
type fakeJobs struct {
	jqv1connect.JobServiceClient
	mu     sync.Mutex
	jobs   map[string]*jqv1.Job
	events map[string][]*jqv1.JobEvent
	calls  int
}

func newFakeJobs() *fakeJobs {
	return &fakeJobs{jobs: map[string]*jqv1.Job{}, events: map[string][]*jqv1.JobEvent{}}
}

// move appends an event to the job (creating it) and updates the job as the server does.
func (f *fakeJobs) move(id, q string, to jqv1.JobState, at time.Time) {
	f.mu.Lock()
	defer f.mu.Unlock()
	j := f.jobs[id]
	from := jqv1.JobState_JOB_STATE_UNSPECIFIED
	if j == nil {
		j = &jqv1.Job{Id: id, Queue: q, CreatedAt: timestamppb.New(at)}
		f.jobs[id] = j
	} else {
		from = j.GetState()
	}
	j.State, j.UpdatedAt = to, timestamppb.New(at)
	f.events[id] = append(f.events[id], ev(id, q, int64(len(f.events[id])+1), from, to, at))
}

func (f *fakeJobs) ListJobs(_ context.Context, req *connect.Request[jqv1.ListJobsRequest]) (*connect.Response[jqv1.ListJobsResponse], error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.calls++
	var out []*jqv1.Job
	for _, j := range f.jobs {
		if req.Msg.GetQueue() != "" && j.GetQueue() != req.Msg.GetQueue() {
			continue
		}
		if len(req.Msg.GetStates()) > 0 && !containsState(req.Msg.GetStates(), j.GetState()) {
			continue
		}
		out = append(out, proto.CloneOf(j))
	}
	// The window: only the newest jobs (here: those whose id sorts last, "job-9" newest).
	slicesSortJobs(out)
	if n := int(req.Msg.GetPageSize()); len(out) > n {
		out = out[:n]
	}
	return connect.NewResponse(&jqv1.ListJobsResponse{Jobs: out}), nil
}

func containsState(states []jqv1.JobState, s jqv1.JobState) bool {
	for _, x := range states {
		if x == s {
			return true
		}
	}
	return false
}

func slicesSortJobs(jobs []*jqv1.Job) {
	for i := range jobs {
		for k := i + 1; k < len(jobs); k++ {
			if jobs[k].GetCreatedAt().AsTime().After(jobs[i].GetCreatedAt().AsTime()) {
				jobs[i], jobs[k] = jobs[k], jobs[i]
			}
		}
	}
}

func (f *fakeJobs) ListJobEvents(_ context.Context, req *connect.Request[jqv1.ListJobEventsRequest]) (*connect.Response[jqv1.ListJobEventsResponse], error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.calls++
	evs, ok := f.events[req.Msg.GetJobId()]
	if !ok {
		return nil, apierr.New(queue.ErrJobNotFound, fmt.Sprintf("job %s not found", req.Msg.GetJobId()))
	}
	out := make([]*jqv1.JobEvent, len(evs))
	for i, e := range evs {
		out[i] = proto.CloneOf(e)
	}
	return connect.NewResponse(&jqv1.ListJobEventsResponse{Events: out}), nil
}

func keysOf(evs []*jqv1.JobEvent) []string {
	out := make([]string, len(evs))
	for i, e := range evs {
		out[i] = fmt.Sprintf("%s/%d", e.GetJobId(), e.GetSeq())
	}
	return out
}

func TestPollerQueue(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	f := newFakeJobs()
	at := func(s int) time.Time { return t0.Add(time.Duration(s) * time.Second) }
	f.move("old", "q", jqv1.JobState_JOB_STATE_PENDING, at(0))
	f.move("old", "q", jqv1.JobState_JOB_STATE_ASSIGNED, at(1))
	f.move("other", "r", jqv1.JobState_JOB_STATE_PENDING, at(1))
	p := newPoller(f, "q", "", time.Second)

	evs, err := p.poll(ctx)
	require.NoError(t, err)
	require.Empty(t, evs, "the first poll learns where jobs stand")

	f.move("old", "q", jqv1.JobState_JOB_STATE_RUNNING, at(2))
	f.move("new", "q", jqv1.JobState_JOB_STATE_PENDING, at(3))
	f.move("new", "q", jqv1.JobState_JOB_STATE_ASSIGNED, at(4))
	f.move("other", "r", jqv1.JobState_JOB_STATE_ASSIGNED, at(4))
	evs, err = p.poll(ctx)
	require.NoError(t, err)
	require.Equal(t, []string{"old/3", "new/1", "new/2"}, keysOf(evs), "only what is new, in time order, of the queue")

	evs, err = p.poll(ctx)
	require.NoError(t, err)
	require.Empty(t, evs, "nothing moved")
	before := f.calls
	_, err = p.poll(ctx)
	require.NoError(t, err)
	require.Equal(t, 2, f.calls-before, "an idle poll is two listings, no event reads")

	f.move("old", "q", jqv1.JobState_JOB_STATE_DONE, at(5))
	f.move("new", "q", jqv1.JobState_JOB_STATE_RUNNING, at(6))
	evs, err = p.poll(ctx)
	require.NoError(t, err)
	require.Equal(t, []string{"old/4", "new/3"}, keysOf(evs))
}

// A job that leaves both windows while active is read once more, so its last transition shows.
func TestPollerJobLeavingTheWindows(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	f := newFakeJobs()
	at := func(s int) time.Time { return t0.Add(time.Duration(s) * time.Second) }
	for i := range pollWindow {
		f.move(fmt.Sprintf("done-%04d", i), "q", jqv1.JobState_JOB_STATE_DONE, at(-1))
	}
	// Created before them: outside the window of newest jobs, but in the window of active ones.
	f.move("slow", "q", jqv1.JobState_JOB_STATE_PENDING, at(-2))
	f.jobs["slow"].CreatedAt = timestamppb.New(at(-100))
	f.move("slow", "q", jqv1.JobState_JOB_STATE_ASSIGNED, at(-1))
	p := newPoller(f, "", "", time.Second)
	_, err := p.poll(ctx)
	require.NoError(t, err)

	f.move("slow", "q", jqv1.JobState_JOB_STATE_RUNNING, at(1))
	evs, err := p.poll(ctx)
	require.NoError(t, err)
	require.Equal(t, []string{"slow/3"}, keysOf(evs))
	f.move("slow", "q", jqv1.JobState_JOB_STATE_DONE, at(2))
	evs, err = p.poll(ctx)
	require.NoError(t, err)
	require.Equal(t, []string{"slow/4"}, keysOf(evs), "read once after it left the active window")
	require.NotContains(t, p.watched, "slow", "then forgotten")
}

func TestPollerJob(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	f := newFakeJobs()
	f.move("j", "q", jqv1.JobState_JOB_STATE_PENDING, t0)
	f.move("j", "q", jqv1.JobState_JOB_STATE_ASSIGNED, t0.Add(time.Second))
	p := newPoller(f, "", "j", time.Second)
	evs, err := p.poll(ctx)
	require.NoError(t, err)
	require.Equal(t, []string{"j/1", "j/2"}, keysOf(evs), "the history so far first")
	f.move("j", "q", jqv1.JobState_JOB_STATE_RUNNING, t0.Add(2*time.Second))
	evs, err = p.poll(ctx)
	require.NoError(t, err)
	require.Equal(t, []string{"j/3"}, keysOf(evs))

	_, err = newPoller(f, "", "missing", time.Second).poll(ctx)
	require.Equal(t, connect.CodeNotFound, connect.CodeOf(err))
}

func TestEventsTailUsage(t *testing.T) {
	t.Parallel()
	re, _, _ := testEnv(context.Background(), "table")
	err := (&EventsTailCmd{Queue: "Bad Queue", Source: "postgres", Interval: time.Second}).Run(re)
	require.Equal(t, exitUsage, exitCode(err))
	err = (&EventsTailCmd{Source: "postgres"}).Run(re)
	require.Equal(t, exitUsage, exitCode(err))
	err = (&EventsTailCmd{Source: "kafka", Interval: time.Second}).Run(re)
	require.ErrorContains(t, err, "use --source postgres", "no Kafka reader wired")
}

// The Kafka source end to end in-process: kfake as the broker, franz-go producing protobuf events
// as the relay does, the real store/kafka reader. Ctrl-C (ctx) ends the command without error.
func TestEventsTailFromKafka(t *testing.T) {
	t.Parallel()
	k, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.SeedTopics(3, "jq.job-events"))
	require.NoError(t, err)
	defer k.Close()
	brokers := k.ListenAddrs()

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	re, out, _ := testEnv(ctx, "json")
	re.Config.Kafka.Brokers = brokers
	opened := make(chan struct{})
	cmd := &EventsTailCmd{Queue: "emails", Source: "kafka", Interval: time.Second,
		OpenKafka: func(ctx context.Context, k config.Kafka) (EventStream, error) {
			defer close(opened)
			return kafkastore.NewTail(ctx, kafkastore.TailConfig{Brokers: k.Brokers, Topic: k.TopicEvents})
		}}
	done := make(chan error, 1)
	go func() { done <- cmd.Run(re) }()
	<-opened

	cl, err := kgo.NewClient(kgo.SeedBrokers(brokers...))
	require.NoError(t, err)
	defer cl.Close()
	var want []string
	for i := range 10 {
		q := "emails"
		if i%3 == 0 {
			q = "sms"
		} else {
			want = append(want, fmt.Sprintf("job-%d", i))
		}
		e := ev(fmt.Sprintf("job-%d", i), q, 1, 0, jqv1.JobState_JOB_STATE_PENDING, t0)
		rec := &kgo.Record{Topic: "jq.job-events", Key: []byte(e.GetJobId()), Value: marshal(t, e)}
		require.NoError(t, cl.ProduceSync(ctx, rec, rec).FirstErr(), "each event twice: at least once")
	}
	require.Eventually(t, func() bool { return len(out.lines()) >= len(want) }, 20*time.Second, 10*time.Millisecond)
	cancel()
	require.NoError(t, <-done, "Ctrl-C is success")
	var got []string
	for _, l := range out.lines() {
		var m map[string]any
		require.NoError(t, json.Unmarshal([]byte(l), &m))
		require.Equal(t, "emails", m["queue"])
		got = append(got, m["job_id"].(string))
	}
	require.ElementsMatch(t, want, got, "every emails event once")
}
