package conformance_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"connectrpc.com/connect"
	"github.com/stretchr/testify/require"
	"google.golang.org/protobuf/types/known/durationpb"

	jqv1 "github.com/jq-dev/jq/api/gen/jq/v1"
)

var langs = []lang{
	{name: "go", argv: func(gw string) []string { return []string{gw} }},
	{name: "typescript", argv: func(string) []string {
		return []string{"node", filepath.Join(repo, "sdk", "typescript", "dist", "conformance", "worker.js")}
	}},
	{name: "python", argv: func(string) []string {
		return []string{"python3", filepath.Join(repo, "sdk", "python", "conformance_worker.py")}
	}},
}

type scenario struct {
	name string
	run  func(t *testing.T, s *server, l lang) string // a note for the table, or ""
}

var scenarios = []scenario{
	{"success", success},
	{"failure then retry", failureThenRetry},
	{"permanent failure", permanentFailure},
	{"timeout", timeout},
	{"cancel while running", cancelWhileRunning},
	{"progress", progress},
	{"heartbeat loss, self-fencing", selfFencing},
	{"report after the lease moved refused", leaseMoved},
	{"graceful shutdown, jobs in flight", gracefulShutdown},
	{"server restart mid-stream", serverRestart},
}

// TestConformance runs every scenario against every worker implementation and logs the table.
func TestConformance(t *testing.T) {
	if os.Getenv("JQ_CONFORMANCE") == "" {
		t.Skip("the worker conformance suite needs the SDKs' runtimes and the TypeScript build: run it with `task test:sdks` (JQ_CONFORMANCE=1)")
	}
	binaries(t)
	var mu sync.Mutex
	table := map[string]map[string]string{}
	record := func(sc, lg, v string) {
		mu.Lock()
		defer mu.Unlock()
		if table[sc] == nil {
			table[sc] = map[string]string{}
		}
		table[sc][lg] = v
	}
	var run []string
	t.Run("lang", func(t *testing.T) {
		for _, l := range langs {
			if sel := os.Getenv("JQ_CONFORMANCE_LANGS"); sel != "" && !slices.Contains(strings.Split(sel, ","), l.name) {
				continue
			}
			if why := missing(l); why != "" {
				t.Logf("SKIP %s: %s", l.name, why)
				continue
			}
			run = append(run, l.name)
			t.Run(l.name, func(t *testing.T) {
				t.Parallel()
				s := startServer(t)
				for _, sc := range scenarios {
					note := ""
					ok := t.Run(sc.name, func(t *testing.T) { note = sc.run(t, s, l) })
					v := "pass"
					if !ok {
						v = "FAIL"
					}
					if note != "" {
						v += " (" + note + ")"
					}
					record(sc.name, l.name, v)
				}
			})
		}
	})
	var b strings.Builder
	fmt.Fprintf(&b, "\n| scenario | %s |\n|---|%s\n", strings.Join(run, " | "), strings.Repeat("---|", len(run)))
	for _, sc := range scenarios {
		row := make([]string, len(run))
		for i, lg := range run {
			row[i] = table[sc.name][lg]
		}
		fmt.Fprintf(&b, "| %s | %s |\n", sc.name, strings.Join(row, " | "))
	}
	t.Log(b.String())
}

func missing(l lang) string {
	switch l.name {
	case "python":
		if _, err := exec.LookPath("python3"); err != nil {
			return "python3 is not installed"
		}
	case "typescript":
		if _, err := exec.LookPath("node"); err != nil {
			return "node is not installed"
		}
		if _, err := os.Stat(filepath.Join(repo, "sdk", "typescript", "dist", "conformance", "worker.js")); err != nil {
			return "sdk/typescript is not built (cd sdk/typescript && npm ci && npm run build)"
		}
	}
	return ""
}

// --- helpers -----------------------------------------------------------------------------------

var queueSeq sync.Map

func newQueue(t *testing.T, s *server, l lang) string {
	t.Helper()
	n, _ := queueSeq.LoadOrStore(l.name, new(int))
	p := n.(*int)
	*p++
	name := fmt.Sprintf("conf-%s-%d", l.name, *p)
	_, err := s.cl.Queues.CreateQueue(context.Background(), connect.NewRequest(&jqv1.CreateQueueRequest{
		Name: name, BackoffBase: durationpb.New(200 * time.Millisecond), BackoffMax: durationpb.New(500 * time.Millisecond),
	}))
	require.NoError(t, err)
	return name
}

type spec struct {
	queue, typ, payload string
	maxRetries          *int32
	timeout             time.Duration
	keep                bool
}

func retries(n int32) *int32 { return &n }

func submit(t *testing.T, s *server, sp spec) string {
	t.Helper()
	js := &jqv1.JobSpec{Queue: sp.queue, Type: sp.typ, Payload: []byte(sp.payload), MaxRetries: sp.maxRetries, KeepResult: sp.keep}
	if sp.timeout > 0 {
		js.Timeout = durationpb.New(sp.timeout)
	}
	res, err := s.cl.Jobs.SubmitJob(context.Background(), connect.NewRequest(&jqv1.SubmitJobRequest{Job: js}))
	require.NoError(t, err)
	return res.Msg.GetJobId()
}

func getJob(t *testing.T, s *server, id string) *jqv1.Job {
	t.Helper()
	res, err := s.cl.Jobs.GetJob(context.Background(), connect.NewRequest(&jqv1.GetJobRequest{JobId: id}))
	require.NoError(t, err)
	return res.Msg.GetJob()
}

func events(t *testing.T, s *server, id string) []*jqv1.JobEvent {
	t.Helper()
	res, err := s.cl.Jobs.ListJobEvents(context.Background(), connect.NewRequest(&jqv1.ListJobEventsRequest{JobId: id}))
	require.NoError(t, err)
	return res.Msg.GetEvents()
}

func describe(evs []*jqv1.JobEvent) string {
	var b strings.Builder
	for _, e := range evs {
		fmt.Fprintf(&b, "\n  #%d %s→%s %q attempt %d worker %q", e.GetSeq(), short(e.GetFromState()), short(e.GetToState()),
			e.GetReason(), e.GetAttempt(), e.GetWorkerId())
	}
	return b.String()
}

func short(s jqv1.JobState) string { return strings.TrimPrefix(s.String(), "JOB_STATE_") }

func has(evs []*jqv1.JobEvent, from, to jqv1.JobState, reason string) bool {
	return slices.ContainsFunc(evs, func(e *jqv1.JobEvent) bool {
		return e.GetFromState() == from && e.GetToState() == to && (reason == "" || e.GetReason() == reason)
	})
}

func waitState(t *testing.T, s *server, id string, timeout time.Duration, states ...jqv1.JobState) *jqv1.Job {
	t.Helper()
	var j *jqv1.Job
	eventually(t, timeout, "job "+id+" in "+fmt.Sprint(states), func() error {
		j = getJob(t, s, id)
		if slices.Contains(states, j.GetState()) {
			return nil
		}
		return fmt.Errorf("state %s; events:%s", j.GetState(), describe(events(t, s, id)))
	})
	return j
}

func waitEvent(t *testing.T, s *server, id string, timeout time.Duration, what string, f func(*jqv1.JobEvent) bool) {
	t.Helper()
	eventually(t, timeout, what, func() error {
		evs := events(t, s, id)
		if slices.ContainsFunc(evs, f) {
			return nil
		}
		return fmt.Errorf("events:%s", describe(evs))
	})
}

const (
	pending  = jqv1.JobState_JOB_STATE_PENDING
	assigned = jqv1.JobState_JOB_STATE_ASSIGNED
	running  = jqv1.JobState_JOB_STATE_RUNNING
	done     = jqv1.JobState_JOB_STATE_DONE
	failed   = jqv1.JobState_JOB_STATE_FAILED
	dead     = jqv1.JobState_JOB_STATE_DEAD_LETTERED
)

func workerID(t *testing.T, l lang, role string) string {
	return fmt.Sprintf("conf-%s-%s-%d", l.name, role, time.Now().UnixNano())
}

// --- scenarios ---------------------------------------------------------------------------------

func success(t *testing.T, s *server, l lang) string {
	q := newQueue(t, s, l)
	w := l.start(t, s, q, workerID(t, l, "ok"))
	id := submit(t, s, spec{queue: q, typ: "succeed", keep: true})
	waitState(t, s, id, 30*time.Second, done)
	evs := events(t, s, id)
	var path []jqv1.JobState
	for _, e := range evs {
		path = append(path, e.GetToState())
	}
	require.Equal(t, []jqv1.JobState{pending, assigned, running, done}, path, describe(evs))
	require.Equal(t, w.id, evs[3].GetWorkerId())
	res, err := s.cl.Jobs.GetJobResult(context.Background(), connect.NewRequest(&jqv1.GetJobResultRequest{JobId: id}))
	require.NoError(t, err)
	require.Contains(t, string(res.Msg.GetResult().GetData()), `"lang":"`+l.name+`"`)
	w.stop()
	return ""
}

func failureThenRetry(t *testing.T, s *server, l lang) string {
	q := newQueue(t, s, l)
	w := l.start(t, s, q, workerID(t, l, "retry"))
	id := submit(t, s, spec{queue: q, typ: "fail_once", maxRetries: retries(2)})
	j := waitState(t, s, id, 30*time.Second, done)
	evs := events(t, s, id)
	require.True(t, has(evs, running, failed, "error") || has(evs, assigned, failed, "error"), describe(evs))
	require.True(t, has(evs, failed, pending, ""), describe(evs))
	require.EqualValues(t, 2, j.GetAttempt(), describe(evs))
	w.stop()
	return ""
}

func permanentFailure(t *testing.T, s *server, l lang) string {
	q := newQueue(t, s, l)
	w := l.start(t, s, q, workerID(t, l, "perm"))
	id := submit(t, s, spec{queue: q, typ: "fail_permanent", maxRetries: retries(5)})
	j := waitState(t, s, id, 30*time.Second, dead)
	evs := events(t, s, id)
	require.EqualValues(t, 1, j.GetAttempt(), describe(evs))
	require.False(t, has(evs, failed, pending, ""), "a permanent failure is not retried:%s", describe(evs))
	require.Contains(t, j.GetLastError(), "cannot succeed")
	w.stop()
	return ""
}

func timeout(t *testing.T, s *server, l lang) string {
	q := newQueue(t, s, l)
	w := l.start(t, s, q, workerID(t, l, "timeout"))
	id := submit(t, s, spec{queue: q, typ: "sleep", payload: `{"ms":30000}`, timeout: time.Second, maxRetries: retries(0)})
	j := waitState(t, s, id, 30*time.Second, dead)
	evs := events(t, s, id)
	require.Equal(t, "timeout", j.GetFailureReason(), describe(evs))
	require.True(t, has(evs, running, failed, "timeout"), describe(evs))
	w.stop()
	return ""
}

func cancelWhileRunning(t *testing.T, s *server, l lang) string {
	q := newQueue(t, s, l)
	w := l.start(t, s, q, workerID(t, l, "cancel"))
	id := submit(t, s, spec{queue: q, typ: "sleep", payload: `{"ms":60000}`})
	waitState(t, s, id, 30*time.Second, running)
	res, err := s.cl.Jobs.CancelJob(context.Background(), connect.NewRequest(&jqv1.CancelJobRequest{JobId: id}))
	require.NoError(t, err)
	require.True(t, res.Msg.GetCancelRequested())
	j := waitState(t, s, id, 30*time.Second, dead)
	evs := events(t, s, id)
	require.Equal(t, "cancelled", j.GetFailureReason(), describe(evs))
	// The handler stopped: the worker reported the cancellation (the worker's id on the event).
	require.True(t, slices.ContainsFunc(evs, func(e *jqv1.JobEvent) bool {
		return e.GetFromState() == running && e.GetReason() == "cancelled" && e.GetWorkerId() == w.id
	}), describe(evs))
	w.stop()
	return ""
}

func progress(t *testing.T, s *server, l lang) string {
	q := newQueue(t, s, l)
	w := l.start(t, s, q, workerID(t, l, "progress"))
	id := submit(t, s, spec{queue: q, typ: "progress", payload: `{"step_ms":1500}`})
	seen := map[int32]bool{}
	eventually(t, 30*time.Second, "two progress values seen", func() error {
		j := getJob(t, s, id)
		if p := j.GetProgress(); p != nil {
			seen[p.GetPercent()] = true
		}
		if len(seen) >= 2 {
			return nil
		}
		if j.GetState() == done {
			return errors.New("done before two progress values were seen")
		}
		return fmt.Errorf("seen %v", seen)
	})
	waitState(t, s, id, 30*time.Second, done)
	w.stop()
	keys := make([]string, 0, len(seen))
	for p := range seen {
		keys = append(keys, fmt.Sprint(p))
	}
	slices.Sort(keys)
	return "seen " + strings.Join(keys, ",")
}

func selfFencing(t *testing.T, s *server, l lang) string {
	q := newQueue(t, s, l)
	w := l.start(t, s, q, workerID(t, l, "fence"))
	id := submit(t, s, spec{queue: q, typ: "sleep", payload: `{"ms":60000}`, maxRetries: retries(3)})
	waitState(t, s, id, 30*time.Second, running)
	// Silent past 3/4 of the heartbeat timeout, short of all of it: the worker must stop the job itself.
	s.freeze(heartbeatTimeout*3/4 + heartbeatTimeout/16)
	waitEvent(t, s, id, 30*time.Second, "the attempt failed lease_expired", func(e *jqv1.JobEvent) bool {
		return e.GetToState() == failed && e.GetReason() == "lease_expired" && e.GetAttempt() == 1
	})
	evs := events(t, s, id)
	require.False(t, slices.ContainsFunc(evs, func(e *jqv1.JobEvent) bool { return e.GetReason() == "worker_lost" }),
		"the worker fenced itself; the server never declared it lost:%s", describe(evs))
	_, err := s.cl.Jobs.CancelJob(context.Background(), connect.NewRequest(&jqv1.CancelJobRequest{JobId: id}))
	require.NoError(t, err)
	waitState(t, s, id, 30*time.Second, dead)
	st := w.stop()
	require.GreaterOrEqual(t, st["fenced"], int64(1))
	return ""
}

func leaseMoved(t *testing.T, s *server, l lang) string {
	q := newQueue(t, s, l)
	a := l.start(t, s, q, workerID(t, l, "a"))
	id := submit(t, s, spec{queue: q, typ: "sleep", payload: `{"ms":2500}`, maxRetries: retries(3)})
	waitState(t, s, id, 30*time.Second, running)
	a.signal(syscall.SIGSTOP) // frozen mid-job: its heartbeats stop
	waitEvent(t, s, id, 30*time.Second, "the frozen worker declared lost", func(e *jqv1.JobEvent) bool {
		return e.GetReason() == "worker_lost" && e.GetAttempt() == 1
	})
	b := l.start(t, s, q, workerID(t, l, "b"))
	waitEvent(t, s, id, 30*time.Second, "attempt 2 assigned to the second worker", func(e *jqv1.JobEvent) bool {
		return e.GetToState() == assigned && e.GetAttempt() == 2 && e.GetWorkerId() == b.id
	})
	a.signal(syscall.SIGCONT) // wakes with attempt 1 in hand: whatever it reports must change nothing
	j := waitState(t, s, id, 30*time.Second, done)
	stA := a.stop()
	b.stop()
	evs := events(t, s, id)
	require.EqualValues(t, 2, j.GetAttempt(), describe(evs))
	lost := slices.IndexFunc(evs, func(e *jqv1.JobEvent) bool { return e.GetReason() == "worker_lost" })
	for _, e := range evs[lost+1:] {
		if e.GetFromState() == failed && e.GetToState() == pending {
			continue // the server's retry of the lost attempt
		}
		require.NotEqual(t, a.id, e.GetWorkerId(), "an event by the first worker after its lease moved:%s", describe(evs))
		require.NotEqual(t, int32(1), e.GetAttempt(), "an event of attempt 1 after the lease moved:%s", describe(evs))
	}
	last := evs[len(evs)-1]
	require.True(t, last.GetToState() == done && last.GetWorkerId() == b.id, describe(evs))
	switch {
	case stA["reports_rejected"]+stA["reports_settled"] > 0:
		return "report refused"
	case stA["abandoned"] > 0:
		return "dropped unreported"
	}
	t.Fatalf("the first worker neither had a report refused nor dropped the job: %v", stA)
	return ""
}

func gracefulShutdown(t *testing.T, s *server, l lang) string {
	q := newQueue(t, s, l)
	w := l.start(t, s, q, workerID(t, l, "shutdown"), "--concurrency", "4")
	ids := make([]string, 4)
	for i := range ids {
		ids[i] = submit(t, s, spec{queue: q, typ: "sleep", payload: `{"ms":3000}`})
	}
	for _, id := range ids {
		j := waitState(t, s, id, 30*time.Second, assigned, running)
		require.Equal(t, w.id, j.GetWorkerId())
	}
	w.stop() // SIGTERM with four jobs in flight
	for _, id := range ids {
		j := getJob(t, s, id)
		evs := events(t, s, id)
		require.Equal(t, done, j.GetState(), "finished and reported before the worker left:%s", describe(evs))
		require.False(t, slices.ContainsFunc(evs, func(e *jqv1.JobEvent) bool { return e.GetReason() == "worker_lost" }), describe(evs))
	}
	res, err := s.cl.Workers.ListWorkers(context.Background(), connect.NewRequest(&jqv1.ListWorkersRequest{}))
	require.NoError(t, err)
	i := slices.IndexFunc(res.Msg.GetWorkers(), func(x *jqv1.Worker) bool { return x.GetId() == w.id })
	require.GreaterOrEqual(t, i, 0)
	require.Equal(t, jqv1.WorkerStatus_WORKER_STATUS_OFFLINE, res.Msg.GetWorkers()[i].GetStatus(), "deregistered")
	return ""
}

func serverRestart(t *testing.T, s *server, l lang) string {
	q := newQueue(t, s, l)
	w := l.start(t, s, q, workerID(t, l, "restart"))
	inFlight := submit(t, s, spec{queue: q, typ: "sleep", payload: `{"ms":3000}`})
	waitState(t, s, inFlight, 30*time.Second, assigned, running)
	s.stop()
	s.start()
	after := submit(t, s, spec{queue: q, typ: "succeed"})
	for _, id := range []string{inFlight, after} {
		j := waitState(t, s, id, 60*time.Second, done)
		evs := events(t, s, id)
		require.Equal(t, w.id, evs[len(evs)-1].GetWorkerId(), describe(evs))
		require.EqualValues(t, 1, j.GetAttempt(), "not re-run:%s", describe(evs))
	}
	w.stop()
	return ""
}
