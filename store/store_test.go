package store_test

import (
	"bytes"
	"encoding/base64"
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
		{CreatedAt: time.Date(2025, 1, 2, 3, 4, 5, 678901000, time.UTC), ID: uuid.NewString()},
		{CreatedAt: time.UnixMicro(0).UTC(), ID: uuid.Nil.String()},
		{CreatedAt: time.Date(1999, 12, 31, 23, 59, 59, 0, time.UTC), ID: uuid.NewString()},
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
	valid := store.EncodeJobCursor(store.JobCursor{CreatedAt: time.Now(), ID: uuid.NewString()})
	for _, s := range []string{
		"", "!!", "Zm9vYmFy", valid[:len(valid)-2], valid + "=", strings.ToUpper(valid),
		b64("j1.123"), b64("j2.123." + uuid.NewString()), b64("j1.x." + uuid.NewString()),
		b64("j1.123.not-a-uuid"), b64("j1.123." + strings.ToUpper(uuid.NewString())),
		b64("j1.123." + uuid.NewString() + ".x"), b64("j1.+123." + uuid.NewString()),
		b64("j1.0123." + uuid.NewString()),
	} {
		_, err := store.DecodeJobCursor(s)
		require.ErrorIs(t, err, queue.ErrInvalidArgument, "%q", s)
	}
}

func b64(s string) string {
	return base64.RawURLEncoding.EncodeToString([]byte(s))
}

// FuzzDecodeJobCursor: page tokens come from clients. Decoding never panics, fails only with
// ErrInvalidArgument, and whatever it accepts re-encodes to the same token.
func FuzzDecodeJobCursor(f *testing.F) {
	f.Add(store.EncodeJobCursor(store.JobCursor{CreatedAt: time.Unix(1700000000, 123000), ID: uuid.NewString()}))
	f.Add("")
	f.Add("Zm9vYmFy")
	f.Add(b64("j1.-1." + uuid.Nil.String()))
	f.Fuzz(func(t *testing.T, s string) {
		c, err := store.DecodeJobCursor(s)
		if err != nil {
			require.ErrorIs(t, err, queue.ErrInvalidArgument)
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
	}, q)

	// A base above the default max raises the default max with it.
	q, err = store.QueueCreateParams{Name: "q", BackoffBase: time.Hour}.Queue()
	require.NoError(t, err)
	require.Equal(t, time.Hour, q.BackoffMax)

	_, err = store.QueueCreateParams{Name: "q", MaxRetries: ptr(-1), TTL: -1, BackoffMax: -1}.Queue()
	require.ErrorIs(t, err, queue.ErrInvalidArgument)
	require.Contains(t, err.Error(), "max_retries")
	require.Contains(t, err.Error(), "ttl", "every problem is reported at once")
}

func TestJobInsertParamsValidate(t *testing.T) {
	t.Parallel()
	ok := store.JobInsertParams{Queue: "q", Type: "t"}
	require.NoError(t, ok.Validate())
	for name, change := range map[string]func(p *store.JobInsertParams){
		"id":          func(p *store.JobInsertParams) { p.ID = "x" },
		"queue":       func(p *store.JobInsertParams) { p.Queue = "" },
		"type":        func(p *store.JobInsertParams) { p.Type = strings.Repeat("t", store.MaxTypeLen+1) },
		"priority":    func(p *store.JobInsertParams) { p.Priority = 10 },
		"max retries": func(p *store.JobInsertParams) { p.MaxRetries = ptr(math.MaxInt32 + 1) },
		"ttl":         func(p *store.JobInsertParams) { p.TTL = -1 },
		"timeout":     func(p *store.JobInsertParams) { p.Timeout = -1 },
		"key":         func(p *store.JobInsertParams) { p.IdempotencyKey = strings.Repeat("k", store.MaxIdempotencyKeyLen+1) },
		"label value": func(p *store.JobInsertParams) {
			p.Labels = map[string]string{"k": strings.Repeat("v", store.MaxLabelLen+1)}
		},
		"labels": func(p *store.JobInsertParams) {
			p.Labels = map[string]string{}
			for i := range store.MaxLabels + 1 {
				p.Labels[strings.Repeat("k", i+1)] = "v"
			}
		},
	} {
		p := ok
		change(&p)
		require.ErrorIs(t, p.Validate(), queue.ErrInvalidArgument, name)
	}
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
	require.NoError(t, store.WorkerRegisterParams{ID: "w", Queues: []string{"q"}}.Validate())
	require.NoError(t, store.WorkerSetStatusParams{ID: "w", Status: queue.WorkerDraining}.Validate())
	require.ErrorIs(t, store.WorkerSetStatusParams{Status: queue.WorkerDraining}.Validate(), queue.ErrInvalidArgument)
}

func ptr[T any](v T) *T { return &v }

func TestJobListParamsValidate(t *testing.T) {
	t.Parallel()
	limit, cursor, err := store.JobListParams{}.Validate()
	require.NoError(t, err)
	require.Equal(t, store.DefaultListLimit, limit)
	require.Nil(t, cursor)

	c := store.JobCursor{CreatedAt: time.UnixMicro(42).UTC(), ID: uuid.NewString()}
	limit, cursor, err = store.JobListParams{Limit: store.MaxListLimit + 5, Cursor: store.EncodeJobCursor(c)}.Validate()
	require.NoError(t, err)
	require.Equal(t, store.MaxListLimit, limit, "capped")
	require.Equal(t, &c, cursor)

	_, _, err = store.JobListParams{Queue: "Q", States: []queue.State{"nope"}, Limit: -1, Cursor: "?"}.Validate()
	require.ErrorIs(t, err, queue.ErrInvalidArgument)
	for _, what := range []string{"queue name", "state", "limit", "cursor"} {
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
