package queue_test

import (
	"context"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/stretchr/testify/require"

	"github.com/jq-dev/jq/queue"
)

type lastProgress struct {
	percent int
	message string
	calls   int
}

func (l *lastProgress) ReportProgress(percent int, message string) {
	l.percent, l.message = percent, message
	l.calls++
}

func TestProgress(t *testing.T) {
	t.Parallel()
	// Outside a worker: nothing happens, nothing fails.
	require.NoError(t, queue.Progress(context.Background(), 50, "half"))
	require.NoError(t, queue.Progress(queue.WithJobInfo(context.Background(), queue.JobInfo{ID: "j"}), 50, "half"))

	r := &lastProgress{}
	info := queue.JobInfo{ID: "j1", Attempt: 2, Queue: "q", Type: "t"}
	ctx := queue.WithJobInfoReporter(context.Background(), info, r)
	got, ok := queue.JobInfoFromContext(ctx)
	require.True(t, ok)
	require.Equal(t, info, got, "the JobInfo is the same whichever way it was stored")

	require.NoError(t, queue.Progress(ctx, 0, ""))
	require.NoError(t, queue.Progress(ctx, 100, "done"))
	require.Equal(t, lastProgress{percent: 100, message: "done", calls: 2}, *r)
	for _, pct := range []int{-1, 101} {
		require.ErrorIs(t, queue.Progress(ctx, pct, "x"), queue.ErrInvalidArgument)
	}
	require.Equal(t, 2, r.calls, "a refused update is not reported")

	// Long and broken messages are made acceptable, never refused.
	require.NoError(t, queue.Progress(ctx, 1, strings.Repeat("é", queue.MaxProgressMessage)))
	require.LessOrEqual(t, len(r.message), queue.MaxProgressMessage)
	require.True(t, utf8.ValidString(r.message))
	require.True(t, strings.HasSuffix(r.message, "…"))
	require.NoError(t, queue.ValidateProgress(r.percent, r.message))
	require.NoError(t, queue.Progress(ctx, 1, "a\xffb"))
	require.Equal(t, "a\uFFFDb", r.message)

	require.ErrorIs(t, queue.ValidateProgress(1, strings.Repeat("x", queue.MaxProgressMessage+1)), queue.ErrInvalidArgument)
	require.ErrorIs(t, queue.ValidateProgress(1, "\xff"), queue.ErrInvalidArgument)
	require.ErrorIs(t, queue.ValidateProgress(101, ""), queue.ErrInvalidArgument)
}

// BenchmarkJobContext: what the worker stores per attempt, before (WithJobInfo) and since
// progress (WithJobInfoReporter): one context value either way.
func BenchmarkJobContext(b *testing.B) {
	info := queue.JobInfo{ID: "6f1c2b8e-8a4e-4d43-9a3c-0d5e8f7a1b2c", Attempt: 1, Queue: "default", Type: "noop"}
	r := &lastProgress{}
	b.Run("WithJobInfo", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			_ = queue.WithJobInfo(context.Background(), info)
		}
	})
	b.Run("WithJobInfoReporter", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			_ = queue.WithJobInfoReporter(context.Background(), info, r)
		}
	})
}
