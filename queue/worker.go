package queue

import (
	"fmt"
	"slices"
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
	// Breakers are the worker's circuit breakers that are not closed, as its last heartbeat
	// reported them: the server assigns no job of an open queue to it and at most one at a time
	// of a half-open queue.
	Breakers []QueueBreaker
	// Types are the job types the worker handles, sorted (the handlers it registered); empty:
	// every type. The server assigns it no job of another type (Handles), so a job whose type no
	// worker of its queue handles waits PENDING instead of failing on the wrong worker.
	Types []string
}

// Handles reports whether the worker takes jobs of type typ from queue q now: it is ONLINE, serves
// q and handles typ (or every type).
func (w *Worker) Handles(q, typ string) bool {
	return w.Status == WorkerOnline && slices.Contains(w.Queues, q) && w.HandlesType(typ)
}

// HandlesType reports whether typ is among the worker's types, or it registered none (every type).
func (w *Worker) HandlesType(typ string) bool {
	return len(w.Types) == 0 || slices.Contains(w.Types, typ)
}

// Waiting explains why due PENDING jobs of these types in queue q are not being taken, from the
// registered workers: "no connected worker serves queue q" when no ONLINE worker serves q, "no
// connected worker handles type t" (or "types t, u") for the types none of them handles, "" when
// every type has a worker. Only ONLINE workers count: a DRAINING one takes no new job.
func Waiting(q string, types []string, workers []*Worker) string {
	serves := false
	var unhandled []string
	for _, t := range types {
		handled := false
		for _, w := range workers {
			if w.Status == WorkerOnline && slices.Contains(w.Queues, q) {
				serves = true
				handled = handled || w.HandlesType(t)
			}
		}
		if !handled && !slices.Contains(unhandled, t) {
			unhandled = append(unhandled, t)
		}
	}
	switch {
	case len(unhandled) == 0:
		return ""
	case !serves:
		return "no connected worker serves queue " + q
	case len(unhandled) == 1:
		return "no connected worker handles type " + unhandled[0]
	}
	return "no connected worker handles types " + strings.Join(unhandled, ", ")
}

// BreakerState is the state of a worker's circuit breaker for one queue (seed 004).
type BreakerState string

// Breaker states.
const (
	BreakerClosed   BreakerState = "CLOSED"    // jobs flow normally
	BreakerOpen     BreakerState = "OPEN"      // cooling down: no job of the queue
	BreakerHalfOpen BreakerState = "HALF_OPEN" // one probe job of the queue at a time
)

// String returns the upper-case state name.
func (s BreakerState) String() string { return string(s) }

// Valid reports whether s is a known state.
func (s BreakerState) Valid() bool {
	return s == BreakerClosed || s == BreakerOpen || s == BreakerHalfOpen
}

// QueueBreaker is a worker's circuit breaker for one queue.
type QueueBreaker struct {
	Queue string
	State BreakerState
	// FailureRate and Samples describe the rolling window when the breaker last opened.
	FailureRate float64
	Samples     int
	// Since is when the breaker entered State, on the worker's clock.
	Since time.Time
}

// Intake is how many of queue q's jobs a worker with these breakers accepts at once: -1 (no
// limit) when q's breaker is closed or unlisted, 0 when open, 1 when half-open (the probe).
func Intake(breakers []QueueBreaker, q string) int {
	for _, b := range breakers {
		if b.Queue != q {
			continue
		}
		switch b.State {
		case BreakerOpen:
			return 0
		case BreakerHalfOpen:
			return 1
		}
	}
	return -1
}

// Drain decides an operator's drain (FR-023): an ONLINE worker becomes DRAINING (change), a DRAINING
// one stays so, and an OFFLINE one has nothing to drain (ErrIllegalTransition).
func Drain(s WorkerStatus) (to WorkerStatus, change bool, err error) {
	switch s {
	case WorkerOnline:
		return WorkerDraining, true, nil
	case WorkerDraining:
		return WorkerDraining, false, nil
	}
	return s, false, fmt.Errorf("%w: an %s worker cannot be drained", ErrIllegalTransition, s)
}

// Resume decides an operator's resume of a drained worker: a DRAINING worker becomes ONLINE
// (change) and takes jobs again, an ONLINE one stays so; a worker told to shut down (it is on its
// way out) or OFFLINE (it must register again) cannot be resumed (ErrIllegalTransition).
func Resume(w *Worker) (to WorkerStatus, change bool, err error) {
	switch {
	case w.Status == WorkerOnline:
		return WorkerOnline, false, nil
	case w.Status == WorkerDraining && w.ShutdownRequested:
		return w.Status, false, fmt.Errorf("%w: worker %q was told to shut down; it cannot be resumed", ErrIllegalTransition, w.ID)
	case w.Status == WorkerDraining:
		return WorkerOnline, true, nil
	}
	return w.Status, false, fmt.Errorf("%w: an %s worker cannot be resumed: it must register again", ErrIllegalTransition, w.Status)
}
