package postgres

import (
	"context"
	"strings"
	"unicode/utf8"

	"github.com/jackc/pgx/v5"

	"github.com/jq-dev/jq/queue"
	"github.com/jq-dev/jq/store"
	"github.com/jq-dev/jq/store/internal/sqlstore"
)

var _ store.DispatchStore = (*Store)(nil)

// dispatchEdges are the state changes the dispatch statements hard-code in SQL. They bypass
// JobTransition's CheckTransition, so init checks them against the transition table instead: a
// table change that outlaws one of them stops every program (and test) that links this package.
var dispatchEdges = []struct{ from, to queue.State }{
	{queue.StatePending, queue.StateAssigned}, // sqlJobAssignMany
	{queue.StateAssigned, queue.StateRunning}, // sqlJobAckMany, implicit ack of sqlJobReportMany
	{queue.StateRunning, queue.StateDone},     // sqlJobReportMany
	{queue.StateRunning, queue.StateFailed},   // sqlJobReportMany
}

func checkDispatchEdges() error {
	for _, e := range dispatchEdges {
		if err := queue.CheckTransition(e.from, e.to); err != nil {
			return errs.Wrap("dispatch SQL hard-codes an edge the transition table refuses", err)
		}
	}
	return nil
}

func init() {
	if err := checkDispatchEdges(); err != nil {
		panic(err)
	}
}

// The batch statements take their items as parallel arrays expanded by unnest … WITH ORDINALITY,
// not as one JSON parameter expanded by json_to_recordset: BenchmarkDispatchEncoding, 1,000-item
// batches (PostgreSQL 15, 2 vCPUs): report input 4.3–6.0 ms with arrays against 5.8–6.3 ms with
// JSON (bytea travels as base64), ack input a tie (~2 ms). pgx sends the arrays in binary; []string
// beats []uuid.UUID for uuid[], which pgx encodes through reflection.
//
// Input columns are prefixed i_ and locked ones l_, so that they never collide with the job columns
// that RETURNING and jobColumns name.
// sqlAssignedEvents is the CTE of every assignment statement that writes the PENDING→ASSIGNED events
// of the jobs its CTE "updated" returns (with their new event_seq), at their updated_at.
var sqlAssignedEvents = batchEvent{
	src: "updated", job: "id", seq: "event_seq", queue: "queue", typ: "type", from: "'PENDING'",
	to: "'ASSIGNED'", reason: "'" + queue.ReasonAssigned + "'", worker: "worker_id", attempt: "attempt",
	at: "updated_at", trace: "nullif(trace_context, '{}'::jsonb)",
}.cte()

var (
	// Walks jobs_dispatch_idx in order: queue equality, then the index order (priority DESC,
	// created_at, id), the literal state = 'PENDING' matching the index predicate; not_before is
	// INCLUDEd in the index, and LIMIT stops the walk. A paused queue is a one-time filter (an
	// InitPlan evaluated once, not per row). ORDER BY names j.id: a bare id would bind to the output
	// column id::text and sort text instead of following the index (TestJobDuePlan).
	sqlJobDue = `-- name: job_due
SELECT j.id::text, j.priority, j.created_at
FROM jobs j
WHERE j.queue = $1 AND j.state = 'PENDING' AND j.not_before <= now()
  AND NOT EXISTS (SELECT 1 FROM queues WHERE name = $1 AND paused)
ORDER BY j.priority DESC, j.created_at, j.id
LIMIT $2`

	// locked takes the row lock of each job (see dispatch_lease.go for the shape) and keeps those
	// still PENDING. It skips rows another transaction holds: that one is assigning the job (or
	// otherwise changing it), so waiting could only end in a failed compare-and-set — or in a
	// deadlock between batches that list shared ids in different orders. With the lock held and the
	// state checked on the newest row version, the UPDATE only needs the id. attempt+1 is the new
	// fencing token; event_seq+1 numbers the event.
	sqlJobAssignMany = `-- name: job_assign_many
WITH input AS (
    SELECT * FROM unnest($2::uuid[]) WITH ORDINALITY AS t(i_id, i_ord)
),
locked AS MATERIALIZED (
    SELECT j.id AS l_id, i_ord AS l_ord
    FROM input
    CROSS JOIN LATERAL (
        SELECT id, state, queue FROM jobs WHERE id = i_id
        OFFSET 0 FOR NO KEY UPDATE SKIP LOCKED
    ) j
    -- A paused queue dispatches nothing, even a job that was already in its ready set.
    WHERE j.state = 'PENDING' AND NOT EXISTS (SELECT 1 FROM queues q WHERE q.name = j.queue AND q.paused)
),
updated AS (
    UPDATE jobs SET
        state      = 'ASSIGNED',
        attempt    = attempt + 1,
        worker_id  = $1,
        event_seq  = event_seq + 1,
        ev         = coalesce(ev, '{0}') || pg_current_xact_id(),
        updated_at = now()
    FROM locked
    WHERE id = l_id
    RETURNING l_ord, event_seq, ` + jobColumns + `
),
` + sqlAssignedEvents + `
SELECT ` + jobColumns + ` FROM updated ORDER BY l_ord`
)

// sqlJobClaim is dispatch in one statement (River's claim, plus the events). locked walks
// jobs_dispatch_idx in order — queue equality, then (priority DESC, created_at, id), the literal
// state = 'PENDING' matching the index predicate, not_before INCLUDEd — and locks what it returns,
// skipping rows another transaction holds; the lock re-reads the newest row version, so a job a
// concurrent writer moved out of PENDING is not returned. A paused queue is a one-time filter. The
// UPDATE then finds each row by the ctid of the version locked (a TID scan, not a second walk of
// jobs_pkey: ~25 % of the statement's time at 100 jobs). The lock, held to the end of the statement's
// transaction, keeps that version the newest; were it not, the update's re-check of ctid would skip
// the row (left PENDING), never touch another. It runs on the dispatch pool: its cached generic plan
// is that index walk on any table (dispatchParams; TestHotPlansOnEmptyTable).
//
// $4 is the worker's types ('{}': every type), a filter on the rows the walk reads: the same plan
// whatever the worker registered, and for '{}' one array length per row. A typed worker's claim
// walks on past the jobs of other types (they stay in place for their workers), so its cost
// grows with how many of those are due ahead of its own (docs/architecture.md,
// "Dispatch"). type never changes, so the lock's re-check of a row needs no more than this.
var sqlJobClaim = `-- name: job_claim
WITH locked AS MATERIALIZED (
    SELECT j.ctid AS l_ctid
    FROM jobs j
    WHERE j.queue = $1 AND j.state = 'PENDING' AND j.not_before <= now()
      AND (cardinality($4::text[]) = 0 OR j.type = ANY($4::text[]))
      AND NOT EXISTS (SELECT 1 FROM queues WHERE name = $1 AND paused)
    ORDER BY j.priority DESC, j.created_at, j.id
    LIMIT $3
    FOR NO KEY UPDATE SKIP LOCKED
),
updated AS (
    UPDATE jobs SET
        state      = 'ASSIGNED',
        attempt    = attempt + 1,
        worker_id  = $2,
        event_seq  = event_seq + 1,
        ev         = coalesce(ev, '{0}') || pg_current_xact_id(),
        updated_at = now()
    FROM locked
    WHERE jobs.ctid = l_ctid
    RETURNING event_seq, ` + jobColumns + `
),
` + sqlAssignedEvents + `
SELECT ` + jobColumns + ` FROM updated ORDER BY priority DESC, created_at, id`

// JobClaim implements store.DispatchStore.
func (s *Store) JobClaim(ctx context.Context, p store.JobClaimParams) ([]*queue.Job, error) {
	types := p.Types
	if types == nil {
		types = []string{} // not NULL: cardinality(NULL) would match no job
	}
	if p.Weighted() {
		return s.jobClaimWeighted(ctx, p, types)
	}
	rows, err := s.dispatch.Query(ctx, sqlJobClaim, p.Queue, p.WorkerID, p.Limit, types)
	if err != nil {
		return nil, errs.Wrap("claim jobs", err)
	}
	jobs, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (*queue.Job, error) { return scanJob(r) })
	if err != nil {
		return nil, errs.Wrap("claim jobs", err)
	}
	return jobs, nil
}

// JobDue implements store.DispatchStore. An unknown queue has no due jobs (an empty result, not
// ErrQueueNotFound).
func (s *Store) JobDue(ctx context.Context, p store.JobDueParams) ([]store.DueJob, error) {
	rows, err := s.pool.Query(ctx, sqlJobDue, p.Queue, p.Limit)
	if err != nil {
		return nil, errs.Wrap("due jobs", err)
	}
	due, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (store.DueJob, error) {
		var d store.DueJob
		err := r.Scan(&d.ID, &d.Priority, &d.CreatedAt)
		d.CreatedAt = d.CreatedAt.UTC()
		return d, err
	})
	if err != nil {
		return nil, errs.Wrap("due jobs", err)
	}
	return due, nil
}

// JobAssignMany implements store.DispatchStore. The ids come canonical, malformed ones dropped
// (store/storewrap); repeats of an id are dropped before the statement.
func (s *Store) JobAssignMany(ctx context.Context, p store.JobAssignParams) ([]*queue.Job, error) {
	ids := sqlstore.UniqueIDs(p.IDs)
	if len(ids) == 0 {
		return nil, nil
	}
	rows, err := s.dispatch.Query(ctx, sqlJobAssignMany, p.WorkerID, ids)
	if err != nil {
		return nil, errs.Wrap("assign jobs", err)
	}
	jobs, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (*queue.Job, error) { return scanJob(r) })
	if err != nil {
		return nil, errs.Wrap("assign jobs", err)
	}
	return jobs, nil
}

// pgText makes a caller's free text storable in a text column: PostgreSQL refuses NUL bytes and
// invalid UTF-8, and one bad error message must not fail a whole batch of reports.
func pgText(s string) string {
	if utf8.ValidString(s) && !strings.ContainsRune(s, 0) {
		return s
	}
	return strings.ReplaceAll(strings.ToValidUTF8(s, "\uFFFD"), "\x00", "\uFFFD")
}
