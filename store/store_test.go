package store_test

import (
	"bytes"
	"encoding/base64"
	"fmt"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/jq-dev/jq/queue"
	"github.com/jq-dev/jq/store"
)

func TestJobCursorRoundTrip(t *testing.T) {
	t.Parallel()
	for _, c := range []store.JobCursor{
		{CreatedAt: time.Date(2025, 1, 2, 3, 4, 5, 678901000, time.UTC), ID: uuid.NewString(), Filter: 42},
		{CreatedAt: time.UnixMicro(0).UTC(), ID: uuid.Nil.String()},
		{CreatedAt: time.Date(1999, 12, 31, 23, 59, 59, 0, time.UTC), ID: uuid.NewString(), Filter: math.MaxUint64},
	} {
		s := store.EncodeJobCursor(c)
		require.NotContains(t, s, c.ID, "opaque")
		got, err := store.DecodeJobCursor(s)
		require.NoError(t, err)
		require.Equal(t, c, got)
	}
}

func TestJobCursorInvalid(t *testing.T) {
	t.Parallel()
	id := uuid.NewString()
	valid := store.EncodeJobCursor(store.JobCursor{CreatedAt: time.Now(), ID: id, Filter: 7})
	for _, s := range []string{
		"", "!!", "Zm9vYmFy", valid[:len(valid)-2], valid + "=", strings.ToUpper(valid),
		valid[:8] + "\n" + valid[8:], valid[:8] + "\r\n" + valid[8:], valid + "\n", " " + valid,
		b64("j2.123"), b64("j2.123." + id), b64("j1.123." + id), b64("j3.123." + id + ".7"),
		b64("j2.x." + id + ".7"), b64("j2.123.not-a-uuid.7"), b64("j2.123." + strings.ToUpper(id) + ".7"),
		b64("j2.123.{" + id + "}.7"), b64("j2.123." + id + ".7.x"), b64("j2.+123." + id + ".7"),
		b64("j2.0123." + id + ".7"), b64("j2.123." + id + ".07"), b64("j2.123." + id + ".A"),
		b64("j2.123." + id + "."), b64("j2.123." + id + ".10000000000000000"),
	} {
		_, err := store.DecodeJobCursor(s)
		require.ErrorIs(t, err, queue.ErrInvalidArgument, "%q", s)
		require.NotContains(t, err.Error(), "\n")
	}
}

func b64(s string) string {
	return base64.RawURLEncoding.EncodeToString([]byte(s))
}

// FuzzDecodeJobCursor: page tokens come from clients. Decoding never panics, fails only with
// ErrInvalidArgument, and whatever it accepts re-encodes to the same token (one token per position:
// testdata/fuzz holds the inputs that once broke this, a token with a newline among them).
func FuzzDecodeJobCursor(f *testing.F) {
	f.Add(store.EncodeJobCursor(store.JobCursor{CreatedAt: time.Unix(1700000000, 123000), ID: uuid.NewString(), Filter: 1 << 63}))
	f.Add("")
	f.Add("Zm9vYmFy")
	f.Add(b64("j2.-1." + uuid.Nil.String() + ".0"))
	f.Fuzz(func(t *testing.T, s string) {
		c, err := store.DecodeJobCursor(s)
		if err != nil {
			require.ErrorIs(t, err, queue.ErrInvalidArgument)
			require.NotContains(t, err.Error(), "\n")
			return
		}
		require.Equal(t, s, store.EncodeJobCursor(c))
	})
}

func TestSpecHash(t *testing.T) {
	t.Parallel()
	base := store.JobInsertParams{
		Queue: "q", Type: "t", Payload: []byte("p"), Priority: 3, MaxRetries: ptr(2), TTL: time.Minute,
		Timeout: time.Second, RunAt: time.Unix(1700000000, 0), IdempotencyKey: "k",
		Labels: map[string]string{"a": "1", "b": "2"}, KeepResult: true,
		TraceContext: map[string]string{"traceparent": "x"},
	}
	h := base.SpecHash()
	require.Len(t, h, 32)

	same := base
	same.ID = uuid.NewString()
	same.IdempotencyKey = "other"
	same.TraceContext = nil
	same.Labels = map[string]string{"b": "2", "a": "1"}
	same.MaxRetries = ptr(2)
	same.RunAt = base.RunAt.Add(100 * time.Nanosecond) // below the stores' microsecond precision
	require.Equal(t, h, same.SpecHash(), "id, key, trace context, map order and sub-µs run_at are not part of the spec")

	for name, change := range map[string]func(p *store.JobInsertParams){
		"queue":         func(p *store.JobInsertParams) { p.Queue = "r" },
		"type":          func(p *store.JobInsertParams) { p.Type = "u" },
		"payload":       func(p *store.JobInsertParams) { p.Payload = []byte("P") },
		"payload nil":   func(p *store.JobInsertParams) { p.Payload = nil },
		"priority":      func(p *store.JobInsertParams) { p.Priority = 4 },
		"max retries":   func(p *store.JobInsertParams) { p.MaxRetries = ptr(3) },
		"max unset":     func(p *store.JobInsertParams) { p.MaxRetries = nil },
		"ttl":           func(p *store.JobInsertParams) { p.TTL = time.Hour },
		"timeout":       func(p *store.JobInsertParams) { p.Timeout = time.Hour },
		"run at":        func(p *store.JobInsertParams) { p.RunAt = p.RunAt.Add(time.Microsecond) },
		"run at unset":  func(p *store.JobInsertParams) { p.RunAt = time.Time{} },
		"labels":        func(p *store.JobInsertParams) { p.Labels = map[string]string{"a": "1"} },
		"label value":   func(p *store.JobInsertParams) { p.Labels = map[string]string{"a": "1", "b": "3"} },
		"keep result":   func(p *store.JobInsertParams) { p.KeepResult = false },
		"shifted bytes": func(p *store.JobInsertParams) { p.Queue, p.Type = "qt", "" },
	} {
		p := base
		change(&p)
		require.False(t, bytes.Equal(h, p.SpecHash()), name)
	}
	// Length prefixes keep field boundaries: ("ab","c") and ("a","bc") differ.
	x := store.JobInsertParams{Labels: map[string]string{"ab": "c"}}
	y := store.JobInsertParams{Labels: map[string]string{"a": "bc"}}
	require.NotEqual(t, x.SpecHash(), y.SpecHash())
}

func TestQueueCreateParamsQueue(t *testing.T) {
	t.Parallel()
	q, err := store.QueueCreateParams{Name: "q"}.Queue()
	require.NoError(t, err)
	require.Equal(t, &queue.Queue{
		Name: "q", MaxRetries: queue.DefaultMaxRetries, PriorityWeights: map[int]int{},
		BackoffBase: queue.DefaultBackoffBase, BackoffMax: queue.DefaultBackoffMax,
		ResultRetention: queue.DefaultResultRetention,
	}, q)

	// A base above the default max raises the default max with it.
	q, err = store.QueueCreateParams{Name: "q", BackoffBase: time.Hour}.Queue()
	require.NoError(t, err)
	require.Equal(t, time.Hour, q.BackoffMax)

	_, err = store.QueueCreateParams{Name: "q", MaxRetries: ptr(-1), TTL: -1, BackoffMax: -1}.Queue()
	require.ErrorIs(t, err, queue.ErrInvalidArgument)
	require.Contains(t, err.Error(), "max_retries")
	require.Contains(t, err.Error(), "ttl", "every problem is reported at once")

	for _, p := range []store.QueueCreateParams{
		{Name: "q", MaxRetries: ptr(store.MaxJobRetries + 1)},
		{Name: "q", TTL: store.MaxDuration + 1},
		{Name: "q", BackoffBase: time.Minute, BackoffMax: time.Second},
		{Name: "q", BackoffMax: store.MaxDuration + 1},
		{Name: "q", PriorityWeights: map[int]int{9: store.MaxPriorityWeight + 1}},
		{Name: "q", PriorityWeights: map[int]int{10: 1}},
		{Name: "q", PriorityWeights: map[int]int{0: 0}},
	} {
		_, err := p.Queue()
		require.ErrorIs(t, err, queue.ErrInvalidArgument, "%+v", p)
	}
	_, err = store.QueueCreateParams{Name: "q", MaxRetries: ptr(store.MaxJobRetries), TTL: store.MaxDuration,
		PriorityWeights: map[int]int{9: store.MaxPriorityWeight}}.Queue()
	require.NoError(t, err)
}

func TestJobInsertParamsValidate(t *testing.T) {
	t.Parallel()
	ok := store.JobInsertParams{
		Queue: "q", Type: "email.send:v2", MaxRetries: ptr(store.MaxJobRetries), TTL: store.MaxDuration, Timeout: store.MaxJobTimeout,
		IdempotencyKey: strings.Repeat("k", store.MaxIdempotencyKeyLen),
		Labels:         map[string]string{strings.Repeat("k", store.MaxLabelKeyLen): strings.Repeat("é", store.MaxLabelValueLen/2)},
		TraceContext: map[string]string{
			"traceparent": "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01",
			"tracestate":  strings.Repeat("v", store.MaxTraceContextValueLen),
		},
	}
	require.NoError(t, ok.Validate())
	require.NoError(t, store.JobInsertParams{Queue: "q", Type: "t"}.Validate(), "zero durations are the defaults")
	for name, change := range map[string]func(p *store.JobInsertParams){
		"id":              func(p *store.JobInsertParams) { p.ID = "x" },
		"queue":           func(p *store.JobInsertParams) { p.Queue = "" },
		"type empty":      func(p *store.JobInsertParams) { p.Type = "" },
		"type long":       func(p *store.JobInsertParams) { p.Type = strings.Repeat("t", store.MaxTypeLen+1) },
		"type space":      func(p *store.JobInsertParams) { p.Type = "no op" },
		"type control":    func(p *store.JobInsertParams) { p.Type = "no\x00op" },
		"type unicode":    func(p *store.JobInsertParams) { p.Type = "café" },
		"priority":        func(p *store.JobInsertParams) { p.Priority = 10 },
		"max retries":     func(p *store.JobInsertParams) { p.MaxRetries = ptr(store.MaxJobRetries + 1) },
		"max retries neg": func(p *store.JobInsertParams) { p.MaxRetries = ptr(-1) },
		"ttl":             func(p *store.JobInsertParams) { p.TTL = -1 },
		"ttl long":        func(p *store.JobInsertParams) { p.TTL = store.MaxDuration + 1 },
		"timeout":         func(p *store.JobInsertParams) { p.Timeout = -1 },
		"timeout long":    func(p *store.JobInsertParams) { p.Timeout = store.MaxJobTimeout + 1 },
		"key":             func(p *store.JobInsertParams) { p.IdempotencyKey = strings.Repeat("k", store.MaxIdempotencyKeyLen+1) },
		"key control":     func(p *store.JobInsertParams) { p.IdempotencyKey = "k\n" },
		"label key empty": func(p *store.JobInsertParams) { p.Labels = map[string]string{"": "v"} },
		"label key long": func(p *store.JobInsertParams) {
			p.Labels = map[string]string{strings.Repeat("k", store.MaxLabelKeyLen+1): "v"}
		},
		"label value": func(p *store.JobInsertParams) {
			p.Labels = map[string]string{"k": strings.Repeat("v", store.MaxLabelValueLen+1)}
		},
		"label control": func(p *store.JobInsertParams) { p.Labels = map[string]string{"k": "\x1b[2J"} },
		"label C1":      func(p *store.JobInsertParams) { p.Labels = map[string]string{"k\u009b": "v"} },
		"labels": func(p *store.JobInsertParams) {
			p.Labels = map[string]string{}
			for i := range store.MaxLabels + 1 {
				p.Labels[fmt.Sprint(i)] = "v"
			}
		},
		"trace entries": func(p *store.JobInsertParams) {
			p.TraceContext = map[string]string{}
			for i := range store.MaxTraceContextEntries + 1 {
				p.TraceContext[fmt.Sprint(i)] = "v"
			}
		},
		"trace key long":  func(p *store.JobInsertParams) { p.TraceContext = map[string]string{strings.Repeat("k", 65): "v"} },
		"trace key empty": func(p *store.JobInsertParams) { p.TraceContext = map[string]string{"": "v"} },
		"trace key space": func(p *store.JobInsertParams) { p.TraceContext = map[string]string{"trace parent": "v"} },
		"trace value":     func(p *store.JobInsertParams) { p.TraceContext = map[string]string{"k": strings.Repeat("v", 513)} },
		"trace value NUL": func(p *store.JobInsertParams) { p.TraceContext = map[string]string{"k": "v\x00"} },
		"trace total": func(p *store.JobInsertParams) {
			p.TraceContext = map[string]string{}
			for i := range 5 {
				p.TraceContext[fmt.Sprint(i)] = strings.Repeat("v", 500)
			}
		},
	} {
		p := ok
		change(&p)
		err := p.Validate()
		require.ErrorIs(t, err, queue.ErrInvalidArgument, name)
		requireShortMessage(t, err)
	}
}

// requireShortMessage: a refusal's first line (what a client sees) quotes little of the input.
func requireShortMessage(t *testing.T, err error) {
	t.Helper()
	line, _, _ := strings.Cut(err.Error(), "\n")
	require.LessOrEqual(t, len(line), 200, line)
}

func TestParseJobID(t *testing.T) {
	t.Parallel()
	id := uuid.NewString()
	got, err := store.ParseJobID(strings.ToUpper(id))
	require.NoError(t, err)
	require.Equal(t, id, got, "canonical lower-case form")
	_, err = store.ParseJobID("nope")
	require.ErrorIs(t, err, queue.ErrInvalidArgument)
}

func TestWorkerParamsValidate(t *testing.T) {
	t.Parallel()
	ok := store.WorkerRegisterParams{
		ID: strings.Repeat("w", store.MaxWorkerIDLen), Hostname: "höst-1.example.com", Concurrency: store.MaxWorkerConcurrency,
		Queues: []string{"q"}, Version: "v1.2.3 (go1.26)",
	}
	require.NoError(t, ok.Validate())
	for name, change := range map[string]func(p *store.WorkerRegisterParams){
		"id empty":         func(p *store.WorkerRegisterParams) { p.ID = "" },
		"id long":          func(p *store.WorkerRegisterParams) { p.ID = strings.Repeat("w", store.MaxWorkerIDLen+1) },
		"id space":         func(p *store.WorkerRegisterParams) { p.ID = "w 1" },
		"id NUL":           func(p *store.WorkerRegisterParams) { p.ID = "w\x00" },
		"hostname NUL":     func(p *store.WorkerRegisterParams) { p.Hostname = "h\x00" },
		"hostname escape":  func(p *store.WorkerRegisterParams) { p.Hostname = "\x1b]0;pwned\x07" },
		"hostname long":    func(p *store.WorkerRegisterParams) { p.Hostname = strings.Repeat("h", store.MaxHostnameLen+1) },
		"version long":     func(p *store.WorkerRegisterParams) { p.Version = strings.Repeat("v", store.MaxVersionLen+1) },
		"version newline":  func(p *store.WorkerRegisterParams) { p.Version = "1\n2" },
		"concurrency zero": func(p *store.WorkerRegisterParams) { p.Concurrency = 0 },
		"concurrency high": func(p *store.WorkerRegisterParams) { p.Concurrency = store.MaxWorkerConcurrency + 1 },
		"no queues":        func(p *store.WorkerRegisterParams) { p.Queues = nil },
		"bad queue":        func(p *store.WorkerRegisterParams) { p.Queues = []string{"Q"} },
		"duplicate queue":  func(p *store.WorkerRegisterParams) { p.Queues = []string{"a", "b", "a"} },
		"too many queues": func(p *store.WorkerRegisterParams) {
			p.Queues = nil
			for i := range store.MaxWorkerQueues + 1 {
				p.Queues = append(p.Queues, fmt.Sprint("q", i))
			}
		},
	} {
		p := ok
		change(&p)
		err := p.Validate()
		require.ErrorIs(t, err, queue.ErrInvalidArgument, name)
		requireShortMessage(t, err)
	}
	require.NoError(t, store.WorkerSetStatusParams{ID: "w", Status: queue.WorkerDraining}.Validate())
	require.ErrorIs(t, store.WorkerSetStatusParams{Status: queue.WorkerDraining}.Validate(), queue.ErrInvalidArgument)
	require.ErrorIs(t, store.WorkerSetStatusParams{ID: "w\x00", Status: queue.WorkerDraining}.Validate(), queue.ErrInvalidArgument)
}

func TestFailureText(t *testing.T) {
	t.Parallel()
	require.True(t, store.ValidFailureReason(""))
	require.True(t, store.ValidFailureReason("output_too_large"))
	for _, r := range []string{"Not A Word", strings.Repeat("a", store.MaxFailureReasonLen+1), "tab\there", "é"} {
		require.False(t, store.ValidFailureReason(r), r)
	}
	trim := func(s string) string { return store.JobReportParams{Error: s}.Bounded().Error }
	require.Equal(t, "boom\n\tat main.go:1", trim("boom\n\tat main.go:1"))
	cut := trim(strings.Repeat("é", 5000))
	require.LessOrEqual(t, len(cut), store.MaxFailureErrorLen)
	require.True(t, strings.HasSuffix(cut, "…"))
}

func ptr[T any](v T) *T { return &v }

func TestJobListParamsValidate(t *testing.T) {
	t.Parallel()
	limit, cursor, err := store.JobListParams{}.Validate()
	require.NoError(t, err)
	require.Equal(t, store.DefaultListLimit, limit)
	require.Nil(t, cursor)

	j := &queue.Job{CreatedAt: time.UnixMicro(42).UTC(), ID: uuid.NewString()}
	p := store.JobListParams{Queue: "q", States: []queue.State{queue.StatePending, queue.StateFailed}, Labels: map[string]string{"a": "1"}}
	p.Cursor = p.CursorAfter(j)
	p.Limit = store.MaxListLimit + 5
	limit, cursor, err = p.Validate()
	require.NoError(t, err)
	require.Equal(t, store.MaxListLimit, limit, "capped")
	require.Equal(t, j.CreatedAt, cursor.CreatedAt)
	require.Equal(t, j.ID, cursor.ID)

	same := p
	same.States = []queue.State{queue.StateFailed, queue.StatePending, queue.StateFailed}
	same.Limit = 3
	_, _, err = same.Validate()
	require.NoError(t, err, "the same set of states, and another page size, continue the listing")

	for name, change := range map[string]func(p *store.JobListParams){
		"queue":       func(p *store.JobListParams) { p.Queue = "r" },
		"no queue":    func(p *store.JobListParams) { p.Queue = "" },
		"states":      func(p *store.JobListParams) { p.States = []queue.State{queue.StatePending} },
		"no states":   func(p *store.JobListParams) { p.States = nil },
		"label value": func(p *store.JobListParams) { p.Labels = map[string]string{"a": "2"} },
		"no labels":   func(p *store.JobListParams) { p.Labels = nil },
		"label moved": func(p *store.JobListParams) { p.Labels = map[string]string{"a1": ""} },
	} {
		other := p
		change(&other)
		_, _, err := other.Validate()
		require.ErrorIs(t, err, queue.ErrInvalidArgument, name)
		require.ErrorContains(t, err, "other filters", name)
	}

	_, _, err = store.JobListParams{Queue: "Q", States: []queue.State{"nope"}, Limit: -1, Cursor: "?",
		Labels: map[string]string{"": "x"}}.Validate()
	require.ErrorIs(t, err, queue.ErrInvalidArgument)
	for _, what := range []string{"queue name", "state", "labels", "limit", "page_token"} {
		require.Contains(t, err.Error(), what, "every problem is reported")
	}
}

func TestJobTransitionParamsValidate(t *testing.T) {
	t.Parallel()
	id := uuid.NewString()
	got, err := store.JobTransitionParams{ID: strings.ToUpper(id), From: queue.StatePending, To: queue.StateAssigned, WorkerID: "w"}.Validate()
	require.NoError(t, err)
	require.Equal(t, id, got)

	_, err = store.JobTransitionParams{ID: "x", From: queue.StateDone, To: queue.StatePending}.Validate()
	require.ErrorIs(t, err, queue.ErrIllegalTransition, "the table is checked first")
	_, err = store.JobTransitionParams{ID: "x", From: queue.StatePending, To: queue.StateAssigned, WorkerID: "w"}.Validate()
	require.ErrorIs(t, err, queue.ErrInvalidArgument)
	_, err = store.JobTransitionParams{ID: id, From: queue.StateRunning, To: queue.StateDone, Result: []byte{}}.Validate()
	require.NoError(t, err, "an empty result is a result")
	_, err = store.JobTransitionParams{ID: id, From: queue.StateRunning, To: queue.StateFailed, Result: []byte{}}.Validate()
	require.ErrorIs(t, err, queue.ErrInvalidArgument)
}

// A report is bounded where it is stored, whatever carried it: the error cut, the retry delay kept
// only for a retryable failure and capped, runtime and start within 0..MaxReportedRuntime.
func TestJobReportParamsBounded(t *testing.T) {
	long := strings.Repeat("x", store.MaxFailureErrorLen+100)
	f := store.JobReportParams{JobLease: store.JobLease{StartedAgo: -time.Second}, Error: long,
		RetryAfter: 100 * time.Hour, Runtime: 100 * time.Hour}.Bounded()
	require.Len(t, f.Error, store.MaxFailureErrorLen, "cut to the limit (a one-byte rune: none to step back over)")
	require.Less(t, len(f.Error), len(long))
	require.Equal(t, store.MaxRetryAfter, f.RetryAfter)
	require.Equal(t, store.MaxReportedRuntime, f.Runtime)
	require.Zero(t, f.StartedAgo)

	p := store.JobReportParams{Permanent: true, RetryAfter: time.Minute, Runtime: -time.Second}.Bounded()
	require.Zero(t, p.RetryAfter, "a permanent failure is not retried")
	require.Zero(t, p.Runtime)

	s := store.JobReportParams{Success: true, Error: "x", RetryAfter: time.Minute,
		JobLease: store.JobLease{StartedAgo: 100 * time.Hour}}.Bounded()
	require.Empty(t, s.Error)
	require.Zero(t, s.RetryAfter)
	require.Equal(t, store.MaxReportedRuntime, s.StartedAgo)
}
