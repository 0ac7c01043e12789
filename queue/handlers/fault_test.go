package handlers_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/jq-dev/jq/queue"
	"github.com/jq-dev/jq/queue/handlers"
)

// Mode exit ends the process and is exercised by the fault tests in roles/.
func TestFault(t *testing.T) {
	t.Parallel()
	h := handlers.Fault()
	for name, tc := range map[string]struct {
		payload   string
		out       string
		errText   string
		permanent bool
	}{
		"empty payload is ok":     {payload: ``, out: `{"ok_ms":0}`},
		"ok":                      {payload: `{"mode": "ok", "ms": 5}`, out: `{"ok_ms":5}`},
		"fail":                    {payload: `{"mode": "fail", "ms": 1}`, errText: "fault handler asked to fail"},
		"hang within no deadline": {payload: `{"mode": "hang", "ms": 1}`, out: `{"hung_ms":1}`},
		"unknown mode":            {payload: `{"mode": "explode"}`, errText: `unknown mode "explode"`, permanent: true},
		"unknown field":           {payload: `{"mode": "ok", "sec": 1}`, errText: `unknown field "sec"`, permanent: true},
		"negative ms":             {payload: `{"ms": -1}`, errText: "ms must be 0 to", permanent: true},
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			out, err := h.Handle(t.Context(), job(handlers.TypeFault, tc.payload))
			if tc.errText == "" {
				require.NoError(t, err)
				require.JSONEq(t, tc.out, string(out))
				return
			}
			require.ErrorContains(t, err, tc.errText)
			require.Equal(t, tc.permanent, queue.IsPermanent(err))
		})
	}
}

func TestFaultPanics(t *testing.T) {
	t.Parallel()
	require.PanicsWithValue(t, "fault handler asked to panic (job 00000000-0000-4000-8000-000000000001)", func() {
		_, _ = handlers.Fault().Handle(t.Context(), job(handlers.TypeFault, `{"mode": "panic"}`))
	})
}

// A hang outlives its context, and then fails with the context's cause.
func TestFaultHangIgnoresCancellation(t *testing.T) {
	t.Parallel()
	cause := errors.New("job timeout exceeded")
	ctx, cancel := context.WithTimeoutCause(t.Context(), time.Millisecond, cause)
	defer cancel()
	began := time.Now()
	_, err := handlers.Fault().Handle(ctx, job(handlers.TypeFault, `{"mode": "hang", "ms": 60}`))
	require.GreaterOrEqual(t, time.Since(began), 60*time.Millisecond, "hang returned when its context ended")
	require.ErrorIs(t, err, cause)
	require.False(t, queue.IsPermanent(err))
}

// Ok and fail end early with the context's cause.
func TestFaultHonoursCancellation(t *testing.T) {
	t.Parallel()
	cause := errors.New("shutting down")
	ctx, cancel := context.WithCancelCause(t.Context())
	cancel(cause)
	for _, mode := range []string{"ok", "fail"} {
		_, err := handlers.Fault().Handle(ctx, job(handlers.TypeFault, `{"mode": "`+mode+`", "ms": 60000}`))
		require.ErrorIs(t, err, cause, mode)
	}
}

// Every execution appends one "<job_id> <attempt>" line, from the job info in
// the context (the attempt the worker runs), even when the handler then
// fails or panics; concurrent lines never interleave.
func TestFaultMarker(t *testing.T) {
	t.Parallel()
	marker := filepath.Join(t.TempDir(), "marker")
	h := handlers.Fault()
	payload := `{"mode": "fail", "marker": "` + marker + `"}`
	errs := make([]error, 20)
	var wg sync.WaitGroup
	for i := range errs {
		wg.Go(func() {
			ctx := queue.WithJobInfo(t.Context(), queue.JobInfo{ID: "job-a", Attempt: i + 1, Type: handlers.TypeFault})
			_, errs[i] = h.Handle(ctx, job(handlers.TypeFault, payload))
		})
	}
	wg.Wait()
	for _, err := range errs {
		require.ErrorContains(t, err, "fault handler asked to fail")
	}
	require.Panics(t, func() {
		ctx := queue.WithJobInfo(t.Context(), queue.JobInfo{ID: "job-b", Attempt: 3})
		_, _ = h.Handle(ctx, job(handlers.TypeFault, `{"mode": "panic", "marker": "`+marker+`"}`))
	})

	b, err := os.ReadFile(marker)
	require.NoError(t, err)
	seen := map[string]bool{}
	lines := 0
	for _, l := range strings.Split(strings.TrimSuffix(string(b), "\n"), "\n") {
		lines++
		require.False(t, seen[l], "line %q twice", l)
		seen[l] = true
	}
	require.Equal(t, 21, lines)
	require.True(t, seen["job-a 1"] && seen["job-a 20"] && seen["job-b 3"], "lines: %v", seen)
}

func TestFaultMarkerUnwritable(t *testing.T) {
	t.Parallel()
	marker := filepath.Join(t.TempDir(), "no-such-dir", "marker")
	_, err := handlers.Fault().Handle(t.Context(), job(handlers.TypeFault, `{"marker": "`+marker+`"}`))
	require.ErrorContains(t, err, "fault: marker")
}
