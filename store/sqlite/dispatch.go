package sqlite

import (
	"cmp"
	"context"
	"database/sql"
	"errors"
	"slices"
	"strings"
	"unicode/utf8"

	"github.com/jq-dev/jq/queue"
	"github.com/jq-dev/jq/store"
	"github.com/jq-dev/jq/store/internal/sqlstore"
)

var _ store.DispatchStore = (*Store)(nil)

// dispatchEdges are the state changes the dispatch statements hard-code in SQL. They bypass
// JobTransition's CheckTransition, so init checks them against the transition table instead, as the
// Postgres store does: a table change that outlaws one of them stops every program that links this
// package.
var dispatchEdges = []struct{ from, to queue.State }{
	{queue.StatePending, queue.StateAssigned},     // sqlJobAssign, sqlJobClaim
	{queue.StateAssigned, queue.StateRunning},     // sqlJobAck, the implicit ack of the reports
	{queue.StateRunning, queue.StateDone},         // sqlJobReportDone
	{queue.StateRunning, queue.StateFailed},       // sqlJobReportFailed, sqlJobFail
	{queue.StateAssigned, queue.StateFailed},      // sqlJobFail
	{queue.StateFailed, queue.StatePending},       // sqlJobSettle
	{queue.StateFailed, queue.StateDeadLettered},  // sqlJobSettle
	{queue.StatePending, queue.StateDeadLettered}, // sqlJobExpireTTL
}

func init() {
	for _, e := range dispatchEdges {
		if err := queue.CheckTransition(e.from, e.to); err != nil {
			panic(errs.Wrap("dispatch SQL hard-codes an edge the transition table refuses", err))
		}
	}
}

// Dispatch. There is one writer (writer.go), so a claim has nothing to lock and nothing to skip: no
// other write runs between its walk of the due jobs and its update of them. Each update is still a
// compare-and-set on the state it leaves, as the contract requires.
const (
	// Walks jobs_dispatch_idx in order: queue equality, then (priority DESC, created_at, id), the
	// literal state = 'PENDING' matching the index predicate; not_before is in the index, so the
	// walk reads no table row (the index covers JobDue's columns), and LIMIT stops it. The paused
	// check is not correlated: SQLite runs it once.
	sqlDueFrom = `
FROM jobs
WHERE queue = ?1 AND state = 'PENDING' AND not_before <= ?2
  AND NOT EXISTS (SELECT 1 FROM queues WHERE name = ?1 AND paused)`
	sqlDueOrder = `
ORDER BY priority DESC, created_at, id
LIMIT ?3`

	sqlJobDue = `SELECT id, priority, created_at` + sqlDueFrom + sqlDueOrder

	// Dispatch in one statement: the head of the dispatch order (the walk above), each job
	// compare-and-set PENDING→ASSIGNED as sqlJobAssign does it, the full rows returned once, after
	// the write (in no particular order: JobClaim sorts them). One statement for the batch instead of
	// one per job. ?4 is the worker.
	// The start of every PENDING→ASSIGNED write, followed by the worker and the time: attempt+1
	// is the new fencing token, event_seq+1 numbers the event.
	sqlAssignSet = `
UPDATE jobs SET
    state      = 'ASSIGNED',
    attempt    = attempt + 1,
    event_seq  = event_seq + 1,`

	sqlJobClaim = sqlAssignSet + `
    worker_id  = ?4,
    updated_at = ?2
WHERE id IN (SELECT id` + sqlDueFrom + sqlDueOrder + `)
  AND state = 'PENDING'
RETURNING ` + jobColumns + `, event_seq`
	// A worker that registered its types (?5: a JSON array): the same walk, reading each due row's
	// type and passing over the others, which stay in place for their workers; its cost grows with
	// how many of those are due ahead of its own, as in Postgres.
	sqlJobClaimTyped = sqlAssignSet + `
    worker_id  = ?4,
    updated_at = ?2
WHERE id IN (SELECT id` + sqlDueFrom + `
  AND type IN (SELECT value FROM json_each(?5))` + sqlDueOrder + `)
  AND state = 'PENDING'
RETURNING ` + jobColumns + `, event_seq`

	// One job PENDING→ASSIGNED: attempt+1 is the new fencing token, event_seq+1 numbers the event.
	// A paused queue dispatches nothing, even a job named by id (JobAssignMany). RETURNING reads the
	// row once, after the write: the assignment's full job.
	sqlJobAssign = sqlAssignSet + `
    worker_id  = ?2,
    updated_at = ?3
WHERE id = ?1 AND state = 'PENDING'
  AND NOT EXISTS (SELECT 1 FROM queues q WHERE q.name = jobs.queue AND q.paused)
RETURNING ` + jobColumns + `, event_seq`

	// One transition, or two with via_at: a report that also acknowledged the start writes one row,
	// from ASSIGNED to the outcome at seq, standing for ASSIGNED→RUNNING at seq-1 (at via_at, reason
	// implicit_ack) and RUNNING→outcome at seq (the view job_transitions expands it), as in Postgres.
	sqlLeaseEvent = `
INSERT INTO job_events (job_id, job_n, seq, queue, type, from_state, to_state, reason, error, worker_id,
                        attempt, created_at, via_at)
VALUES (?1, (SELECT n FROM jobs WHERE id = ?1), ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12)`
)

// JobDue implements store.DispatchStore. An unknown queue has no due jobs (an empty result, not
// ErrQueueNotFound).
func (s *Store) JobDue(ctx context.Context, p store.JobDueParams) ([]store.DueJob, error) {
	rows, err := s.query(ctx, sqlJobDue, p.Queue, us(s.now()), p.Limit)
	if err != nil {
		return nil, errs.Wrap("due jobs", err)
	}
	defer rows.Close()
	var due []store.DueJob
	for rows.Next() {
		var d store.DueJob
		if err := rows.Scan(&d.ID, &d.Priority, tm{&d.CreatedAt}); err != nil {
			return nil, errs.Wrap("due jobs", err)
		}
		due = append(due, d)
	}
	if err := rows.Err(); err != nil {
		return nil, errs.Wrap("due jobs", err)
	}
	return due, nil
}

// JobClaim implements store.DispatchStore: one write assigns the head of the queue's dispatch order
// in one statement (sqlJobClaim) and writes each job's event. The jobs come back in dispatch order.
func (s *Store) JobClaim(ctx context.Context, p store.JobClaimParams) ([]*queue.Job, error) {
	if p.Weighted() {
		return s.jobClaimWeighted(ctx, p)
	}
	var jobs []*queue.Job
	err := s.write(ctx, func(tx *wtx) (err error) {
		jobs, err = claimPlain(tx, p)
		return err
	})
	if err != nil {
		return nil, errs.Wrap("claim jobs", err)
	}
	return jobs, nil
}

// claimPlain is the plain claim (p validated, not weighted) inside a write.
func claimPlain(tx *wtx, p store.JobClaimParams) ([]*queue.Job, error) {
	now := us(tx.now)
	var (
		rows *sql.Rows
		err  error
	)
	if len(p.Types) == 0 {
		rows, err = tx.query(sqlJobClaim, p.Queue, now, p.Limit, p.WorkerID)
	} else {
		rows, err = tx.query(sqlJobClaimTyped, p.Queue, now, p.Limit, p.WorkerID, listText(p.Types))
	}
	if err != nil {
		return nil, err
	}
	jobs, seqs, err := scanAssigned(rows)
	if err != nil {
		return nil, err
	}
	for i, j := range jobs {
		if err := leaseEvent(tx, j, seqs[i], queue.StatePending, queue.ReasonAssigned, "", now, nil); err != nil {
			return nil, err
		}
	}
	return jobs, nil
}

// JobAssignMany implements store.DispatchStore. The ids come canonical, malformed ones dropped
// (store/storewrap); repeats of an id are dropped. The jobs come back in the order of p.IDs.
func (s *Store) JobAssignMany(ctx context.Context, p store.JobAssignParams) ([]*queue.Job, error) {
	ids := sqlstore.UniqueIDs(p.IDs)
	if len(ids) == 0 {
		return nil, nil
	}
	var jobs []*queue.Job
	err := s.write(ctx, func(tx *wtx) error {
		jobs = make([]*queue.Job, 0, len(ids))
		now := us(tx.now)
		for _, id := range ids {
			j, err := assignJob(tx, id, p.WorkerID, now)
			if err != nil {
				return err
			}
			if j != nil {
				jobs = append(jobs, j)
			}
		}
		return nil
	})
	if err != nil {
		return nil, errs.Wrap("assign jobs", err)
	}
	return jobs, nil
}

// assignJob moves one job PENDING→ASSIGNED for worker and writes its event. It returns nil (no
// error) when the job is not PENDING, its queue is paused, or it does not exist.
func assignJob(tx *wtx, id, worker string, now int64) (*queue.Job, error) {
	var seq int64
	j, err := scanJob(tx.queryRow(sqlJobAssign, id, worker, now), &seq)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, nil //nolint:nilnil // not assignable is not an error
	}
	if err != nil {
		return nil, err
	}
	err = leaseEvent(tx, j, seq, queue.StatePending, queue.ReasonAssigned, "", now, nil)
	return j, err
}

// leaseEvent writes the event of a transition of j (as it is after the write) from the state
// from, at seq; viaAt (microseconds, or nil) marks a report that also acknowledged the start.
func leaseEvent(tx *wtx, j *queue.Job, seq int64, from queue.State, reason, errText string, at int64, viaAt any) error {
	_, err := tx.exec(sqlLeaseEvent, j.ID, seq, j.Queue, j.Type, string(from), string(j.State), reason, errText,
		j.WorkerID, j.Attempt, at, viaAt)
	return err
}

// scanAssigned reads the rows of sqlJobClaim (jobs and their event numbers) in dispatch order
// (priority DESC, created_at, id) and closes rows.
func scanAssigned(rows *sql.Rows) ([]*queue.Job, []int64, error) {
	defer rows.Close()
	type assigned struct {
		j   *queue.Job
		seq int64
	}
	var all []assigned
	for rows.Next() {
		var a assigned
		var err error
		if a.j, err = scanJob(rows, &a.seq); err != nil {
			return nil, nil, err
		}
		all = append(all, a)
	}
	if err := rows.Err(); err != nil {
		return nil, nil, err
	}
	slices.SortFunc(all, func(x, y assigned) int {
		return cmp.Or(cmp.Compare(y.j.Priority, x.j.Priority), x.j.CreatedAt.Compare(y.j.CreatedAt),
			strings.Compare(x.j.ID, y.j.ID))
	})
	jobs, seqs := make([]*queue.Job, len(all)), make([]int64, len(all))
	for i, a := range all {
		jobs[i], seqs[i] = a.j, a.seq
	}
	return jobs, seqs, nil
}

// scanIDs reads a column of ids and closes rows.
func scanIDs(rows *sql.Rows) ([]string, error) {
	defer rows.Close()
	var ids []string
	for rows.Next() {
		var id string
		if err := rows.Scan(&id); err != nil {
			return nil, err
		}
		ids = append(ids, id)
	}
	return ids, rows.Err()
}

// storableText makes a caller's free text storable as the Postgres store stores it: NUL bytes and
// invalid UTF-8 replaced by U+FFFD (SQLite would keep them, but every backend must read back the
// same text, and one bad error message must not fail a batch of reports).
func storableText(s string) string {
	if utf8.ValidString(s) && !strings.ContainsRune(s, 0) {
		return s
	}
	return strings.ReplaceAll(strings.ToValidUTF8(s, "\uFFFD"), "\x00", "\uFFFD")
}
