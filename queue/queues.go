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
	BackoffBase     time.Duration
	BackoffMax      time.Duration
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

// QueueStats is a snapshot of one queue (FR-028).
type QueueStats struct {
	Queue string

	Pending      int64
	Assigned     int64
	Running      int64
	Done         int64
	Failed       int64
	DeadLettered int64

	// TotalProcessed counts jobs that finished: DONE + DEAD_LETTERED.
	TotalProcessed int64
	// AvgProcessingTime is the mean of completed_at-started_at over DONE jobs.
	AvgProcessingTime time.Duration
	// ErrorRate is DEAD_LETTERED / TotalProcessed, 0 when nothing finished.
	ErrorRate float64
	// OldestPendingAge is the age of the oldest PENDING job, 0 when none.
	OldestPendingAge time.Duration
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
