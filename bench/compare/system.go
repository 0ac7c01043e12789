package main

import (
	"context"
	"time"
)

// system is one row of the comparison: a job queue set up the way its users run it, with a no-op
// job and 100 concurrent workers.
//
// A workload drives it through the same steps for every system: Prepare (fresh state), StartIdle
// (accepts jobs, nothing consumes them), optionally StartWorkers, then the probes that read the
// system's own record of what happened.
type system interface {
	Name() string
	// Prepare drops whatever an earlier run left (database, Redis DB) and makes it fresh.
	Prepare(ctx context.Context) error
	// StartIdle makes the system accept jobs with no worker taking them.
	StartIdle(ctx context.Context) error
	// StartWorkers starts the workers (concurrency 100) and returns once they take jobs.
	StartWorkers(ctx context.Context) error
	// BulkInsert inserts n jobs as fast as the system's bulk path allows.
	BulkInsert(ctx context.Context, n int) error
	// InsertOne inserts one job with a single call.
	InsertOne(ctx context.Context) error
	// Completed is how many jobs have completed so far.
	Completed(ctx context.Context) (int, error)
	// Unfinished is how many inserted jobs have not completed.
	Unfinished(ctx context.Context) (int, error)
	// Timings reads, for the completed jobs, the first start, the last completion, each job's
	// submit→start latency and how many completed within [from, to].
	Timings(ctx context.Context, from, to time.Time) (timings, error)
	// Processes names the processes the system started, for the CPU accounting.
	Processes() map[string]int
	// UsesPostgres says whether WAL bytes per job mean anything for this system.
	UsesPostgres() bool
	// Stop stops everything the system started; the state stays for inspection until Prepare.
	Stop(ctx context.Context) error
}

type timings struct {
	FirstStart, LastDone time.Time
	Waits                []time.Duration // submit→start of each completed job
	DoneInWindow         int
}

// add counts one completed job: its start, its completion and its creation, all on the system's
// own clock; from..to is the measured interval.
func (t *timings) add(started, completed, created, from, to time.Time) {
	if t.FirstStart.IsZero() || started.Before(t.FirstStart) {
		t.FirstStart = started
	}
	if completed.After(t.LastDone) {
		t.LastDone = completed
	}
	t.Waits = append(t.Waits, started.Sub(created))
	if !completed.Before(from) && !completed.After(to) {
		t.DoneInWindow++
	}
}
