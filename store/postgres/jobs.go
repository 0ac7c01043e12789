package postgres

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/jq-dev/jq/queue"
	"github.com/jq-dev/jq/store"
	"github.com/jq-dev/jq/store/internal/sqlstore"
)

var (
	sqlJobGet = `-- name: job_get
SELECT ` + jobColumns + ` FROM jobs WHERE id = $1`

	// A job's history through its row (migration 000022): the job_events rows an older release
	// wrote (job_events_job_seq_key); the submission from the row itself while its batch exists (a
	// probe of event_batches_xid_idx for ev[1], not a read of that batch of up to thousands of
	// jobs); and the job's elements of the batches ev[2:] points at (event_batches_xid_idx; OFFSET 0
	// keeps that plan whatever the statistics say). Only the job's own row leads anywhere: the
	// events of a deleted job are not read. A row with via is two transitions (eventRow.events).
	sqlJobEvents = `-- name: job_events
WITH j AS MATERIALIZED (SELECT id, queue, type, created_at, ev FROM jobs WHERE id = $1)
SELECT e.seq, e.queue, e.type, coalesce(e.from_state, ''), e.to_state, e.reason, e.error, e.worker_id, e.attempt,
       e.created_at, e.via_at
FROM j JOIN job_events e ON e.job_id = j.id
UNION ALL
SELECT 1, j.queue, j.type, '', 'PENDING', 'submitted', '', '', 0, j.created_at, NULL
FROM j
WHERE EXISTS (SELECT 1 FROM event_batches WHERE xid = j.ev[1])
UNION ALL
SELECT t.seq, t.queue, t.type, coalesce(t.from_state, ''), t.to_state, coalesce(t.reason, ''),
       coalesce(t.error, ''), coalesce(t.worker_id, ''), coalesce(t.attempt, 0), t.at, t.via_at
FROM j
CROSS JOIN LATERAL (SELECT * FROM event_batches WHERE xid = ANY(j.ev[2:]) OFFSET 0) b
CROSS JOIN LATERAL ` + batchUnnest + `
WHERE t.job_id = j.id
ORDER BY 1`

	sqlJobExists = `-- name: job_exists
SELECT EXISTS (SELECT 1 FROM jobs WHERE id = $1)`

	sqlJobStateAttempt = `-- name: job_state_attempt
SELECT state, attempt FROM jobs WHERE id = $1`

	// The compare-and-set of a state change and its event, in one statement (hence one transaction).
	// Under READ COMMITTED a concurrent writer of the same row makes this UPDATE wait and then
	// re-check its WHERE against the new row version: of N racing callers exactly one matches.
	// event_seq is incremented here and the event takes the new value: per-job numbering without a
	// read or a race. The parameters are gathered in p with p_ names so that they cannot be confused
	// with the job's columns in RETURNING. →DONE keeps the result bytes as the report does
	// (sqlJobReportMany): only with keep_result.
	sqlJobTransition = `-- name: job_transition
WITH p AS (
    SELECT $1::uuid AS p_id, $2::text AS p_from, $3::text AS p_to, $4::integer AS p_attempt,
           $5::text AS p_worker, $6::text AS p_reason, $7::text AS p_error,
           $8::timestamptz AS p_not_before, $9::bytea AS p_result, $10::text AS p_checksum,
           $11::boolean AS p_reset_retries, $12::timestamptz AS p_expires_at
),
updated AS (
    UPDATE jobs SET
        state           = p_to,
        attempt         = attempt + CASE WHEN p_to = 'ASSIGNED' THEN 1 ELSE 0 END,
        worker_id       = CASE WHEN p_to = 'ASSIGNED' THEN p_worker ELSE worker_id END,
        started_at      = CASE WHEN p_to = 'RUNNING' THEN now() ELSE started_at END,
        completed_at    = CASE WHEN p_to IN ('DONE', 'DEAD_LETTERED') THEN now()
                               WHEN p_to = 'PENDING' THEN NULL
                               ELSE completed_at END,
        result          = CASE WHEN p_to <> 'DONE' THEN result
                               WHEN keep_result THEN coalesce(p_result, '') END,
        result_checksum = CASE WHEN p_to = 'DONE' THEN p_checksum ELSE result_checksum END,
        result_size     = CASE WHEN p_to = 'DONE' THEN coalesce(octet_length(p_result), 0) ELSE result_size END,
        failure_reason  = CASE WHEN p_to IN ('FAILED', 'DEAD_LETTERED') THEN p_reason ELSE failure_reason END,
        last_error      = CASE WHEN p_to IN ('FAILED', 'DEAD_LETTERED') AND p_error <> '' THEN p_error
                               ELSE last_error END,
        retry_count     = CASE WHEN p_to = 'PENDING' AND p_reset_retries THEN 0
                               WHEN p_to = 'PENDING' AND p_from = 'FAILED' THEN retry_count + 1
                               ELSE retry_count END,
        not_before      = CASE WHEN p_to = 'PENDING' THEN coalesce(p_not_before, now()) ELSE not_before END,
        retry_after_ms  = CASE WHEN p_to = 'PENDING' THEN 0 ELSE retry_after_ms END,
        expires_at      = CASE WHEN p_to = 'PENDING' THEN p_expires_at ELSE expires_at END,
        no_retry        = CASE WHEN p_to = 'PENDING' AND p_reset_retries THEN false ELSE no_retry END,
        cancel_requested = CASE WHEN p_to = 'PENDING' AND p_reset_retries THEN false ELSE cancel_requested END,
        event_seq       = event_seq + 1,
        ev              = coalesce(ev, '{0}') || pg_current_xact_id(),
        updated_at      = now()
    FROM p
    WHERE id = p_id AND state = p_from AND (p_attempt < 0 OR attempt = p_attempt)
    RETURNING ` + jobColumns + `, event_seq, p_from, p_to, p_reason, p_error, p_worker
),
` + evTransition + `
SELECT ` + jobColumns + ` FROM updated`  // id is text already; the cast is a no-op
)

// evTransition records a JobTransition's one transition.
var evTransition = batchEvent{
	src: "updated", job: "id", seq: "event_seq", queue: "queue", typ: "type", from: "p_from", to: "p_to",
	reason: "p_reason", err: "p_error", worker: "coalesce(nullif(p_worker, ''), worker_id)", attempt: "attempt",
	at: "updated_at", trace: "nullif(trace_context, '{}'::jsonb)",
}.cte()

// JobGet implements store.JobStore.
func (s *Store) JobGet(ctx context.Context, id string) (*queue.Job, error) {
	j, err := scanJob(s.pool.QueryRow(ctx, sqlJobGet, id))
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, fmt.Errorf("%w: %s", queue.ErrJobNotFound, id)
	}
	if err != nil {
		return nil, errs.Wrap("get job", err)
	}
	return j, nil
}

// jobListScanBound is how long a job list whose filters have no index (labels, type, completion
// time) may search for its page: its statement_timeout. The queue, state and creation-time filters
// are index ranges and are not bounded. At 1M jobs a label matching nothing walks every queue's
// newest-first index (250–550 ms); 150 ms leaves the console's page of that answer — the list's
// other call, the transaction and the rendering — within its 200 ms, also on a loaded machine, and
// still walks a few hundred thousand jobs; a common label finds its page in a few milliseconds
// (docs/performance.md).
const jobListScanBound = 150 * time.Millisecond

// JobList implements store.JobStore. Only the filters in use become SQL predicates, so each shape of
// query gets a plan that uses its index: jobs_queue_created_idx with a queue, and per queue, merged,
// without one.
func (s *Store) JobList(ctx context.Context, p store.JobListParams) (store.JobListResult, error) {
	limit, cursor, err := p.Validate()
	if err != nil {
		return store.JobListResult{}, err
	}
	l := sqlstore.BuildJobList(listDialect, p, limit, cursor)
	var q string
	if p.Queue != "" {
		q = "-- name: job_list\nSELECT " + jobPageColumns + " FROM jobs WHERE " + l.Where + " ORDER BY " + l.OrderBy + " LIMIT " + l.Limit
	} else {
		// Across queues there is no index by creation time (migration 000016: it cost every
		// transition two index entries): each queue's page comes from jobs_queue_created_idx and
		// the pages are merged, then the page's jobs are read. The cost follows queues × page size.
		q = "-- name: job_list_all\nWITH page AS (\n    SELECT k.k_id, k.k_created FROM queues q CROSS JOIN LATERAL (\n" +
			"        SELECT jobs.id AS k_id, jobs.created_at AS k_created FROM jobs WHERE " + l.Where + " ORDER BY " + l.OrderBy + " LIMIT " + l.Limit + "\n" +
			"    ) k ORDER BY k.k_created " + l.Dir + ", k.k_id " + l.Dir + " LIMIT " + l.Limit + "\n)\n" +
			"SELECT " + jobPageColumns + " FROM page JOIN jobs ON jobs.id = page.k_id ORDER BY page.k_created " + l.Dir + ", page.k_id " + l.Dir
	}
	var bound time.Duration
	if l.Unindexed {
		bound = s.listScanBound
	}
	jobs, cut, err := s.jobPageBounded(ctx, bound, limit, p.WithData, p.MaxBytes, q, l.Args...)
	if isCode(err, codeQueryCanceled) && ctx.Err() == nil {
		return store.JobListResult{}, sqlstore.ErrListScanBound(bound)
	}
	if err != nil {
		return store.JobListResult{}, errs.Wrap("list jobs", err)
	}
	if len(jobs) == 0 && p.Queue != "" {
		// An empty page of a queue that does not exist is a mistake to report, not "no jobs" (a
		// probe by the primary key, only when the page is empty).
		if err := s.queueMustExist(ctx, p.Queue); err != nil {
			return store.JobListResult{}, err
		}
	}
	return sqlstore.JobListPage(p, jobs, cut, limit), nil
}

// listDialect is how JobList's filters are written in Postgres. Without a queue the statement
// walks every queue (q) laterally.
var listDialect = sqlstore.ListDialect{
	Param: func(n int) string { return "$" + strconv.Itoa(n) },
	Queue: func(name string, arg func(any) string) string {
		if name == "" {
			return "jobs.queue = q.name"
		}
		return "queue = " + arg(name)
	},
	Time:     func(t time.Time) any { return t },
	TimeCast: "::timestamptz",
	IDCast:   "::uuid",
	Labels: func(labels map[string]string, arg func(any) string) []string {
		return []string{"labels @> " + arg(jsonText(labels)) + "::jsonb"}
	},
	Now: func(func(any) string) string { return "now()" },
}

// JobTransition implements store.JobStore.
func (s *Store) JobTransition(ctx context.Context, p store.JobTransitionParams) (*queue.Job, error) {
	id := p.ID
	var notBefore, expiresAt *time.Time
	if !p.NotBefore.IsZero() {
		notBefore = &p.NotBefore
	}
	if !p.ExpiresAt.IsZero() {
		expiresAt = &p.ExpiresAt
	}
	var checksum string
	if p.To == queue.StateDone {
		checksum = storedChecksum(p.Result)
	}
	j, err := scanJob(s.pool.QueryRow(ctx, sqlJobTransition, id, string(p.From), string(p.To), p.Attempt,
		p.WorkerID, p.Reason, p.Error, notBefore, p.Result, checksum, p.ResetRetries, expiresAt))
	if err == nil {
		return j, nil
	}
	if !errors.Is(err, pgx.ErrNoRows) {
		return nil, errs.Wrap("transition job", err)
	}
	// Nothing matched: tell a missing job from a lost compare-and-set.
	return nil, errs.TransitionMiss("transition job", p, id, s.pool.QueryRow(ctx, sqlJobStateAttempt, id).Scan)
}

// JobEvents implements store.JobStore.
func (s *Store) JobEvents(ctx context.Context, id string) ([]queue.Event, error) {
	rows, err := s.pool.Query(ctx, sqlJobEvents, id)
	if err != nil {
		return nil, errs.Wrap("job events", err)
	}
	var (
		r      eventRow
		events []queue.Event
	)
	_, err = pgx.ForEachRow(rows, []any{&r.e.Seq, &r.e.Queue, &r.e.Type, &r.from, &r.to, &r.e.Reason, &r.e.Error,
		&r.e.WorkerID, &r.e.Attempt, &r.e.At, &r.via}, func() error {
		r.e.JobID = id
		events = append(events, r.events()...)
		return nil
	})
	if err != nil {
		return nil, errs.Wrap("job events", err)
	}
	if len(events) == 0 {
		// The retention may have taken every event of a job that is still there.
		var exists bool
		if err := s.pool.QueryRow(ctx, sqlJobExists, id).Scan(&exists); err != nil {
			return nil, errs.Wrap("job events", err)
		}
		if !exists {
			return nil, fmt.Errorf("%w: %s", queue.ErrJobNotFound, id)
		}
	}
	return events, nil
}
