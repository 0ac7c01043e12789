package queue

import (
	"fmt"
	"regexp"
	"time"
)

// DefaultQueue is created on first server start (FR-027) and used when a submit names no queue.
const DefaultQueue = "default"

// Defaults of a new queue (FR-033).
const (
	DefaultMaxRetries  = 3
	DefaultBackoffBase = 5 * time.Second
	DefaultBackoffMax  = 300 * time.Second
	// DefaultResultRetention is how long a kept result waits for its fetch (seed 001).
	DefaultResultRetention = 24 * time.Hour
)

var queueNameRE = regexp.MustCompile(`^[a-z0-9][a-z0-9_.-]{0,63}$`)

// ValidateQueueName accepts 1–64 characters of lower-case letters, digits, '_', '.' and '-', starting
// with a letter or digit. The name is used in Redis keys and metric labels, hence the small alphabet.
func ValidateQueueName(name string) error {
	if !queueNameRE.MatchString(name) {
		return fmt.Errorf("%w: queue name %s must match %s", ErrInvalidArgument, Excerpt(name), queueNameRE)
	}
	return nil
}

// Queue is a named queue and its per-queue defaults.
type Queue struct {
	Name            string
	MaxRetries      int           // default for jobs that set none
	TTL             time.Duration // default for jobs that set none; 0 = no TTL
	PriorityWeights map[int]int   // priority → weight for weighted dispatch; empty = strict priority
	// MaxWait is the aging bound of weighted dispatch: a due job that has waited this long is
	// dispatched before any other, whatever its priority, oldest first. 0: no aging.
	MaxWait     time.Duration
	BackoffBase time.Duration
	BackoffMax  time.Duration
	// ResultRetention is how long the result of a job submitted with keep_result is kept after
	// the job completed, unless a consuming fetch takes it first; then it is dropped.
	ResultRetention time.Duration
	Paused          bool // paused queues accept jobs but dispatch none
	CreatedAt       time.Time
	UpdatedAt       time.Time
}

// RetryPolicy returns the queue's backoff settings.
func (q *Queue) RetryPolicy() RetryPolicy {
	return RetryPolicy{Base: q.BackoffBase, Max: q.BackoffMax}
}

// QueueStats is a snapshot of one queue (FR-028). Every count but Done is exact and current;
// Done is exact up to ExactDoneLimit and an estimate beyond (DoneEstimated). The recent figures
// (Finished, FailedAttempts, ErrorRate, AvgProcessingTime) cover Window; the last minute's
// (FinishedLastMinute, FailedLastMinute) feed a live throughput.
type QueueStats struct {
	Queue string

	Pending      int64
	Assigned     int64
	Running      int64
	Done         int64
	Failed       int64
	DeadLettered int64

	// DoneEstimated: the queue holds more than ExactDoneLimit DONE jobs and Done is an estimate
	// from the database's statistics (the planner's row count of the queue less its exact live
	// counts), never less than ExactDoneLimit.
	DoneEstimated bool

	// TotalProcessed counts finished jobs still stored: Done + DeadLettered (an estimate when
	// DoneEstimated).
	TotalProcessed int64

	// Window is the span the recent figures cover: RecentWindow, or less when more events than
	// RecentEventsLimit (over all queues) happened in it.
	Window time.Duration
	// Finished counts the attempts that finished in Window (successes and failures; each retry
	// counts), FailedAttempts those of them that failed.
	Finished, FailedAttempts int64
	// ErrorRate is FailedAttempts / Finished, 0 when nothing finished in Window.
	ErrorRate float64
	// AvgProcessingTime is the mean run time (completed_at - started_at) of the latest successes
	// in Window, up to RecentRunTimesLimit of them; 0 when none.
	AvgProcessingTime time.Duration
	// FinishedLastMinute and FailedLastMinute are Finished and FailedAttempts over the last minute
	// (over Window when it is shorter).
	FinishedLastMinute, FailedLastMinute int64

	// OldestPendingAge is the age of the oldest due PENDING job (now - max(created_at,
	// not_before)), 0 when none is due.
	OldestPendingAge time.Duration
}

// Bounds of QueueStats: what a backend reads to compute it, so that its cost does not grow with
// the history the queue keeps.
const (
	// ExactDoneLimit is how many DONE jobs QueueStats counts one by one; beyond, it estimates.
	ExactDoneLimit = 10_000
	// RecentWindow is the span of QueueStats' recent figures.
	RecentWindow = time.Hour
	// RecentEventsLimit is how many of the newest events (of every queue) QueueStats reads for
	// them at most.
	RecentEventsLimit = 20_000
	// RecentRunTimesLimit is how many of the latest successes AvgProcessingTime averages.
	RecentRunTimesLimit = 200
)

// Throughput is the attempts finished per second over the last minute (or Window when shorter).
func (s *QueueStats) Throughput() float64 {
	span := min(time.Minute, s.Window)
	if span <= 0 {
		return 0
	}
	return float64(s.FinishedLastMinute) / span.Seconds()
}

// Count returns the number of jobs in state s.
func (s *QueueStats) Count(st State) int64 {
	switch st {
	case StatePending:
		return s.Pending
	case StateAssigned:
		return s.Assigned
	case StateRunning:
		return s.Running
	case StateDone:
		return s.Done
	case StateFailed:
		return s.Failed
	case StateDeadLettered:
		return s.DeadLettered
	}
	return 0
}
