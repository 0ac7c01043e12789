package handlers_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/vmihailenco/msgpack/v5"

	"github.com/jq-dev/jq/queue"
	"github.com/jq-dev/jq/queue/handlers"
)

func job(typ, payload string) *queue.Job {
	return &queue.Job{ID: "00000000-0000-4000-8000-000000000001", Type: typ, Payload: []byte(payload)}
}

func ExampleRegister() {
	mux := queue.NewMux()
	handlers.Register(mux, handlers.Options{}) // exec, file and http off
	fmt.Println(mux.Types())

	out, err := mux.Handle(context.Background(), &queue.Job{Type: "sleep", Payload: []byte(`{"ms": 1}`)})
	fmt.Println(string(out), err)
	_, err = mux.Handle(context.Background(), &queue.Job{Type: "exec", Payload: []byte(`{"argv": ["/bin/true"]}`)})
	fmt.Println(err, queue.IsPermanent(err))
	// Output:
	// [exec file http noop sleep synthetic]
	// {"slept_ms":1} <nil>
	// exec handler is disabled on this worker (worker.exec.enabled) true
}

func TestExecDisabled(t *testing.T) {
	t.Parallel()
	for _, payload := range []string{`{"argv": ["/bin/sh", "-c", "true"]}`, `{}`, `not json`} {
		_, err := handlers.ExecDisabled().Handle(t.Context(), job("exec", payload))
		require.EqualError(t, err, "exec handler is disabled on this worker (worker.exec.enabled)")
		require.ErrorIs(t, err, handlers.ErrExecDisabled)
		require.True(t, queue.IsPermanent(err), "dead-lettered at once, not retried")
	}
}

func TestNoop(t *testing.T) {
	t.Parallel()
	out, err := handlers.Noop().Handle(t.Context(), job("noop", "anything at all"))
	require.NoError(t, err)
	require.Empty(t, out)
}

func TestSleep(t *testing.T) {
	t.Parallel()
	h := handlers.Sleep()
	for name, tc := range map[string]struct {
		payload   string
		out       string
		fail      bool
		permanent bool
	}{
		"success":               {payload: `{"ms": 5}`, out: `{"slept_ms":5}`},
		"empty payload":         {payload: ``, out: `{"slept_ms":0}`},
		"null payload":          {payload: `null`, out: `{"slept_ms":0}`},
		"fail":                  {payload: `{"ms": 1, "fail": true}`, fail: true},
		"fail retryable":        {payload: `{"ms": 1, "fail": true, "retryable": true}`, fail: true},
		"fail permanent":        {payload: `{"ms": 1, "fail": true, "retryable": false}`, fail: true, permanent: true},
		"retryable alone is ok": {payload: `{"retryable": false}`, out: `{"slept_ms":0}`},
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			out, err := h.Handle(t.Context(), job("sleep", tc.payload))
			if !tc.fail {
				require.NoError(t, err)
				require.JSONEq(t, tc.out, string(out))
				return
			}
			require.Error(t, err)
			require.Contains(t, err.Error(), "sleep handler asked to fail")
			require.Equal(t, tc.permanent, queue.IsPermanent(err))
		})
	}
}

func TestSleepBadPayload(t *testing.T) {
	t.Parallel()
	h := handlers.Sleep()
	for payload, want := range map[string]string{
		`{"ms": "ten"}`:     "cannot unmarshal",
		`{"msec": 10}`:      `unknown field "msec"`,
		`{"ms": 1} {}`:      "trailing data",
		`[1]`:               "cannot unmarshal",
		`{"ms": -1}`:        "ms must be 0 to",
		`{"ms": 999999999}`: "ms must be 0 to",
		`{`:                 "unexpected EOF",
		`{"progress": -1}`:  "progress must be 0 to",
		`{"progress": 1e9}`: "cannot unmarshal",
	} {
		_, err := h.Handle(t.Context(), job("sleep", payload))
		require.Error(t, err, payload)
		require.True(t, queue.IsPermanent(err), payload)
		require.Contains(t, err.Error(), want, payload)
		require.Contains(t, err.Error(), "sleep: invalid payload", payload)
	}
}

// reports records queue.Progress calls.
type reports struct {
	mu  sync.Mutex
	got []string
}

func (r *reports) ReportProgress(percent int, message string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.got = append(r.got, fmt.Sprintf("%d %s", percent, message))
}

func TestSleepProgress(t *testing.T) {
	t.Parallel()
	r := &reports{}
	ctx := queue.WithJobInfoReporter(t.Context(), queue.JobInfo{ID: "j", Attempt: 1}, r)
	start := time.Now()
	out, err := handlers.Sleep().Handle(ctx, job("sleep", `{"ms": 40, "progress": 4}`))
	require.NoError(t, err)
	require.JSONEq(t, `{"slept_ms":40}`, string(out))
	require.GreaterOrEqual(t, time.Since(start), 40*time.Millisecond, "the steps add up to ms")
	require.Equal(t, []string{"0 step 1 of 4", "25 step 2 of 4", "50 step 3 of 4", "75 step 4 of 4"}, r.got)

	// Outside a worker the reports go nowhere and the sleep is the same.
	out, err = handlers.Sleep().Handle(t.Context(), job("sleep", `{"ms": 1, "progress": 3}`))
	require.NoError(t, err)
	require.JSONEq(t, `{"slept_ms":1}`, string(out))
}

func TestSleepCancel(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithCancelCause(t.Context())
	errCause := errors.New("stop now")
	go func() {
		time.Sleep(20 * time.Millisecond) // the cancellation under test, not synchronisation
		cancel(errCause)
	}()
	start := time.Now()
	_, err := handlers.Sleep().Handle(ctx, job("sleep", `{"ms": 60000}`))
	require.ErrorIs(t, err, errCause)
	require.False(t, queue.IsPermanent(err))
	require.Less(t, time.Since(start), 10*time.Second)

	tctx, tcancel := context.WithTimeout(t.Context(), 10*time.Millisecond)
	defer tcancel()
	_, err = handlers.Sleep().Handle(tctx, job("sleep", `{"ms": 60000}`))
	require.ErrorIs(t, err, context.DeadlineExceeded)
}

// A map payload submitted with the msgpack codec reaches the handler as MessagePack bytes; the
// built-in handlers read it as they read JSON, with the same strictness.
func TestBuiltInHandlersReadMessagePack(t *testing.T) {
	t.Parallel()
	mp := func(v any) string {
		b, err := msgpack.Marshal(v)
		require.NoError(t, err)
		return string(b)
	}
	out, err := handlers.Sleep().Handle(t.Context(), job("sleep", mp(map[string]any{"ms": 3})))
	require.NoError(t, err)
	require.JSONEq(t, `{"slept_ms":3}`, string(out))

	_, err = handlers.Sleep().Handle(t.Context(), job("sleep", mp(map[string]any{"ms": 1, "fail": true, "retryable": false})))
	require.ErrorContains(t, err, "sleep handler asked to fail")
	require.True(t, queue.IsPermanent(err))

	_, err = handlers.Sleep().Handle(t.Context(), job("sleep", mp(map[string]any{"msec": 1})))
	require.ErrorContains(t, err, `unknown field "msec"`)
	require.True(t, queue.IsPermanent(err))

	_, err = handlers.Sleep().Handle(t.Context(), job("sleep", "\x81\xa2ms")) // truncated map
	require.ErrorContains(t, err, "sleep: invalid MessagePack payload")
	require.True(t, queue.IsPermanent(err))

	// Through the mux, as a worker runs it.
	mux := queue.NewMux()
	handlers.Register(mux, handlers.Options{})
	out, err = mux.Handle(t.Context(), &queue.Job{Type: "sleep", Payload: []byte(mp(map[string]any{"ms": uint8(2)}))})
	require.NoError(t, err)
	require.JSONEq(t, `{"slept_ms":2}`, string(out))
}
