package postgres

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgtype"

	"github.com/jq-dev/jq/queue"
	"github.com/jq-dev/jq/store"
	"github.com/jq-dev/jq/store/internal/sqlstore"
)

// copyMinBatch is the smallest batch inserted with COPY. COPY costs two round trips more than the
// one-statement insert (BEGIN and COMMIT around the queue lock and the two COPYs), which a batch
// of this size repays many times over; smaller batches — the group commits of single submits —
// keep the statement.
const copyMinBatch = 64

// sqlCopyHead starts a COPY insert: the transaction's time, from which the rows' created_at is
// computed as the statement form computes it, and the queues the batch names with their
// defaults, under the KEY SHARE lock the statement form takes (a queue delete waits for the
// insert to commit). The outer row exists even when no queue does.
const sqlCopyHead = `-- name: job_copy_head
SELECT now(), q.name, q.max_retries, q.ttl_ms
FROM (VALUES (1)) one(x)
LEFT JOIN LATERAL (
    SELECT name, max_retries, ttl_ms FROM queues WHERE name = ANY($1::text[]) ORDER BY name FOR KEY SHARE
) q ON true`

var (
	copyJobColumns = []string{"id", "queue", "type", "payload", "priority", "state", "max_retries", "ttl_ms",
		"timeout_ms", "not_before", "expires_at", "idempotency_key", "spec_hash", "labels", "keep_result",
		"trace_context", "created_at", "updated_at", "principal", "limit_keys", "limit_gen"}
)

// sqlCopySubmitted is the batch event of a COPY insert: every job's submission, from arrays of the
// elements that vary (the rest is each element's default or a constant).
const sqlCopySubmitted = `-- name: job_copy_submitted
INSERT INTO event_batches (n, job_ids, seqs, queues, types, to_states, reasons, ats, traces)
SELECT cardinality($1::uuid[]), $1, array_fill(1, ARRAY[cardinality($1)]), $2::text[], $3::text[],
       array_fill('PENDING'::text, ARRAY[cardinality($1)]), array_fill('submitted'::text, ARRAY[cardinality($1)]),
       $4::timestamptz[], $5::jsonb[]`

// copyJobs inserts a batch without idempotency keys with COPY: the same rows and submission events
// as sqlJobInsertManyUnkeyed, with the queue defaults and times resolved here from the head
// statement's answer. Rows of a COPY cost less than the rows of an INSERT … SELECT FROM unnest:
// no executor plan, no arrays to build and unnest, one protocol message stream per table.
func copyJobs(ctx context.Context, pool interface {
	Begin(context.Context) (pgx.Tx, error)
}, ps []store.JobInsertParams) ([]store.JobInsertResult, error) {
	n := len(ps)
	ids := make([]pgtype.UUID, n)
	seen := make(map[pgtype.UUID]bool, n)
	queues := map[string]bool{}
	var names []string
	for i, p := range ps {
		var u uuid.UUID
		if p.ID == "" {
			u = uuid.New()
		} else {
			u = uuid.MustParse(p.ID) // validated by the caller
		}
		ids[i] = pgtype.UUID{Bytes: u, Valid: true}
		if seen[ids[i]] {
			return nil, fmt.Errorf("%w: job id %s appears twice in the batch", queue.ErrInvalidArgument, u)
		}
		seen[ids[i]] = true
		if !queues[p.Queue] {
			queues[p.Queue] = true
			names = append(names, p.Queue)
		}
	}

	results := make([]store.JobInsertResult, n)
	err := pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error {
		now, defaults, err := copyHead(ctx, tx, names)
		if err != nil {
			return err
		}
		jobRows := make([][]any, n)
		var (
			queues, types = make([]string, n), make([]string, n)
			ats           = make([]time.Time, n)
			traces        []any // nil: no job has a trace context (a NULL array)
		)
		for i, p := range ps {
			maxRetries, ttlMS, timeoutMS := defaults[p.Queue].For(p)
			created := now.Add(time.Duration(i) * time.Microsecond)
			notBefore := created
			if !p.RunAt.IsZero() {
				notBefore = p.RunAt
			}
			var expiresAt *time.Time
			if ttlMS > 0 {
				e := notBefore.Add(time.Duration(ttlMS) * time.Millisecond)
				expiresAt = &e
			}
			payload := p.Payload
			if payload == nil {
				payload = []byte{}
			}
			var limitKeys []string
			var limitGen *int64
			if p.Limits != nil {
				if len(p.Limits.Entries) > 0 {
					limitKeys = p.Limits.Entries
				}
				limitGen = &p.Limits.Gen
			}
			trace := jsonText(p.TraceContext)
			jobRows[i] = []any{ids[i], p.Queue, p.Type, payload, int16(p.Priority), "PENDING", int32(maxRetries), ttlMS,
				timeoutMS, notBefore, expiresAt, "", []byte{}, jsonText(p.Labels), p.KeepResult,
				trace, created, created, p.Principal, limitKeys, limitGen}
			queues[i], types[i], ats[i] = p.Queue, p.Type, created
			if len(p.TraceContext) > 0 {
				if traces == nil {
					traces = make([]any, n) // SQL NULL elements: no trace context
				}
				traces[i] = trace
			}
			id := uuid.UUID(ids[i].Bytes).String()
			results[i] = store.JobInsertResult{Job: insertedJob(id, p, timeoutMS, maxRetries, ttlMS, notBefore, expiresAt, created)}
		}
		if _, err := tx.CopyFrom(ctx, pgx.Identifier{"jobs"}, copyJobColumns, pgx.CopyFromRows(jobRows)); err != nil {
			return translateInsertError(err)
		}
		if _, err := tx.Exec(ctx, sqlCopySubmitted, ids, queues, types, ats, traces); err != nil {
			return errs.Wrap("insert jobs: events", err)
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return results, nil
}

// copyHead runs sqlCopyHead and fails, as the statement form does, when the batch names a queue
// that does not exist.
func copyHead(ctx context.Context, tx pgx.Tx, names []string) (time.Time, map[string]sqlstore.QueueDefaults, error) {
	rows, err := tx.Query(ctx, sqlCopyHead, names)
	if err != nil {
		return time.Time{}, nil, errs.Wrap("insert jobs", err)
	}
	var now time.Time
	defaults := make(map[string]sqlstore.QueueDefaults, len(names))
	for rows.Next() {
		var (
			name       *string
			maxRetries *int32
			ttlMS      *int64
		)
		if err := rows.Scan(&now, &name, &maxRetries, &ttlMS); err != nil {
			rows.Close()
			return time.Time{}, nil, errs.Wrap("insert jobs", err)
		}
		if name != nil {
			defaults[*name] = sqlstore.QueueDefaults{MaxRetries: int(*maxRetries), TTLMS: *ttlMS}
		}
	}
	if err := rows.Err(); err != nil {
		return time.Time{}, nil, errs.Wrap("insert jobs", err)
	}
	var missing []string
	for _, q := range names {
		if _, ok := defaults[q]; !ok {
			missing = append(missing, strconv.Quote(q))
		}
	}
	if len(missing) > 0 {
		return time.Time{}, nil, fmt.Errorf("%w: %s", queue.ErrQueueNotFound, strings.Join(missing, ", "))
	}
	return now, defaults, nil
}
