package postgres

import (
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/jq-dev/jq/queue"
	"github.com/jq-dev/jq/store"
	"github.com/jq-dev/jq/store/internal/sqlstore"
)

// How the batch statements (these and sqlJobAssignMany) find and lock their jobs.
//
// Plans must not depend on statistics. The planner guesses 10 rows for unnest of a parameter, and
// a generic plan cached while jobs was small (a fresh database, before autovacuum's first ANALYZE)
// otherwise joined the input against every ASSIGNED job, or walked a whole partial index per item:
// seconds per batch once the table grew. So each job is read by a LATERAL subquery on its id alone,
// where jobs_pkey is the only sensible path; OFFSET 0 keeps the subquery from being flattened into
// a join the planner could reorder, or from receiving pushed-down predicates that open other index
// choices. The lease is checked outside, on what the subquery returns.
//
// That subquery takes the row lock. FOR NO KEY UPDATE returns the newest row version, re-read after
// waiting for a holder, so the lease check (and l_from, the state being left) sees what a
// concurrent ack or report committed meanwhile. Ack and report wait for holders — a report must not
// be refused because its job's ack is committing — and lock in id order (the outer side is sorted,
// and the lateral runs in its order): two batches sharing jobs, such as an ack batch and a report
// batch carrying implicit acks, cannot deadlock. The UPDATE then matches the locked id alone: a
// lease predicate there would be tested on the statement's snapshot, older than the locked version,
// and wrongly refuse a report whose ack committed while it waited.
//
// locked keeps every lease (LEFT JOIN), with l_id NULL when the lease is not held, so the outcomes
// need no anti-join. Both statements return one row per lease that names an existing job: (ord,
// true, the job after the write) when it applied, (ord, false, the job as it stands) when the lease
// is stale; either without payload, labels, trace context and result (leanJobColumns). An ord without a row is a job that does not exist.
var (
	sqlJobAckMany = `-- name: job_ack_many
WITH input AS (
    SELECT * FROM unnest($1::uuid[], $2::integer[], $3::text[], $4::bigint[])
        WITH ORDINALITY AS t(i_id, i_attempt, i_worker, i_started_us, i_ord)
),
locked AS MATERIALIZED (
    SELECT i_id AS l_input, i_ord AS l_ord, i_started_us AS l_started_us,
           CASE WHEN j.state = 'ASSIGNED' AND j.attempt = i_attempt AND j.worker_id = i_worker
                THEN j.id END AS l_id,
           -- The same lease acked again (a retry after a lost answer): already RUNNING
           -- at that attempt for that worker is success, with no second event.
           coalesce(j.state = 'RUNNING' AND j.attempt = i_attempt AND j.worker_id = i_worker, false) AS l_again
    FROM (SELECT * FROM input ORDER BY i_id) i
    LEFT JOIN LATERAL (
        SELECT id, state, attempt, worker_id FROM jobs WHERE id = i_id
        OFFSET 0 FOR NO KEY UPDATE
    ) j ON true
),
updated AS (
    UPDATE jobs SET
        state      = 'RUNNING',
        started_at = greatest(now() - l_started_us * interval '1 microsecond', updated_at),
        event_seq  = event_seq + 1,
        ev         = coalesce(ev, '{0}') || pg_current_xact_id(),
        updated_at = now()
    FROM locked
    WHERE id = l_id
    RETURNING l_ord, true AS u_started, event_seq, jobs.trace_context AS u_trace, ` + leanJobColumns + `
),
` + evAcked + `
` + sqlLeaseOutcomes

	// Times are the handler's, whatever the batching: started_at is the report's time minus how long
	// before the call the handler started (i_started_us; for a job still ASSIGNED from a worker that
	// does not say, the runtime), not before the assignment (the row's last update while ASSIGNED)
	// or the ack's estimate (while RUNNING: a prefetched job is acked before its handler starts);
	// the outcome's time (completed_at, the event's) is that start plus the runtime, not after now.
	// A lease held ASSIGNED is acked on the way: event_seq advances by two and one job_events row
	// records both transitions (migration 000014): ASSIGNED→RUNNING at seq n+1 (via_at, the start,
	// reason implicit_ack) and RUNNING→DONE|FAILED at seq n+2, the row's own; the store's reads show
	// them as two (job_transitions). The ORDER BY gives the rows ascending ids in job id order.
	// A success stores its bytes only for a job submitted with keep_result (seed 001: otherwise the
	// result is not used and is dropped at once); its checksum and size are stored either way. An
	// empty result of a keep_result job is stored as '' so that NULL always means "no result".
	//
	// No explicit row lock: each item names the state it leaves (i_from), and the UPDATE's
	// own compare-and-set — state, attempt and worker — is what applies it. Under READ COMMITTED an
	// UPDATE that meets a row changed since its snapshot waits for the writer and re-checks the
	// predicate on the newest version, and its SET reads that version: a report is never applied
	// to a lease that moved on, nor to a state it does not name. A lease in the other live state
	// (the store guessed ASSIGNED, the job was acked; or acked by a transaction that committed
	// after the snapshot) comes back unapplied with the job as the snapshot had it, and JobReportMany
	// sends it again naming the other state. Rows are updated in job id order (the input sorted, a
	// nested loop over jobs_pkey on the dispatch pool), as the ack locks them: no deadlock between
	// an ack batch and a report batch. The lock record and the second walk of jobs_pkey that the
	// explicit lock cost (~7 buffer accesses and one WAL record per job) are gone.
	sqlJobReportMany = `-- name: job_report_many
WITH input AS (
    SELECT * FROM unnest($1::uuid[], $2::integer[], $3::text[], $4::boolean[], $5::bytea[], $6::text[],
                         $7::text[], $8::text[], $9::boolean[], $10::bigint[], $11::bigint[], $12::bigint[],
                         $13::text[])
        WITH ORDINALITY AS t(i_id, i_attempt, i_worker, i_success, i_result, i_checksum, i_error,
                             i_reason, i_permanent, i_runtime_us, i_retry_after_ms, i_started_us, i_from, i_ord)
),
updated AS (
    UPDATE jobs SET
        state           = CASE WHEN i_success THEN 'DONE' ELSE 'FAILED' END,
        started_at      = ` + reportStartedAt + `,
        completed_at    = CASE WHEN i_success
                               THEN least(` + reportStartedAt + ` + i_runtime_us * interval '1 microsecond', now())
                               ELSE completed_at END,
        result          = CASE WHEN NOT i_success THEN result
                               WHEN keep_result THEN coalesce(i_result, '') END,
        result_checksum = CASE WHEN i_success THEN i_checksum ELSE result_checksum END,
        result_size     = CASE WHEN i_success THEN coalesce(octet_length(i_result), 0) ELSE result_size END,
        failure_reason  = CASE WHEN i_success THEN failure_reason ELSE i_reason END,
        last_error      = CASE WHEN NOT i_success AND i_error <> '' THEN i_error ELSE last_error END,
        no_retry        = NOT i_success AND i_permanent,
        retry_after_ms  = CASE WHEN i_success OR i_permanent THEN 0 ELSE i_retry_after_ms END,
        event_seq       = event_seq + CASE WHEN i_from = 'ASSIGNED' THEN 2 ELSE 1 END,
        ev              = coalesce(ev, '{0}') || pg_current_xact_id(),
        updated_at      = now()
    FROM (SELECT * FROM input ORDER BY i_id OFFSET 0) i
    WHERE jobs.id = i.i_id AND jobs.state = i.i_from AND jobs.attempt = i.i_attempt AND jobs.worker_id = i.i_worker
    RETURNING i_ord AS l_ord, i_from = 'ASSIGNED' AS u_started, i_from AS l_from, i_error AS l_error, event_seq,
              least(started_at + i_runtime_us * interval '1 microsecond', now()) AS u_finished_at,
              jobs.trace_context AS u_trace, ` + leanJobColumns + `
),
` + evReported + `
SELECT l_ord, true, u_started, ` + leanJobColumns + ` FROM updated
UNION ALL
SELECT i_ord, false, false, s.*
FROM input
CROSS JOIN LATERAL (SELECT ` + leanJobColumns + ` FROM jobs WHERE id = i_id OFFSET 0) s
WHERE i_ord NOT IN (SELECT l_ord FROM updated)`

	// reportStartedAt is when the reported attempt's handler started (see sqlJobReportMany), from
	// the row as the UPDATE found it: the assignment's time (updated_at while ASSIGNED) and the
	// ack's estimate (started_at while RUNNING) bound it from below.
	reportStartedAt = `CASE WHEN i_from = 'ASSIGNED'
                THEN greatest(now() - greatest(i_started_us, i_runtime_us) * interval '1 microsecond', updated_at)
                WHEN i_started_us > 0
                THEN greatest(now() - i_started_us * interval '1 microsecond', started_at)
                ELSE started_at END`

	// A stale row shows the job as the statement's snapshot has it (only used for the error
	// message). l_again marks a lease that needs no write to count as applied (a repeated ack).
	// u_started says the write moved the job to RUNNING (an ack, or a report's implied ack): the
	// engine's metrics count a start once, never for a repeated ack.
	sqlLeaseOutcomes = `
SELECT l_ord, true, u_started, ` + leanJobColumns + ` FROM updated
UNION ALL
SELECT l_ord, l_again, false, s.*
FROM locked
CROSS JOIN LATERAL (SELECT ` + leanJobColumns + ` FROM jobs WHERE id = l_input OFFSET 0) s
WHERE l_id IS NULL`
)

// The batch events of the ack and the report: an ack records ASSIGNED→RUNNING at the handler's
// start; a report its outcome, and for a lease still ASSIGNED the start too (via, migration 000014).
var (
	evAcked = batchEvent{
		src: "updated", job: "id", seq: "event_seq", queue: "queue", typ: "type", from: "'ASSIGNED'",
		to: "'RUNNING'", reason: "'" + queue.ReasonAcked + "'", worker: "worker_id", attempt: "attempt",
		at: "started_at", trace: "nullif(u_trace, '{}'::jsonb)",
	}.cte()
	evReported = batchEvent{
		src: "updated", job: "id", seq: "event_seq", queue: "queue", typ: "type", from: "l_from", to: "state",
		reason: "CASE WHEN state = 'DONE' THEN '" + queue.ReasonSucceeded + "' ELSE failure_reason END",
		err:    "CASE WHEN state = 'DONE' THEN '' ELSE l_error END",
		worker: "worker_id", attempt: "attempt", at: "u_finished_at",
		via: "CASE WHEN l_from = 'ASSIGNED' THEN started_at END", trace: "nullif(u_trace, '{}'::jsonb)",
	}.cte()
)

// JobAckMany implements store.DispatchStore.
func (s *Store) JobAckMany(ctx context.Context, leases []store.JobLease) ([]store.LeaseOutcome, error) {
	if err := store.ValidateDispatchBatch(len(leases)); err != nil {
		return nil, err
	}
	b := newLeaseBatch(len(leases))
	var (
		ids      []string
		attempts []int32
		workers  []string
		started  []int64
	)
	for i, l := range leases {
		if b.Add(i, l) {
			ids = append(ids, b.Outcomes[i].ID)
			attempts = append(attempts, int32(l.Attempt)) // Validate bounds it to int32
			workers = append(workers, l.WorkerID)
			started = append(started, l.Bounded().StartedAgo.Microseconds())
		}
	}
	if len(ids) > 0 {
		rows, err := s.dispatch.Query(ctx, sqlJobAckMany, ids, attempts, workers, started)
		if err != nil {
			return nil, errs.Wrap("ack jobs", err)
		}
		if err := b.collect(rows, leases, queue.StateAssigned); err != nil {
			return nil, errs.Wrap("ack jobs", err)
		}
	}
	return b.Finish(leases, true), nil
}

// JobReportMany implements store.DispatchStore. The result checksum is computed here
// (queue.Checksum), not in SQL. Error and Reason are stored with NUL bytes and invalid UTF-8
// replaced by U+FFFD.
//
// Each report names the state its job leaves: ASSIGNED first (a short job's report carries its
// ack), then, for a report the statement did not apply although the job still held the lease in
// one of the two live states, the other one (see sqlJobReportMany). A lease is thus tried at most
// twice — three times when the ack raced the first two statements — before it is stale.
func (s *Store) JobReportMany(ctx context.Context, reports []store.JobReportParams) ([]store.LeaseOutcome, error) {
	if err := store.ValidateDispatchBatch(len(reports)); err != nil {
		return nil, err
	}
	batch, leases, bounded := sqlstore.NewReportBatch(reports)
	b := leaseBatch{batch}
	from := make(map[int]queue.State, len(b.Sent)) // lease index → the state named
	todo := slices.Clone(b.Sent)
	for _, i := range todo {
		from[i] = queue.StateAssigned
	}
	for round := 0; len(todo) > 0; round++ {
		rows, err := s.dispatch.Query(ctx, sqlJobReportMany, reportArgs(b, bounded, todo, from)...)
		if err != nil {
			return nil, errs.Wrap("report jobs", err)
		}
		again, err := b.collectReports(rows, todo, leases, from, round < maxReportRounds-1)
		if err != nil {
			return nil, errs.Wrap("report jobs", err)
		}
		todo = again
	}
	return b.Finish(leases, false), nil
}

// maxReportRounds bounds JobReportMany's statements per batch: ASSIGNED, RUNNING, and once more
// for an ack that committed between the first two.
const maxReportRounds = 3

// reportArgs are sqlJobReportMany's parameters for the leases todo (indexes into reports).
func reportArgs(b leaseBatch, reports []store.JobReportParams, todo []int, from map[int]queue.State) []any {
	n := len(todo)
	var (
		ids       = make([]string, 0, n)
		attempts  = make([]int32, 0, n)
		workers   = make([]string, 0, n)
		successes = make([]bool, 0, n)
		results   = make([][]byte, 0, n)
		checksums = make([]string, 0, n)
		errTexts  = make([]string, 0, n)
		reasons   = make([]string, 0, n)
		permanent = make([]bool, 0, n)
		runtimes  = make([]int64, 0, n)
		retryMS   = make([]int64, 0, n)
		started   = make([]int64, 0, n)
		states    = make([]string, 0, n)
	)
	for _, i := range todo {
		r := reports[i]
		ids = append(ids, b.Outcomes[i].ID)
		attempts = append(attempts, int32(r.Attempt)) // Validate bounds it to int32
		workers = append(workers, r.WorkerID)
		successes = append(successes, r.Success)
		permanent = append(permanent, !r.Success && r.Permanent)
		runtimes = append(runtimes, r.Runtime.Microseconds())
		started = append(started, r.StartedAgo.Microseconds())
		retryMS = append(retryMS, retryAfterMS(r))
		states = append(states, string(from[i]))
		if r.Success {
			results = append(results, r.Result)
			checksums = append(checksums, storedChecksum(r.Result))
			errTexts = append(errTexts, "")
			reasons = append(reasons, "")
			continue
		}
		reason := r.Reason
		if reason == "" {
			reason = queue.DefaultFailureReason
		}
		results = append(results, nil)
		checksums = append(checksums, "")
		errTexts = append(errTexts, pgText(r.Error))
		reasons = append(reasons, pgText(reason))
	}
	return []any{ids, attempts, workers, successes, results, checksums, errTexts, reasons, permanent, runtimes,
		retryMS, started, states}
}

// collectReports reads one sqlJobReportMany round for the leases todo. It returns the leases to
// send again, naming the other live state: not applied while the job, as the statement's snapshot
// had it, still held the lease (another state than the one named, or the same one when the change
// committed after the snapshot). With retry false they are stale instead.
func (b leaseBatch) collectReports(rows pgx.Rows, todo []int, leases []store.JobLease, from map[int]queue.State,
	retry bool) ([]int, error) {
	defer rows.Close()
	seen := make([]bool, len(todo))
	var again []int
	for rows.Next() {
		var (
			ord              int64
			applied, started bool
		)
		j, err := scanJob(leadingRow{rows, []any{&ord, &applied, &started}})
		if err != nil {
			return nil, err
		}
		if ord < 1 || int(ord) > len(todo) || seen[ord-1] {
			return nil, fmt.Errorf("result row for unexpected item %d", ord)
		}
		seen[ord-1] = true
		i := todo[ord-1]
		if applied {
			b.Outcomes[i].Job, b.Outcomes[i].Started = j, started
			continue
		}
		l := leases[i]
		held := j.Attempt == l.Attempt && j.WorkerID == l.WorkerID &&
			(j.State == queue.StateAssigned || j.State == queue.StateRunning)
		if held && retry {
			if from[i] == queue.StateAssigned {
				from[i] = queue.StateRunning
			} else {
				from[i] = queue.StateAssigned
			}
			again = append(again, i)
			continue
		}
		b.Outcomes[i].Err = fmt.Errorf("%w: job %s is %s at attempt %d held by %q; the lease is attempt %d "+
			"held by %q in %v", queue.ErrStaleAttempt, j.ID, j.State, j.Attempt, j.WorkerID, l.Attempt,
			l.WorkerID, []queue.State{queue.StateAssigned, queue.StateRunning})
	}
	if err := rows.Err(); err != nil {
		return nil, err
	}
	for k, ok := range seen {
		if !ok {
			i := todo[k]
			b.Outcomes[i].Err = fmt.Errorf("%w: %s", queue.ErrJobNotFound, b.Outcomes[i].ID)
		}
	}
	return again, nil
}

// retryAfterMS is a failure's RetryAfter in whole milliseconds (rounded up, so the retry is never
// earlier than asked), within 0..store.MaxRetryAfter; 0 for a success or a permanent failure.
func retryAfterMS(r store.JobReportParams) int64 {
	if r.Success || r.Permanent || r.RetryAfter <= 0 {
		return 0
	}
	d := min(r.RetryAfter, store.MaxRetryAfter)
	return int64((d + time.Millisecond - 1) / time.Millisecond)
}

// collect reads the (ord, applied, job) rows of a lease statement. from lists the states a lease
// may be applied in, for the message of a stale outcome.
func (b leaseBatch) collect(rows pgx.Rows, leases []store.JobLease, from ...queue.State) error {
	defer rows.Close()
	seen := make([]bool, len(b.Sent))
	for rows.Next() {
		var (
			ord              int64
			applied, started bool
		)
		j, err := scanJob(leadingRow{rows, []any{&ord, &applied, &started}})
		if err != nil {
			return err
		}
		if ord < 1 || int(ord) > len(b.Sent) || seen[ord-1] {
			return fmt.Errorf("result row for unexpected item %d", ord)
		}
		seen[ord-1] = true
		i := b.Sent[ord-1]
		if applied {
			b.Outcomes[i].Job, b.Outcomes[i].Started = j, started
			continue
		}
		l := leases[i]
		b.Outcomes[i].Err = fmt.Errorf("%w: job %s is %s at attempt %d held by %q; the lease is attempt %d "+
			"held by %q in %v", queue.ErrStaleAttempt, j.ID, j.State, j.Attempt, j.WorkerID, l.Attempt,
			l.WorkerID, from)
	}
	if err := rows.Err(); err != nil {
		return err
	}
	for k, ok := range seen {
		if !ok {
			i := b.Sent[k]
			b.Outcomes[i].Err = fmt.Errorf("%w: %s", queue.ErrJobNotFound, b.Outcomes[i].ID)
		}
	}
	return nil
}

// leadingRow scans columns that precede the job columns.
type leadingRow struct {
	pgx.Row
	lead []any
}

func (r leadingRow) Scan(dest ...any) error {
	all := make([]any, 0, len(r.lead)+len(dest))
	return r.Row.Scan(append(append(all, r.lead...), dest...)...)
}

// leaseBatch is sqlstore.LeaseBatch with this store's ways of reading a statement's result rows into it.
type leaseBatch struct{ *sqlstore.LeaseBatch }

func newLeaseBatch(n int) leaseBatch { return leaseBatch{sqlstore.NewLeaseBatch(n)} }
