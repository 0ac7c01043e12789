package sqlstore

import (
	"fmt"
	"strconv"
	"time"

	"github.com/jq-dev/jq/queue"
	"github.com/jq-dev/jq/store"
)

// How both stores write what has no column type of its own in both (durations in milliseconds),
// and read back the rows their statements share.

// ToMillis is a duration as stored: whole milliseconds. A positive duration under a millisecond
// rounds up, so that it does not turn into 0, which means "unset".
func ToMillis(d time.Duration) int64 {
	ms := d.Milliseconds()
	if d > 0 && d%time.Millisecond != 0 {
		ms++
	}
	return ms
}

// FromMillis is a stored duration.
func FromMillis(ms int64) time.Duration { return time.Duration(ms) * time.Millisecond }

// QueueMillis are a queue row's stored durations and weights, as scanned.
type QueueMillis struct {
	TTL, BackoffBase, BackoffMax, ResultRetention, MaxWait int64
	Weights                                                map[int]int
}

// Into sets q's durations and weights from m (no weights: an empty map).
func (m QueueMillis) Into(q *queue.Queue) {
	q.TTL = FromMillis(m.TTL)
	q.BackoffBase = FromMillis(m.BackoffBase)
	q.BackoffMax = FromMillis(m.BackoffMax)
	q.ResultRetention = FromMillis(m.ResultRetention)
	q.MaxWait = FromMillis(m.MaxWait)
	q.PriorityWeights = m.Weights
	if q.PriorityWeights == nil {
		q.PriorityWeights = map[int]int{}
	}
}

// DepthRow adds one row of the depth snapshot's statement to snap: a queue's name ("queue"), a
// count of one queue's jobs in one state ("jobs"), or the active workers ("workers").
func DepthRow(snap *store.DepthSnapshot, kind, name, state string, n int64) {
	switch kind {
	case "queue":
		snap.Queues = append(snap.Queues, name)
	case "jobs":
		m := snap.Jobs[name]
		if m == nil {
			m = map[queue.State]int64{}
			snap.Jobs[name] = m
		}
		m[queue.State(state)] = n
	case "workers":
		snap.ActiveWorkers = n
	}
}

// ErrStaleTransition is JobTransition's refusal of p when the job (id, read after the
// compare-and-set matched nothing) is in state at attempt.
func ErrStaleTransition(p store.JobTransitionParams, id, state string, attempt int) error {
	expected := ""
	if p.Attempt != store.AnyAttempt {
		expected = " at attempt " + strconv.Itoa(p.Attempt)
	}
	return fmt.Errorf("%w: job %s is %s at attempt %d, expected %s%s", queue.ErrStaleAttempt, id,
		state, attempt, p.From, expected)
}

// FinishQueueStats derives the rest of st from the counts a stats statement read, and sets the
// durations it returned in microseconds: the window of recent events, the average run time and the
// age of the oldest due job (never negative).
func FinishQueueStats(st *queue.QueueStats, windowMicros, avgMicros, oldestMicros int64) {
	st.TotalProcessed = st.Done + st.DeadLettered
	if st.Finished > 0 {
		st.ErrorRate = float64(st.FailedAttempts) / float64(st.Finished)
	}
	st.Window = time.Duration(windowMicros) * time.Microsecond
	st.AvgProcessingTime = time.Duration(avgMicros) * time.Microsecond
	st.OldestPendingAge = max(time.Duration(oldestMicros)*time.Microsecond, 0)
}

// UniqueIDs are ids without repeats, in the order of their first occurrence.
func UniqueIDs(ids []string) []string {
	out := make([]string, 0, len(ids))
	seen := make(map[string]bool, len(ids))
	for _, id := range ids {
		if !seen[id] {
			seen[id] = true
			out = append(out, id)
		}
	}
	return out
}

// QueueDefaults are what a job takes from its queue when it sets none of its own: max retries and
// TTL (as stored, in milliseconds).
type QueueDefaults struct {
	MaxRetries int
	TTLMS      int64
}

// For is what job p stores: its max retries, TTL and timeout (milliseconds), each its own or else
// the queue's (the timeout: queue.DefaultJobTimeout).
func (d QueueDefaults) For(p store.JobInsertParams) (maxRetries int, ttlMS, timeoutMS int64) {
	maxRetries, ttlMS, timeoutMS = d.MaxRetries, d.TTLMS, ToMillis(p.Timeout)
	if p.MaxRetries != nil {
		maxRetries = *p.MaxRetries
	}
	if p.TTL > 0 {
		ttlMS = ToMillis(p.TTL)
	}
	if p.Timeout == 0 {
		timeoutMS = ToMillis(queue.DefaultJobTimeout)
	}
	return maxRetries, ttlMS, timeoutMS
}
