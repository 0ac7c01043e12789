package admin

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"connectrpc.com/connect"
	"github.com/stretchr/testify/require"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/jq-dev/jq/api/apierr"
	jqv1 "github.com/jq-dev/jq/api/gen/jq/v1"
	"github.com/jq-dev/jq/client"
	"github.com/jq-dev/jq/queue"
)

func TestRelative(t *testing.T) {
	t.Parallel()
	for age, want := range map[time.Duration]string{
		0:                           "just now",
		999 * time.Millisecond:      "just now",
		42 * time.Second:            "42s ago",
		3*time.Minute + time.Second: "3m ago",
		5 * time.Hour:               "5h ago",
		47 * time.Hour:              "47h ago",
		72 * time.Hour:              "3d ago",
		-10 * time.Second:           "in 10s",
	} {
		require.Equal(t, want, relative(age), "%v", age)
	}
}

func TestParseStates(t *testing.T) {
	t.Parallel()
	got, err := parseStates("dead_lettered, JOB_STATE_PENDING,Running")
	require.NoError(t, err)
	require.Equal(t, []jqv1.JobState{jqv1.JobState_JOB_STATE_DEAD_LETTERED, jqv1.JobState_JOB_STATE_PENDING, jqv1.JobState_JOB_STATE_RUNNING}, got)
	got, err = parseStates("")
	require.NoError(t, err)
	require.Empty(t, got)
	for _, bad := range []string{"SLEEPING", "UNSPECIFIED", "JOB_STATE_UNSPECIFIED"} {
		_, err := parseStates(bad)
		require.Equal(t, exitUsage, exitCode(err), bad)
	}
}

func TestParseWeights(t *testing.T) {
	t.Parallel()
	got, err := parseWeights("9=10, 0=1")
	require.NoError(t, err)
	require.Equal(t, map[int32]int32{9: 10, 0: 1}, got)
	require.Equal(t, "9=10,0=1", weights(got))
	require.Equal(t, "strict", weights(nil))
	for _, bad := range []string{"9", "10=1", "9=0", "a=b", "9=1,,", "9=3,9=1"} {
		_, err := parseWeights(bad)
		require.Equal(t, exitUsage, exitCode(err), bad)
	}
}

func TestReadPayload(t *testing.T) {
	t.Parallel()
	b, err := readPayload(`{"a":1}`, nil)
	require.NoError(t, err)
	require.Equal(t, `{"a":1}`, string(b))
	_, err = readPayload(`{oops`, nil)
	require.Equal(t, exitUsage, exitCode(err))

	file := filepath.Join(t.TempDir(), "p.bin")
	require.NoError(t, os.WriteFile(file, []byte{0x81, 0xa1, 'a'}, 0o600))
	b, err = readPayload("@"+file, nil)
	require.NoError(t, err)
	require.Equal(t, []byte{0x81, 0xa1, 'a'}, b, "a file is sent as it is (MessagePack allowed)")
	_, err = readPayload("@"+file+".missing", nil)
	require.Equal(t, exitUsage, exitCode(err))
	b, err = readPayload("@-", strings.NewReader("from stdin"))
	require.NoError(t, err)
	require.Equal(t, "from stdin", string(b))
}

func TestBytesText(t *testing.T) {
	t.Parallel()
	require.Equal(t, "(empty)", bytesText(nil))
	require.Equal(t, `{"a":1}`, bytesText([]byte("{\n  \"a\": 1\n}")))
	require.Equal(t, "two words", bytesText([]byte("two\n  words")))
	require.Contains(t, bytesText([]byte{0, 1, 2}), "3 bytes, binary")
	long := bytesText([]byte(strings.Repeat("x", 500)))
	require.True(t, strings.HasPrefix(long, strings.Repeat("x", maxCell)+"…"), long)
	require.Contains(t, long, "500 bytes")
}

func TestExitCodesAndErrorLines(t *testing.T) {
	t.Parallel()
	g := &Globals{ServerAddr: "h:1", Timeout: 3 * time.Second}
	// Errors as the client returns them: the server's reason names the sentinel.
	wire := func(sentinel error, msg string) error { return client.CallError("", apierr.New(sentinel, msg)) }
	notFound := wire(queue.ErrQueueNotFound, `queue not found: "emails"`)
	jobNotFound := wire(queue.ErrJobNotFound, "job not found")
	cases := []struct {
		err  error
		code int
		line string
	}{
		{named(notFound, "queue", "emails"), exitNotFound, `queue "emails" not found (jq queue list shows the queues)`},
		{failed(named(jobNotFound, "job", "j1"), "cannot cancel job %s", "j1"), exitNotFound, `job "j1" not found (jq job list shows recent jobs)`},
		// The server says the queue is missing where the command names a job: the job is not called missing.
		{failed(named(notFound, "job", "j1"), "cannot retry job %s", "j1"), exitNotFound, `cannot retry job j1: queue not found: "emails"`},
		{notFound, exitNotFound, `queue not found: "emails"`},
		{wire(queue.ErrInvalidArgument, "job_id \"x\" is not a UUID"), exitUsage, `job_id "x" is not a UUID`},
		// A code without a reason of jq's (a proxy's answer) decides nothing: no exit code of its own.
		{client.CallError("", connect.NewError(connect.CodeNotFound, errors.New("no route"))), exitError, "no route"},
		{usagef("--limit 0: want 1 to 1000"), exitUsage, "--limit 0: want 1 to 1000"},
		{failed(wire(queue.ErrIllegalTransition, "job j is DONE"), "cannot cancel job %s", "j"), exitError, "cannot cancel job j: job j is DONE"},
		{connect.NewError(connect.CodeDeadlineExceeded, context.DeadlineExceeded), exitError, "no answer from h:1 within 3s"},
		{fmt.Errorf("x: %w", context.DeadlineExceeded), exitError, "no answer from h:1 within 3s"},
		{client.CallError("", connect.NewError(connect.CodeUnavailable, errors.New("dial tcp: refused\nmore"))), exitError, "cannot reach the jq server at h:1: dial tcp: refused"},
		{errUnhealthy, exitError, "the system is unhealthy"},
	}
	for _, c := range cases {
		require.Equal(t, c.code, exitCode(c.err), "%v", c.err)
		line := errorLine(c.err, g)
		require.Contains(t, line, c.line)
		require.NotContains(t, line, "\n")
	}
	require.NoError(t, failed(nil, "x"))
	require.NoError(t, named(nil, "queue", "q"))
}

func TestPaintKeepsColumnsAligned(t *testing.T) {
	t.Parallel()
	re := &runEnv{color: true}
	var sb strings.Builder
	tw := newTable(&sb)
	fmt.Fprintf(tw, "A\t%s\tB\n", re.header("STATUS"))
	fmt.Fprintf(tw, "a\t%s\tb\n", re.state(jqv1.JobState_JOB_STATE_DEAD_LETTERED))
	fmt.Fprintf(tw, "a\t%s\tb\n", re.state(jqv1.JobState_JOB_STATE_DONE))
	require.NoError(t, tw.Flush())
	var cols []int
	for _, l := range strings.Split(strings.TrimSpace(sb.String()), "\n") {
		cols = append(cols, strings.LastIndex(l, " ")) // where the last column starts
	}
	require.Equal(t, cols[0], cols[1])
	require.Equal(t, cols[0], cols[2])
	require.False(t, (&runEnv{}).color)
	require.Equal(t, "DONE", (&runEnv{}).state(jqv1.JobState_JOB_STATE_DONE))
}

func TestCellEscapesControlCharacters(t *testing.T) {
	t.Parallel()
	for in, want := range map[string]string{
		"email.send":              "email.send",
		"héllo wörld 日本 🙂":        "héllo wörld 日本 🙂",
		"\x1b[2J\x1b]0;pwned\x07": `\x1b[2J\x1b]0;pwned\a`,
		"a\tb\nc\rd\x00e\x7f":     `a\tb\nc\rd\x00e\x7f`,
		"csi\u009b31m":            `csi\u009b31m`,
		"abc\u202edef\u2066":      `abc\u202edef\u2066`,
		"line\u2028sep":           `line\u2028sep`,
		"bad\xffutf8":             `bad\xffutf8`,
		`back\slash`:              `back\slash`,
	} {
		require.Equal(t, want, cell(in), "%q", in)
	}
	require.Equal(t, "-", dash(""))
	require.Equal(t, `\x1b`, dash("\x1b"))
}

// Every table cell and message built from server data is escaped: a job type, a label, an error
// text, a worker's hostname or a queue name cannot move the cursor, recolour or clear the screen,
// or break the table's lines.
func TestTablesEscapeServerText(t *testing.T) {
	t.Parallel()
	const evil = "x\x1b[2J\x1b]0;pwned\x07\n\ty\u009b31m\u202e"
	re := &runEnv{now: time.Now, globals: &Globals{ServerAddr: "h:1"}}
	job := &jqv1.Job{
		Id: evil, Queue: evil, Type: evil, WorkerId: evil, LastError: evil, FailureReason: evil,
		Payload: []byte(evil), State: jqv1.JobState_JOB_STATE_FAILED, Waiting: evil,
		Progress: &jqv1.JobProgress{Message: evil}, // a worker's text, shown by job status
	}
	worker := &jqv1.Worker{Id: evil, Hostname: evil, Queues: []string{evil, evil}, Version: evil, Types: []string{evil},
		Breakers: []*jqv1.QueueBreaker{{Queue: evil, State: jqv1.CircuitBreakerState_CIRCUIT_BREAKER_STATE_OPEN}}}
	status := &jqv1.GetStatusResponse{
		ServerVersion: evil,
		Components:    []*jqv1.ComponentHealth{{Name: evil, Detail: evil}},
		Queues:        []*jqv1.QueueDepth{{Queue: evil, Waiting: evil}},
	}
	event := &jqv1.JobEvent{JobId: evil, Queue: evil, Reason: evil, WorkerId: evil}
	var out strings.Builder
	require.NoError(t, re.jobTable(&out, job))
	require.NoError(t, re.jobsTable(&out, []*jqv1.Job{job}))
	require.NoError(t, re.statusTable(&out, status))
	p := &eventPrinter{re: re}
	out.WriteString(p.line(event) + "\n")
	fmt.Fprintln(&out, errorLine(connect.NewError(connect.CodeInvalidArgument, errors.New(evil)), &Globals{}))
	require.NoError(t, re.workersTable(&out, []*jqv1.Worker{worker}))

	for _, line := range strings.Split(strings.TrimSuffix(out.String(), "\n"), "\n") {
		require.Equal(t, -1, strings.IndexFunc(line, unsafeRune), "%q", line)
		require.NotContains(t, line, "\t")
	}
	require.Contains(t, out.String(), `\x1b[2J`, "escaped, not dropped")
}

// worker list shows a live worker's open and half-open breakers.
func TestWorkersTableBreakers(t *testing.T) {
	t.Parallel()
	re := &runEnv{now: time.Now, globals: &Globals{ServerAddr: "h:1"}}
	open := []*jqv1.QueueBreaker{
		{Queue: "pay", State: jqv1.CircuitBreakerState_CIRCUIT_BREAKER_STATE_OPEN, FailureRate: 0.625, Samples: 40},
		{Queue: "mail", State: jqv1.CircuitBreakerState_CIRCUIT_BREAKER_STATE_HALF_OPEN},
	}
	var out strings.Builder
	require.NoError(t, re.workersTable(&out, []*jqv1.Worker{
		{Id: "w-1", Status: jqv1.WorkerStatus_WORKER_STATUS_ONLINE, Breakers: open},
		{Id: "w-2", Status: jqv1.WorkerStatus_WORKER_STATUS_OFFLINE, Breakers: open},
	}))
	lines := strings.Split(out.String(), "\n")
	require.Contains(t, lines[0], "BREAKERS")
	require.True(t, strings.HasSuffix(strings.TrimSpace(lines[1]), "pay:open(62%/40),mail:half-open"), lines[1])
	require.True(t, strings.HasSuffix(strings.TrimSpace(lines[2]), "-"), "an OFFLINE worker's breakers are history: %s", lines[2])
}

// Why jobs wait: a WAITING row in job status, a waiting line per queue under status's table, and
// each worker's types in worker list ("*": every type).
func TestWaitingAndTypes(t *testing.T) {
	t.Parallel()
	re := &runEnv{now: time.Now, globals: &Globals{ServerAddr: "h:1"}}
	var out strings.Builder
	require.NoError(t, re.jobTable(&out, &jqv1.Job{Id: "j", State: jqv1.JobState_JOB_STATE_PENDING, Waiting: "no connected worker handles type greet"}))
	require.Regexp(t, `(?m)^WAITING\s+no connected worker handles type greet$`, out.String())
	out.Reset()
	require.NoError(t, re.jobTable(&out, &jqv1.Job{Id: "j", State: jqv1.JobState_JOB_STATE_PENDING}))
	require.NotContains(t, out.String(), "WAITING")

	out.Reset()
	require.NoError(t, re.statusTable(&out, &jqv1.GetStatusResponse{Queues: []*jqv1.QueueDepth{
		{Queue: "default", Pending: 2, Waiting: "no connected worker handles type greet"}, {Queue: "idle"},
	}}))
	require.Contains(t, out.String(), "\n! default: waiting: no connected worker handles type greet\n")
	require.NotContains(t, out.String(), "idle: waiting")

	out.Reset()
	require.NoError(t, re.workersTable(&out, []*jqv1.Worker{{Id: "w-1", Types: []string{"greet", "mail"}}, {Id: "w-2"}}))
	lines := strings.Split(out.String(), "\n")
	require.Contains(t, lines[0], "TYPES")
	require.Contains(t, lines[1], " greet,mail ")
	require.Contains(t, lines[2], " * ")
}

// -o json and -o yaml show payloads and results that are JSON as JSON values; others stay base64.
func TestPrintMessageShowsJSONPayloads(t *testing.T) {
	t.Parallel()
	job := &jqv1.Job{Id: "j", Payload: []byte(`{"a":[1,2]}`), Result: &jqv1.JobResult{Data: []byte{0xff}}}
	re, out, _ := testEnv(context.Background(), "json")
	require.NoError(t, re.printMessage(&jqv1.GetJobResponse{Job: job}, nil))
	s := out.String()
	require.Contains(t, s, "\"payload\": {\n      \"a\": [\n        1,\n        2\n      ]\n    },")
	require.Contains(t, s, `"data": "/w=="`)

	re, out, _ = testEnv(context.Background(), "yaml")
	require.NoError(t, re.printMessage(&jqv1.GetJobResponse{Job: job}, nil))
	require.Contains(t, out.String(), "payload:\n        a:\n            - 1\n            - 2\n")
}

// job logs shows the seeds' names of the reasons they name, beside jq's own (docs/api.md#reasons).
func TestReasonCellShowsSeedNames(t *testing.T) {
	t.Parallel()
	require.Equal(t, "cancelled (CANCELLED)", reasonCell("cancelled"))
	require.Equal(t, "output_too_large (OUTPUT_TOO_LARGE)", reasonCell("output_too_large"))
	require.Equal(t, "permanent_failure", reasonCell("permanent_failure"))
	require.Equal(t, "-", reasonCell(""))
	require.Equal(t, `x\n`, reasonCell("x\n"), "escaped like every cell")
}

// job status shows the labels; job logs does not pin an operator's retry on the last worker.
func TestJobStatusLabelsAndLogsWorker(t *testing.T) {
	t.Parallel()
	re := &runEnv{now: time.Now, globals: &Globals{ServerAddr: "h:1"}}
	var out strings.Builder
	require.NoError(t, re.jobTable(&out, &jqv1.Job{Id: "j", Labels: map[string]string{"team": "ops", "env": "prod"}}))
	require.Regexp(t, `(?m)^LABELS\s+env=prod,team=ops$`, out.String())
	out.Reset()
	require.NoError(t, re.jobTable(&out, &jqv1.Job{Id: "j"}))
	require.Regexp(t, `(?m)^LABELS\s+-$`, out.String())

	// A running job's progress gets a row of its own; no progress, no row.
	out.Reset()
	require.NoError(t, re.jobTable(&out, &jqv1.Job{Id: "j", State: jqv1.JobState_JOB_STATE_RUNNING,
		Progress: &jqv1.JobProgress{Percent: 40, Message: "4 of 10", UpdatedAt: timestamppb.New(time.Now().Add(-2 * time.Second))}}))
	require.Regexp(t, `(?m)^PROGRESS\s+40% 4 of 10 \(\d{4}-.* \(2s ago\)\)$`, out.String())
	out.Reset()
	require.NoError(t, re.jobTable(&out, &jqv1.Job{Id: "j", State: jqv1.JobState_JOB_STATE_RUNNING}))
	require.NotContains(t, out.String(), "PROGRESS")

	require.Empty(t, eventWorker(&jqv1.JobEvent{Reason: "manual_retry", WorkerId: "w-old",
		FromState: jqv1.JobState_JOB_STATE_DEAD_LETTERED, ToState: jqv1.JobState_JOB_STATE_PENDING}))
	require.Equal(t, "w-1", eventWorker(&jqv1.JobEvent{Reason: "completed", WorkerId: "w-1",
		FromState: jqv1.JobState_JOB_STATE_RUNNING, ToState: jqv1.JobState_JOB_STATE_DONE}))
}

// job status shows a MessagePack payload as the console does (decoded, as JSON), not as a size.
func TestBytesTextMessagePack(t *testing.T) {
	t.Parallel()
	mp := []byte{0x82, 0xa1, 'a', 0x01, 0xa1, 'b', 0x92, 0xc3, 0xa2, 'h', 'i'} // {"a":1,"b":[true,"hi"]}
	require.Equal(t, `(MessagePack) {"a":1,"b":[true,"hi"]}`, bytesText(mp))
	require.Equal(t, "(3 bytes, binary; --output json shows them in base64)", bytesText([]byte{0x00, 0xff, 0x01}))
	require.Equal(t, `{"a":1}`, bytesText([]byte(`{ "a": 1 }`)))
}
