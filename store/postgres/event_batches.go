package postgres

import (
	"context"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/jq-dev/jq/queue"
)

// Events by the batch (migration 000022): a statement that changes the state of jobs records all
// their transitions in one event_batches row, parallel arrays with one element per job, and appends
// its transaction's id to each job's ev in the same UPDATE (to {0} on a row of an older release).
// The job's history is read through its row (sqlJobEvents); the relay and the events feed read
// batches and the job_events rows of older releases as one id order (eventRangeSQL), each batch
// whole.

// batchEvent names the SQL expressions, over the rows of src, of the transitions a statement
// records. An empty optional field is its default for every element (a NULL array): from (the
// submission: no state), reason, errors, worker, attempt, via, trace.
type batchEvent struct {
	src                                                          string
	job, seq, queue, typ, from, to, reason, err, worker, attempt string
	at, via, trace                                               string
}

// cte is the CTE "events" writing the batch row; none when src returns no row.
func (e batchEvent) cte() string {
	opt := func(expr string) string {
		if expr == "" {
			return "NULL"
		}
		return "array_agg(" + expr + ")"
	}
	text := func(expr string) string {
		if expr == "" {
			return ""
		}
		return "(" + expr + ")::text"
	}
	// Elements that are usually their default keep the array NULL unless one is not.
	sparse := func(expr, isSet string) string {
		if expr == "" {
			return "NULL"
		}
		return "CASE WHEN bool_or(" + isSet + ") THEN array_agg(" + expr + ") END"
	}
	n := "count(*)"
	if e.via != "" {
		n += " + count(" + e.via + ")"
	}
	cols := []string{
		n + "::integer",
		"array_agg(" + e.job + "::uuid)",
		"array_agg(" + e.seq + ")",
		"array_agg(" + text(e.queue) + ")",
		"array_agg(" + text(e.typ) + ")",
		opt(text(e.from)),
		"array_agg(" + text(e.to) + ")",
		opt(text(e.reason)),
		sparse(text(e.err), e.err+" <> ''"),
		opt(text(e.worker)),
		opt(e.attempt),
		"array_agg(" + e.at + ")",
		sparse(e.via, e.via+" IS NOT NULL"),
		sparse(e.trace, e.trace+" IS NOT NULL"),
	}
	return `events AS (
    INSERT INTO event_batches (n, job_ids, seqs, queues, types, from_states, to_states, reasons, errors,
                               worker_ids, attempts, ats, via_ats, traces)
    SELECT ` + strings.Join(cols, ",\n           ") + `
    FROM ` + e.src + `
    HAVING count(*) > 0
)`
}

// batchUnnest is the FROM item expanding the batch row b, one row per element (t.ord from 1).
const batchUnnest = `unnest(b.job_ids, b.seqs, b.queues, b.types, b.from_states, b.to_states, b.reasons, b.errors,
                b.worker_ids, b.attempts, b.ats, b.via_ats, b.traces)
         WITH ORDINALITY AS t(job_id, seq, queue, type, from_state, to_state, reason, error, worker_id,
                              attempt, at, via_at, trace, ord)`

// eventRangeSQL reads the events with ids in ($1, $2], at most $3 ids (a batch is one id, its
// elements in order; a job_events row is one), in id order. Each row is an element with the
// columns of eventRowColumns, then extra (over e). A batch is never cut: the limit counts ids.
func eventRangeSQL(name, extra string) string {
	if extra != "" {
		extra = ",\n       " + extra
	}
	return `-- name: ` + name + `
WITH ids AS MATERIALIZED (
    SELECT id, b FROM (
        (SELECT id, true AS b FROM event_batches WHERE id > $1 AND id <= $2 ORDER BY id LIMIT $3)
        UNION ALL
        (SELECT id, false FROM job_events WHERE id > $1 AND id <= $2 ORDER BY id LIMIT $3)
    ) u
    ORDER BY id LIMIT $3
),
e AS (
    SELECT e.id, 0::bigint AS ord, e.job_id, e.seq, e.queue, e.type, e.from_state, e.to_state, e.reason,
           e.error, e.worker_id, e.attempt, e.created_at, e.via_at,
           CASE WHEN e.trace_context = 'null'::jsonb -- written without the column (migration 000020)
                THEN (SELECT j.trace_context FROM jobs j WHERE j.id = e.job_id)
                ELSE e.trace_context END AS trace
    FROM ids JOIN job_events e ON e.id = ids.id
    WHERE NOT ids.b
    UNION ALL
    SELECT b.id, t.ord, t.job_id, t.seq, t.queue, t.type, t.from_state, t.to_state, coalesce(t.reason, ''),
           coalesce(t.error, ''), coalesce(t.worker_id, ''), coalesce(t.attempt, 0), t.at, t.via_at, t.trace
    FROM ids JOIN event_batches b ON b.id = ids.id,
         ` + batchUnnest + `
    WHERE ids.b
)
SELECT ` + eventRowColumns + extra + `
FROM e
ORDER BY e.id, e.ord`
}

// eventRowColumns are the columns of eventRangeSQL that eventRow scans.
const eventRowColumns = `e.id, e.job_id::text, e.seq, e.queue, e.type, coalesce(e.from_state, ''), e.to_state,
       e.reason, e.error, e.worker_id, e.attempt, e.created_at, e.via_at, e.trace`

// eventRow is one row of eventRangeSQL: a job_events row or a batch element, with its id.
type eventRow struct {
	id       int64
	e        queue.Event
	from, to string
	via      *time.Time
	trace    map[string]string
}

// dest is the scan destination of eventRowColumns, then extra.
func (r *eventRow) dest(extra ...any) []any {
	return append([]any{&r.id, &r.e.JobID, &r.e.Seq, &r.e.Queue, &r.e.Type, &r.from, &r.to, &r.e.Reason,
		&r.e.Error, &r.e.WorkerID, &r.e.Attempt, &r.e.At, &r.via, &r.trace}, extra...)
}

// events returns the row's transitions: one, or two for an element that holds a start and an
// outcome (splitTransitions). The row's fields are reset for the next scan.
func (r *eventRow) events() []queue.Event {
	r.e.From, r.e.To, r.e.At = queue.State(r.from), queue.State(r.to), r.e.At.UTC()
	e, via := r.e, r.via
	r.e, r.via, r.trace = queue.Event{}, nil, nil
	if first, two := splitTransitions(&e, via); two {
		return []queue.Event{first, e}
	}
	return []queue.Event{e}
}

// forEachEventRow scans rows of eventRangeSQL.
func forEachEventRow(rows pgx.Rows, r *eventRow, extra []any, fn func() error) error {
	_, err := pgx.ForEachRow(rows, r.dest(extra...), fn)
	return err
}

// Deleting jobs deletes their events (migration 000003: there is no foreign key) in the same
// transaction, after the jobs' delete, whose row locks waited for any state change in flight: the
// job_events rows of an older release by job id, and the jobs' elements of the batches their ev
// points at (the submission's included), each batch rewritten without them or deleted when
// nothing is left. Only published events go (at or below the relay's cursor) unless $3 (Kafka is
// off): an unpublished one is still owed to Kafka (I8); the relay publishes it (the job being gone
// does not matter) and the retention pass deletes it later.
var sqlDeleteJobEvents = `-- name: delete_job_events
WITH bound AS (
    SELECT CASE WHEN $3 THEN 9223372036854775807
                ELSE coalesce((SELECT id FROM outbox_cursors WHERE name = '` + outboxCursor + `'), 0) END AS b
),
legacy AS (
    DELETE FROM job_events WHERE job_id = ANY($1::uuid[]) AND id <= (SELECT b FROM bound)
),
hit AS MATERIALIZED (
    SELECT eb.id AS h_id,
           array_agg(t.o ORDER BY t.o) FILTER (WHERE NOT t.job_id = ANY($1::uuid[])) AS keep
    FROM event_batches eb
    CROSS JOIN LATERAL unnest(eb.job_ids) WITH ORDINALITY AS t(job_id, o)
    WHERE eb.xid = ANY($2::text[]::xid8[]) AND eb.id <= (SELECT b FROM bound)
    GROUP BY eb.id
    HAVING bool_or(t.job_id = ANY($1::uuid[]))
),
emptied AS (
    DELETE FROM event_batches eb USING hit WHERE eb.id = h_id AND keep IS NULL
)
UPDATE event_batches b SET
    n = cardinality(keep) + (SELECT count(*) FROM unnest(keep) i WHERE b.via_ats[i] IS NOT NULL)::integer,
    ` + keepElements("job_ids", "seqs", "queues", "types", "from_states", "to_states", "reasons", "errors",
	"worker_ids", "attempts", "ats", "via_ats", "traces") + `
FROM hit
WHERE b.id = h_id AND keep IS NOT NULL`

// keepElements is the SET list that keeps, of each array column, the elements at the positions in
// keep (a NULL array stays NULL).
func keepElements(cols ...string) string {
	set := make([]string, len(cols))
	for i, c := range cols {
		set[i] = c + " = CASE WHEN b." + c + " IS NOT NULL THEN ARRAY(SELECT b." + c +
			"[k.i] FROM unnest(keep) WITH ORDINALITY AS k(i, o) ORDER BY k.o) END"
	}
	return strings.Join(set, ",\n    ")
}

// deletedJobs are the ids of deleted jobs and the transactions that wrote their events.
type deletedJobs struct {
	ids, xids []string
}

// collect reads rows of (id, ev as text[]).
func (d *deletedJobs) collect(rows pgx.Rows) error {
	var (
		id string
		ev []string
	)
	_, err := pgx.ForEachRow(rows, []any{&id, &ev}, func() error {
		d.ids = append(d.ids, id)
		d.xids = append(d.xids, ev...)
		return nil
	})
	return err
}

// deleteEvents deletes the jobs' events (sqlDeleteJobEvents); all: the unpublished ones too.
func (d *deletedJobs) deleteEvents(ctx context.Context, tx pgx.Tx, all bool) error {
	if len(d.ids) == 0 {
		return nil
	}
	_, err := tx.Exec(ctx, sqlDeleteJobEvents, d.ids, d.xids, all)
	return err
}
