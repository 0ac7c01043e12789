package engine

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/jq-dev/jq/queue"
)

// The history keeps a queue's finished attempts per minute for an hour: one entry per minute,
// oldest first, and a minute an hour old is forgotten when its slot is reused.
func TestQueueHistory(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 11, 29, 10, 30, 20, 0, time.UTC)
	e := &Engine{opts: Options{Clock: func() time.Time { return now }}}
	e.recordFinished(&queue.Job{Queue: "q", State: queue.StateDone})
	e.recordFinished(&queue.Job{Queue: "q", State: queue.StateDone})
	e.recordFinished(&queue.Job{Queue: "q", State: queue.StateFailed})
	e.recordFinished(&queue.Job{Queue: "other", State: queue.StateDone})
	now = now.Add(2 * time.Minute)
	e.recordFinished(&queue.Job{Queue: "q", State: queue.StateDeadLettered})

	h := e.QueueHistory("q")
	require.Len(t, h, HistoryMinutes)
	require.Equal(t, now.Truncate(time.Minute), h[HistoryMinutes-1].Minute)
	require.Equal(t, MinuteCount{Minute: now.Truncate(time.Minute), Failed: 1}, h[HistoryMinutes-1])
	require.Equal(t, MinuteCount{Minute: now.Truncate(time.Minute).Add(-2 * time.Minute), Done: 2, Failed: 1}, h[HistoryMinutes-3])
	require.Zero(t, h[HistoryMinutes-2].Done+h[HistoryMinutes-2].Failed)

	now = now.Add(time.Hour) // every slot is an hour old: none is shown
	for _, m := range e.QueueHistory("q") {
		require.Zero(t, m.Done+m.Failed, m.Minute)
	}
	require.Len(t, e.QueueHistory("none"), HistoryMinutes)
}
