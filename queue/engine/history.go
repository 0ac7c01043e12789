package engine

import (
	"sync"
	"time"

	"github.com/jq-dev/jq/queue"
)

// HistoryMinutes is how many minutes of finished attempts an engine keeps per queue.
const HistoryMinutes = 60

// MinuteCount is the attempts of one queue that finished in one minute on this replica.
type MinuteCount struct {
	Minute time.Time // the minute's start
	Done   int64     // succeeded
	Failed int64     // failed: reported failures and those the reaper declared (lost, timed out)
}

// history is a ring of per-minute counts per queue, kept in memory: the console's chart of the
// last hour costs no query and no write. It counts what this replica recorded (its workers'
// reports, its reaper's failures); each replica keeps its own, and a restart starts it empty.
type history struct {
	mu     sync.Mutex
	queues map[string]*[HistoryMinutes]MinuteCount
}

func (h *history) add(q string, at time.Time, done, failed int64) {
	m := at.Truncate(time.Minute)
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.queues == nil {
		h.queues = map[string]*[HistoryMinutes]MinuteCount{}
	}
	r := h.queues[q]
	if r == nil {
		r = new([HistoryMinutes]MinuteCount)
		h.queues[q] = r
	}
	b := &r[m.Unix()/60%HistoryMinutes]
	if !b.Minute.Equal(m) {
		*b = MinuteCount{Minute: m}
	}
	b.Done += done
	b.Failed += failed
}

// QueueHistory returns queue q's finished attempts per minute over the last HistoryMinutes
// minutes, oldest first, one entry per minute (zero counts included), the current minute last.
func (e *Engine) QueueHistory(q string) []MinuteCount {
	now := e.now().Truncate(time.Minute)
	out := make([]MinuteCount, HistoryMinutes)
	for i := range out {
		out[i].Minute = now.Add(time.Duration(i-HistoryMinutes+1) * time.Minute)
	}
	e.hist.mu.Lock()
	defer e.hist.mu.Unlock()
	r := e.hist.queues[q]
	if r == nil {
		return out
	}
	for i := range out {
		if b := r[out[i].Minute.Unix()/60%HistoryMinutes]; b.Minute.Equal(out[i].Minute) {
			out[i] = b
		}
	}
	return out
}

// recordFinished counts a reported outcome in the history.
func (e *Engine) recordFinished(j *queue.Job) {
	switch j.State {
	case queue.StateDone:
		e.hist.add(j.Queue, e.now(), 1, 0)
	case queue.StateFailed, queue.StateDeadLettered:
		e.hist.add(j.Queue, e.now(), 0, 1)
	}
}
