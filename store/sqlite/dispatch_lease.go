package sqlite

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/jq-dev/jq/queue"
	"github.com/jq-dev/jq/store"
	"github.com/jq-dev/jq/store/internal/sqlstore"
)

// The lease statements: acks and reports. A batch is one write; each lease is one compare-and-set
// on (state, attempt, worker_id) by id (the primary key), RETURNING the job after the write without
// payload, labels, trace context and result (leanJobColumns: the outcome's job), and its event. The
// writer being the only one, what a read in the write sees is what the update will find: a report
// reads the few columns it decides on, then writes; no lock order, no retry round.
const (
	// A batch of acks in one statement: ?2 is a JSON array of leases [id, attempt, worker,
	// started_ago_us], each job at most once; SQLite walks the array and finds each job by its id
	// (TestDispatchPlans). started_at is the ack's time minus how long before the call the handler
	// started, never before the assignment (updated_at while ASSIGNED); SET expressions read the row
	// as it was. The rows come back in no particular order, those not applied not at all.
	sqlJobAck = `
UPDATE jobs SET
    state      = 'RUNNING',
    started_at = max(?1 - i_ago, updated_at),
    event_seq  = event_seq + 1,
    updated_at = ?1
FROM (SELECT value->>0 AS i_id, value->>1 AS i_attempt, value->>2 AS i_worker, value->>3 AS i_ago
      FROM json_each(?2)) AS i
WHERE jobs.id = i_id AND jobs.state = 'ASSIGNED' AND jobs.attempt = i_attempt AND jobs.worker_id = i_worker
RETURNING ` + leanJobColumns + `, event_seq`

	sqlLeanJob = `SELECT ` + leanJobColumns + ` FROM jobs WHERE id = ?1`

	// What a batch of reports decides on, one read for the batch (?1: a JSON array of job ids, each
	// found by its id): the state each job leaves and its lease, and the times that bound the start
	// (see reportTimes). A start time of 0 is none (NULL), on the way back too (nullif).
	sqlJobReportRead = `
SELECT id, state, attempt, worker_id, updated_at, coalesce(started_at, 0), keep_result FROM jobs
WHERE id IN (SELECT value FROM json_each(?1))`

	// A success stores its bytes only for a job submitted with keep_result (seed 001: otherwise the
	// result is not used and is dropped at once; ?3 is then NULL); its checksum and size are stored
	// either way. ?8 is the state left: ASSIGNED (event_seq advances by two, the implied ack's
	// number and the outcome's) or RUNNING.
	sqlJobReportDone = `
UPDATE jobs SET
    state           = 'DONE',
    started_at      = nullif(?1, 0),
    completed_at    = ?2,
    result          = ?3,
    result_checksum = ?4,
    result_size     = ?5,
    no_retry        = 0,
    retry_after_ms  = 0,
    event_seq       = event_seq + CASE WHEN ?8 = 'ASSIGNED' THEN 2 ELSE 1 END,
    updated_at      = ?6
WHERE id = ?7 AND state = ?8 AND attempt = ?9 AND worker_id = ?10
RETURNING ` + leanJobColumns + `, event_seq`

	// A failure keeps the result columns and completed_at (FAILED is not completed: a retry may
	// follow); an empty error keeps the last one.
	sqlJobReportFailed = `
UPDATE jobs SET
    state          = 'FAILED',
    started_at     = nullif(?1, 0),
    failure_reason = ?2,
    last_error     = CASE WHEN ?3 <> '' THEN ?3 ELSE last_error END,
    no_retry       = ?4,
    retry_after_ms = ?5,
    event_seq      = event_seq + CASE WHEN ?8 = 'ASSIGNED' THEN 2 ELSE 1 END,
    updated_at     = ?6
WHERE id = ?7 AND state = ?8 AND attempt = ?9 AND worker_id = ?10
RETURNING ` + leanJobColumns + `, event_seq`
)

// JobAckMany implements store.DispatchStore.
func (s *Store) JobAckMany(ctx context.Context, leases []store.JobLease) ([]store.LeaseOutcome, error) {
	if err := store.ValidateDispatchBatch(len(leases)); err != nil {
		return nil, err
	}
	b := sqlstore.NewLeaseBatch(len(leases))
	for i, l := range leases {
		b.Add(i, l)
	}
	if len(b.Sent) > 0 {
		input := make([][4]any, len(b.Sent))
		for k, i := range b.Sent {
			input[k] = [4]any{b.Outcomes[i].ID, leases[i].Attempt, leases[i].WorkerID, leases[i].Bounded().StartedAgo.Microseconds()}
		}
		arg, err := json.Marshal(input)
		if err != nil {
			return nil, errs.Wrap("ack jobs", err)
		}
		err = s.write(ctx, func(tx *wtx) error {
			now := us(tx.now)
			rows, err := tx.query(sqlJobAck, now, string(arg))
			if err != nil {
				return err
			}
			acked, err := scanAcked(rows)
			if err != nil {
				return err
			}
			for _, i := range b.Sent {
				o := &b.Outcomes[i]
				if a, ok := acked[o.ID]; ok {
					o.Job, o.Started = a.j, true
					if err := leaseEvent(tx, a.j, a.seq, queue.StateAssigned, queue.ReasonAcked, "", us(a.j.StartedAt), nil); err != nil {
						return err
					}
					continue
				}
				if err := ackMissed(tx, o, leases[i]); err != nil {
					return err
				}
			}
			return nil
		})
		if err != nil {
			return nil, errs.Wrap("ack jobs", err)
		}
	}
	return b.Finish(leases, true), nil
}

type ackedJob struct {
	j   *queue.Job
	seq int64
}

// scanAcked reads sqlJobAck's rows by job id and closes rows.
func scanAcked(rows *sql.Rows) (map[string]ackedJob, error) {
	defer rows.Close()
	acked := map[string]ackedJob{}
	for rows.Next() {
		var (
			a   ackedJob
			err error
		)
		if a.j, err = scanJob(rows, &a.seq); err != nil {
			return nil, err
		}
		acked[a.j.ID] = a
	}
	return acked, rows.Err()
}

// ackMissed settles an ack sqlJobAck did not apply. The same lease acked again (a retry after a
// lost answer: already RUNNING at that attempt for that worker) succeeds with no second event.
func ackMissed(tx *wtx, o *store.LeaseOutcome, l store.JobLease) error {
	j, err := scanJob(tx.queryRow(sqlLeanJob, o.ID))
	switch {
	case errors.Is(err, sql.ErrNoRows):
		o.Err = fmt.Errorf("%w: %s", queue.ErrJobNotFound, o.ID)
	case err != nil:
		return err
	case j.State == queue.StateRunning && j.Attempt == l.Attempt && j.WorkerID == l.WorkerID:
		o.Job = j
	default:
		o.Err = staleLease(j.ID, string(j.State), j.Attempt, j.WorkerID, l, queue.StateAssigned)
	}
	return nil
}

// JobReportMany implements store.DispatchStore. The result checksum is computed here
// (queue.Checksum). Error and Reason are stored with NUL bytes and invalid UTF-8 replaced by U+FFFD.
func (s *Store) JobReportMany(ctx context.Context, reports []store.JobReportParams) ([]store.LeaseOutcome, error) {
	if err := store.ValidateDispatchBatch(len(reports)); err != nil {
		return nil, err
	}
	b, leases, bounded := sqlstore.NewReportBatch(reports)
	if len(b.Sent) > 0 {
		ids := make([]string, len(b.Sent))
		for k, i := range b.Sent {
			ids[k] = b.Outcomes[i].ID
		}
		err := s.write(ctx, func(tx *wtx) error {
			now := us(tx.now)
			held, err := readReported(tx, ids)
			if err != nil {
				return err
			}
			for _, i := range b.Sent {
				if err := reportLease(tx, &b.Outcomes[i], bounded[i], held, now); err != nil {
					return err
				}
			}
			return nil
		})
		if err != nil {
			return nil, errs.Wrap("report jobs", err)
		}
	}
	return b.Finish(leases, false), nil
}

// reportLease applies one report to o (whose ID is canonical). A report for a job still ASSIGNED
// at that attempt implies its ack: the job goes ASSIGNED→RUNNING→outcome, one event row for both.
func reportLease(tx *wtx, o *store.LeaseOutcome, r store.JobReportParams, held map[string]reported, now int64) error {
	h, ok := held[o.ID]
	if !ok {
		o.Err = fmt.Errorf("%w: %s", queue.ErrJobNotFound, o.ID)
		return nil
	}
	state, attempt, worker, updatedAt, startedAt, keep := h.state, h.attempt, h.worker, h.updatedAt, h.startedAt, h.keep
	from := queue.State(state)
	if attempt != r.Attempt || worker != r.WorkerID || (from != queue.StateAssigned && from != queue.StateRunning) {
		o.Err = staleLease(o.ID, state, attempt, worker, r.JobLease, queue.StateAssigned, queue.StateRunning)
		return nil
	}
	started, finished := reportTimes(from, r, now, updatedAt, startedAt)
	var (
		seq    int64
		j      *queue.Job
		reason string
		errMsg string
		err    error
	)
	if r.Success {
		var result any // NULL: not kept
		if keep {
			result = r.Result
			if r.Result == nil {
				result = []byte{} // an empty kept result is a result: '' and never NULL
			}
		}
		j, err = scanJob(tx.queryRow(sqlJobReportDone, started, finished, result, storedChecksum(r.Result),
			len(r.Result), now, o.ID, state, attempt, worker), &seq)
		reason = queue.ReasonSucceeded
	} else {
		reason = r.Reason
		if reason == "" {
			reason = queue.DefaultFailureReason
		}
		reason, errMsg = storableText(reason), storableText(r.Error)
		j, err = scanJob(tx.queryRow(sqlJobReportFailed, started, reason, errMsg, r.Permanent, retryAfterMS(r),
			now, o.ID, state, attempt, worker), &seq)
	}
	if err != nil {
		return err // no row is impossible: nothing wrote the job since the read
	}
	o.Job, o.Started = j, from == queue.StateAssigned
	var viaAt any
	if from == queue.StateAssigned {
		viaAt = started
	}
	return leaseEvent(tx, j, seq, from, reason, errMsg, finished, viaAt)
}

// reported is a job as sqlJobReportRead reads it.
type reported struct {
	state, worker        string
	attempt              int
	updatedAt, startedAt int64
	keep                 bool
}

// readReported reads the jobs of a batch of reports (ids: each once) by id.
func readReported(tx *wtx, ids []string) (map[string]reported, error) {
	rows, err := tx.query(sqlJobReportRead, listText(ids))
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	held := make(map[string]reported, len(ids))
	for rows.Next() {
		var (
			id string
			h  reported
		)
		if err := rows.Scan(&id, &h.state, &h.attempt, &h.worker, &h.updatedAt, &h.startedAt, &h.keep); err != nil {
			return nil, err
		}
		held[id] = h
	}
	return held, rows.Err()
}

// reportTimes are the reported attempt's start and end (microseconds), the handler's whatever the
// batching: the start is the report's time minus how long before the call the handler started (for
// a job still ASSIGNED from a worker that does not say, its runtime), not before the assignment
// (updated_at while ASSIGNED) or the ack's estimate (started_at while RUNNING: a prefetched job is
// acked before its handler starts); the end is that start plus the runtime, not after now. As
// Postgres's reportStartedAt.
func reportTimes(from queue.State, r store.JobReportParams, now, updatedAt, startedAt int64) (started, finished int64) {
	ago, runtime := r.StartedAgo.Microseconds(), r.Runtime.Microseconds()
	switch {
	case from == queue.StateAssigned:
		started = max(now-max(ago, runtime), updatedAt)
	case ago > 0:
		started = max(now-ago, startedAt)
	default:
		started = startedAt
	}
	if started == 0 { // no start known (a RUNNING row without one): the end is now, as least() with NULL
		return 0, now
	}
	return started, min(started+runtime, now)
}

// retryAfterMS is a failure's RetryAfter in whole milliseconds (rounded up, so the retry is never
// earlier than asked), within 0..store.MaxRetryAfter; 0 for a success or a permanent failure.
func retryAfterMS(r store.JobReportParams) int64 {
	if r.Success || r.Permanent || r.RetryAfter <= 0 {
		return 0
	}
	return toMillis(min(r.RetryAfter, store.MaxRetryAfter))
}

// staleLease is the outcome error of a lease its job no longer holds.
func staleLease(id, state string, attempt int, worker string, l store.JobLease, in ...queue.State) error {
	return fmt.Errorf("%w: job %s is %s at attempt %d held by %q; the lease is attempt %d held by %q in %v",
		queue.ErrStaleAttempt, id, state, attempt, worker, l.Attempt, l.WorkerID, in)
}
