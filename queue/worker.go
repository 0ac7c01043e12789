package queue

import (
	"fmt"
	"strings"
	"time"
)

// WorkerStatus is a worker's registration status (FR-020, FR-023).
type WorkerStatus string

// Worker statuses.
const (
	WorkerOnline   WorkerStatus = "ONLINE"   // takes new jobs
	WorkerDraining WorkerStatus = "DRAINING" // finishes its jobs, takes no new ones
	WorkerOffline  WorkerStatus = "OFFLINE"  // deregistered or missed its heartbeats
)

// ParseWorkerStatus parses a status name in any letter case.
func ParseWorkerStatus(s string) (WorkerStatus, error) {
	st := WorkerStatus(strings.ToUpper(strings.TrimSpace(s)))
	if !st.Valid() {
		return "", fmt.Errorf("%w: unknown worker status %s", ErrInvalidArgument, Excerpt(s))
	}
	return st, nil
}

// String returns the upper-case status name.
func (s WorkerStatus) String() string { return string(s) }

// Valid reports whether s is a known status.
func (s WorkerStatus) Valid() bool {
	return s == WorkerOnline || s == WorkerDraining || s == WorkerOffline
}

// Worker is a registered worker process.
type Worker struct {
	ID              string
	Hostname        string
	Status          WorkerStatus
	Concurrency     int
	Queues          []string
	Version         string
	RunningJobs     int // jobs ASSIGNED to or RUNNING on it
	StartedAt       time.Time
	LastHeartbeatAt time.Time
	// ShutdownRequested: ShutdownWorker was called; the worker drains and exits (FR-024).
	ShutdownRequested bool
	// Principal registered this worker id ("" while authentication was off); once set, only it
	// may register the id again or act as this worker.
	Principal string
}
