// Package faultcheck judges, after a fault-injection run, what became of a known set of jobs.
// It reads the jobs and their events (the system of record; the event_rows view) and reports:
//
//   - lost jobs: not DONE or DEAD_LETTERED, missing, or DEAD_LETTERED without a failure reason;
//   - illegal paths: an event history that is not a walk through the transition table
//     (queue.CheckTransition), starts anywhere but →PENDING, skips a seq, or ends elsewhere than
//     the job's state;
//   - stale results accepted: more than one DONE event, or a DONE for an attempt other than the
//     job's latest assignment (a fenced-off worker's report got through);
//   - executions per job: its ASSIGNED→RUNNING events (reason acked or implicit_ack), the runs
//     the server granted. A fault handler's marker file (ReadMarker) counts the runs that
//     actually started, across worker processes.
//
// It takes a database/sql handle so that it stays free of drivers (internal/archtest); callers
// open one with the pgx stdlib driver.
package faultcheck

import (
	"bufio"
	"context"
	"database/sql"
	"errors"
	"fmt"
	"maps"
	"os"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/jq-dev/jq/queue"
)

// Querier is what Check reads through; *sql.DB, *sql.Conn and *sql.Tx satisfy it.
type Querier interface {
	QueryContext(ctx context.Context, query string, args ...any) (*sql.Rows, error)
}

// Job is the part of a jobs row the checks use.
type Job struct {
	ID            string
	Queue         string
	State         queue.State
	Attempt       int
	RetryCount    int
	MaxRetries    int
	WorkerID      string
	FailureReason string
	LastError     string
	EventSeq      int
}

// Event is one recorded transition.
type Event struct {
	Seq      int
	From     queue.State // empty for the submission
	To       queue.State
	Reason   string
	Error    string
	WorkerID string
	Attempt  int
	At       time.Time
}

// History is a job and its events in seq order; Job is nil when the job does not exist.
type History struct {
	Job    *Job
	Events []Event
}

// Violation is one problem found with one job; Seq is the event concerned (0: the job itself).
type Violation struct {
	JobID   string
	Seq     int
	Problem string
}

func (v Violation) String() string {
	if v.Seq == 0 {
		return v.JobID + ": " + v.Problem
	}
	return fmt.Sprintf("%s seq %d: %s", v.JobID, v.Seq, v.Problem)
}

// Report is the verdict on a set of jobs.
type Report struct {
	Jobs          int // distinct ids checked
	Done          int
	DeadLettered  int
	Lost          []Violation
	IllegalPaths  []Violation
	StaleAccepted []Violation
	// Executions counts each job's assignments (→ASSIGNED events; every id checked has an
	// entry): the attempts the server granted. A worker starts a handler on receiving its
	// assignment and acknowledges the start beside the work, so an attempt may have run without
	// a RUNNING event (its worker died first); the marker file counts the starts themselves.
	Executions map[string]int
	Histories  map[string]*History
}

// Check reads the jobs with these ids and their events and judges them. Ids must be UUIDs;
// duplicates are checked once.
func Check(ctx context.Context, db Querier, ids []string) (*Report, error) {
	ids = slices.Compact(slices.Sorted(slices.Values(ids)))
	hs, err := load(ctx, db, ids)
	if err != nil {
		return nil, err
	}
	r := &Report{Jobs: len(ids), Executions: make(map[string]int, len(ids)), Histories: hs}
	for _, id := range ids {
		r.judge(id, hs[id])
	}
	return r, nil
}

const (
	sqlJobs = `
SELECT id::text, queue, state, attempt, retry_count, max_retries, worker_id, failure_reason, last_error,
       event_seq
FROM jobs WHERE id = ANY($1::uuid[])`
	sqlEvents = `
SELECT job_id::text, seq, coalesce(from_state, ''), to_state, reason, error, worker_id, attempt, created_at
FROM event_rows WHERE job_id = ANY($1::uuid[])
ORDER BY job_id, seq, id, ord`
)

func load(ctx context.Context, db Querier, ids []string) (map[string]*History, error) {
	hs := make(map[string]*History, len(ids))
	for _, id := range ids {
		hs[id] = &History{}
	}
	rows, err := db.QueryContext(ctx, sqlJobs, ids)
	if err != nil {
		return nil, fmt.Errorf("faultcheck: read jobs: %w", err)
	}
	defer rows.Close() // an early return; the normal path closes it below to read its error
	for rows.Next() {
		var j Job
		var state string
		if err := rows.Scan(&j.ID, &j.Queue, &state, &j.Attempt, &j.RetryCount, &j.MaxRetries, &j.WorkerID,
			&j.FailureReason, &j.LastError, &j.EventSeq); err != nil {
			return nil, fmt.Errorf("faultcheck: read jobs: %w", err)
		}
		j.State = queue.State(state)
		if h := hs[j.ID]; h != nil {
			h.Job = &j
		}
	}
	if err := errors.Join(rows.Err(), rows.Close()); err != nil {
		return nil, fmt.Errorf("faultcheck: read jobs: %w", err)
	}

	rows, err = db.QueryContext(ctx, sqlEvents, ids)
	if err != nil {
		return nil, fmt.Errorf("faultcheck: read events: %w", err)
	}
	defer rows.Close()
	for rows.Next() {
		var id, from, to string
		var e Event
		if err := rows.Scan(&id, &e.Seq, &from, &to, &e.Reason, &e.Error, &e.WorkerID, &e.Attempt, &e.At); err != nil {
			return nil, fmt.Errorf("faultcheck: read events: %w", err)
		}
		e.From, e.To = queue.State(from), queue.State(to)
		if h := hs[id]; h != nil {
			h.Events = append(h.Events, e)
		}
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("faultcheck: read events: %w", err)
	}
	return hs, nil
}

func (r *Report) judge(id string, h *History) {
	r.Executions[id] = 0
	j := h.Job
	switch {
	case j == nil:
		r.Lost = append(r.Lost, Violation{JobID: id, Problem: "job does not exist"})
	case j.State == queue.StateDone:
		r.Done++
	case j.State == queue.StateDeadLettered:
		r.DeadLettered++
		if j.FailureReason == "" {
			r.Lost = append(r.Lost, Violation{JobID: id, Problem: "DEAD_LETTERED without a failure reason"})
		}
	default:
		r.Lost = append(r.Lost, Violation{JobID: id, Problem: "ended " + string(j.State)})
	}

	illegal := func(seq int, format string, args ...any) {
		r.IllegalPaths = append(r.IllegalPaths, Violation{JobID: id, Seq: seq, Problem: fmt.Sprintf(format, args...)})
	}
	stale := func(seq int, format string, args ...any) {
		r.StaleAccepted = append(r.StaleAccepted, Violation{JobID: id, Seq: seq, Problem: fmt.Sprintf(format, args...)})
	}
	if len(h.Events) == 0 {
		if j != nil {
			illegal(0, "no events")
		}
		return
	}
	var prev queue.State
	assigned := -1 // attempt of the latest PENDING→ASSIGNED
	dones := 0
	for i, e := range h.Events {
		if e.Seq != i+1 {
			illegal(e.Seq, "seq %d where %d was due", e.Seq, i+1)
		}
		if !e.To.Valid() {
			illegal(e.Seq, "unknown state %q", e.To)
		}
		switch {
		case i == 0 && (e.From != "" || e.To != queue.StatePending):
			illegal(e.Seq, "history starts %s→%s, not with the submission →PENDING", name(e.From), e.To)
		case i > 0 && e.From != prev:
			illegal(e.Seq, "%s→%s follows an event that ended in %s", name(e.From), e.To, prev)
		case i > 0:
			if err := queue.CheckTransition(e.From, e.To); err != nil {
				illegal(e.Seq, "%v", err)
			}
		}
		prev = e.To
		switch {
		case e.From == queue.StatePending && e.To == queue.StateAssigned:
			assigned = e.Attempt
			r.Executions[id]++
		case e.To == queue.StateDone:
			dones++
			if dones > 1 {
				stale(e.Seq, "DONE for the %d. time", dones)
			}
			if assigned >= 0 && e.Attempt != assigned { // without an assignment the path is illegal already
				stale(e.Seq, "DONE for attempt %d, but the latest assignment is attempt %d", e.Attempt, assigned)
			}
			if j != nil && e.Attempt != j.Attempt {
				stale(e.Seq, "DONE for attempt %d, but the job's final attempt is %d", e.Attempt, j.Attempt)
			}
		}
	}
	if j != nil {
		last := h.Events[len(h.Events)-1]
		if last.To != j.State {
			illegal(last.Seq, "history ends in %s but the job is %s", last.To, j.State)
		}
		if last.Seq != j.EventSeq {
			illegal(last.Seq, "last event has seq %d but the job's event_seq is %d", last.Seq, j.EventSeq)
		}
	}
}

func name(s queue.State) string {
	if s == "" {
		return "<none>"
	}
	return string(s)
}

// Err summarises the violations: nil when no job is lost, every path is legal and no stale result
// was accepted.
func (r *Report) Err() error {
	var errs []error
	for _, l := range []struct {
		what string
		vs   []Violation
	}{{"lost", r.Lost}, {"illegal path", r.IllegalPaths}, {"stale result accepted", r.StaleAccepted}} {
		for i, v := range l.vs {
			if i == 10 {
				errs = append(errs, fmt.Errorf("%s: %d more", l.what, len(l.vs)-i))
				break
			}
			errs = append(errs, fmt.Errorf("%s: %s", l.what, v))
		}
	}
	return errors.Join(errs...)
}

// Duplicates returns the jobs that ran more than once, with their execution counts.
func (r *Report) Duplicates() map[string]int {
	out := map[string]int{}
	for id, n := range r.Executions {
		if n > 1 {
			out[id] = n
		}
	}
	return out
}

// TotalExecutions is the sum of Executions.
func (r *Report) TotalExecutions() int {
	n := 0
	for _, e := range r.Executions {
		n += e
	}
	return n
}

func (r *Report) String() string {
	return fmt.Sprintf("jobs=%d done=%d dead_lettered=%d lost=%d illegal_paths=%d stale_accepted=%d executions=%d duplicated_jobs=%d",
		r.Jobs, r.Done, r.DeadLettered, len(r.Lost), len(r.IllegalPaths), len(r.StaleAccepted),
		r.TotalExecutions(), len(r.Duplicates()))
}

// Marker is what a fault handler's marker file records: per job id, the attempts whose handler
// started, in the order they started.
type Marker map[string][]int

// ReadMarker reads a marker file ("<job_id> <attempt>" lines). A missing file is an empty Marker:
// no handler started.
func ReadMarker(path string) (Marker, error) {
	f, err := os.Open(path)
	if errors.Is(err, os.ErrNotExist) {
		return Marker{}, nil
	}
	if err != nil {
		return nil, fmt.Errorf("faultcheck: %w", err)
	}
	defer f.Close()
	m := Marker{}
	sc := bufio.NewScanner(f)
	for n := 1; sc.Scan(); n++ {
		id, attempt, ok := strings.Cut(sc.Text(), " ")
		a, err := strconv.Atoi(attempt)
		if !ok || id == "" || err != nil {
			return nil, fmt.Errorf("faultcheck: %s:%d: want \"<job_id> <attempt>\", got %q", path, n, sc.Text())
		}
		m[id] = append(m[id], a)
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("faultcheck: %s: %w", path, err)
	}
	return m, nil
}

// Executions is how many times the job's handler started.
func (m Marker) Executions(id string) int { return len(m[id]) }

// Total is how many handler starts the file records.
func (m Marker) Total() int {
	n := 0
	for _, as := range m {
		n += len(as)
	}
	return n
}

// Unleased lists the handler starts the server never granted: an attempt that started without
// an →ASSIGNED event for it (the assignment is the lease, fenced by the attempt number; a worker
// starts the handler on receiving it and acknowledges the start beside the work, so an attempt
// whose worker died before any report has no RUNNING event), or started twice. Either means a
// job ran outside its lease. Marker lines of jobs not in the report are ignored.
func (r *Report) Unleased(m Marker) []Violation {
	var out []Violation
	for _, id := range slices.Sorted(maps.Keys(m)) {
		h := r.Histories[id]
		if h == nil {
			continue
		}
		granted := map[int]bool{}
		for _, e := range h.Events {
			if e.To == queue.StateAssigned {
				granted[e.Attempt] = true
			}
		}
		seen := map[int]bool{}
		for _, a := range m[id] {
			switch {
			case seen[a]:
				out = append(out, Violation{JobID: id, Problem: fmt.Sprintf("attempt %d started twice", a)})
			case !granted[a]:
				out = append(out, Violation{JobID: id, Problem: fmt.Sprintf("attempt %d started without being assigned", a)})
			}
			seen[a] = true
		}
	}
	return out
}
