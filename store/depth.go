package store

import (
	"context"

	"github.com/jq-dev/jq/queue"
)

// DepthStore measures how much work the system holds, for the depth gauges and the API's status.
type DepthStore interface {
	// DepthSnapshot counts the jobs of every queue in each of DepthStates, every queue's name, and
	// the workers ONLINE or DRAINING. Its cost follows the live jobs, not the history: it must not
	// read the DONE jobs.
	DepthSnapshot(ctx context.Context) (DepthSnapshot, error)
}

// DepthSnapshot is one measurement of how much work the system holds, for the queue-depth gauges
// (jq_job_queue_depth, jq_queue_length, jq_worker_active_count). Every replica reads the same
// database, so every replica exports the same values.
type DepthSnapshot struct {
	// Queues lists every existing queue, so that an empty one still shows its zeros.
	Queues []string
	// Jobs counts jobs by queue and state, for the states DepthStates lists; missing entries are 0.
	Jobs map[string]map[queue.State]int64
	// ActiveWorkers counts the workers ONLINE or DRAINING.
	ActiveWorkers int64
}

// DepthStates are the states a DepthSnapshot counts: the work still held (PENDING, ASSIGNED,
// RUNNING, FAILED awaiting its retry decision) and the dead letters awaiting an operator. DONE is
// left out: finished work is not depth, and counting it would scan the whole table every time
// (jq_job_total{status="DONE"} shows the throughput).
var DepthStates = []queue.State{
	queue.StatePending, queue.StateAssigned, queue.StateRunning, queue.StateFailed, queue.StateDeadLettered,
}
