package postgres

import (
	"bytes"
	"context"
	"fmt"
	"maps"
	"strconv"
	"strings"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/jq-dev/jq/queue"
	"github.com/jq-dev/jq/store"
)

var (
	// One statement for the whole batch: the jobs and their submission events, from parallel arrays.
	// created_at is now() plus the row's position in microseconds: rows of one batch keep their
	// submit order under the scheduler's (priority, created_at) FIFO instead of tying on one
	// timestamp. A taken idempotency key skips the row (ON CONFLICT DO NOTHING waits for a concurrent
	// insert of the same key to commit first); the caller then reads the existing job back. Rows are
	// inserted in (queue, key) order so that two batches sharing keys take their locks in the same
	// order and cannot deadlock.
	sqlJobInsertMany = `-- name: job_insert_many
WITH input AS (
    SELECT t.*, now() + (t.ord - 1) * interval '1 microsecond' AS created_at
    FROM unnest($1::uuid[], $2::text[], $3::text[], $4::bytea[], $5::smallint[], $6::integer[],
                $7::bigint[], $8::bigint[], $9::timestamptz[], $10::text[], $11::bytea[], $12::text[],
                $13::boolean[], $14::text[], $15::text[], $16::text[], $17::bigint[])
         WITH ORDINALITY AS t(id, queue, type, payload, priority, max_retries, ttl_ms, timeout_ms, run_at,
                              idempotency_key, spec_hash, labels, keep_result, trace_context, principal,
                              limit_keys, limit_gen, ord)
),
-- The KEY SHARE lock on each distinct queue row, taken once per statement, is what the foreign key
-- used to take per row (migration 000003): a queue delete waits for this insert to commit, and an
-- insert behind a delete finds no row. An unknown queue raises, through jq_unknown_queue, the error
-- the foreign key raised, failing the whole statement.
queues_used AS MATERIALIZED (
    SELECT name, max_retries, ttl_ms FROM queues
    WHERE name IN (SELECT DISTINCT queue FROM input)
    FOR KEY SHARE
),
-- A negative max_retries or ttl_ms means "the queue's default", read here rather than in a separate
-- round trip.
resolved AS (
    SELECT i.*,
           coalesce(q.name, jq_unknown_queue(i.queue)) AS r_queue,
           CASE WHEN i.max_retries < 0 THEN q.max_retries ELSE i.max_retries END AS r_max_retries,
           CASE WHEN i.ttl_ms < 0 THEN q.ttl_ms ELSE i.ttl_ms END AS r_ttl_ms
    FROM input i LEFT JOIN queues_used q ON q.name = i.queue
),
inserted AS (
    INSERT INTO jobs (id, queue, type, payload, priority, state, max_retries, ttl_ms, timeout_ms,
                      not_before, expires_at, idempotency_key, spec_hash, labels, keep_result,
                      trace_context, created_at, updated_at, principal, limit_keys, limit_gen)
    SELECT id, r_queue, type, coalesce(payload, ''), priority, 'PENDING', r_max_retries, r_ttl_ms, timeout_ms,
           coalesce(run_at, created_at),
           CASE WHEN r_ttl_ms > 0 THEN coalesce(run_at, created_at) + r_ttl_ms * interval '1 millisecond' END,
           idempotency_key, spec_hash, labels::jsonb, keep_result, trace_context::jsonb,
           created_at, created_at, principal,
           -- The entries computed at submit (store.LimitKeys, joined by queue.EntrySeparator; none:
           -- '', stored as NULL).
           CASE WHEN limit_keys <> '' THEN string_to_array(limit_keys, E'\x1e') END,
           limit_gen
    FROM resolved
    ORDER BY queue, idempotency_key, ord
    ON CONFLICT (queue, idempotency_key) WHERE idempotency_key <> '' DO NOTHING
    RETURNING id, queue, type, max_retries, ttl_ms, not_before, expires_at, created_at, trace_context
),
` + evSubmitted + `
-- Only what the database decided: the rest of each job is what the caller sent (insertedJob).
SELECT id::text, max_retries, ttl_ms, not_before, expires_at, created_at FROM inserted`
)

// evSubmitted records the submissions of an insert: the batch feeds the relay and the events feed;
// job logs read a job's submission from its row (sqlJobEvents), so the job's ev does not point at it.
var evSubmitted = batchEvent{
	src: "inserted", job: "id", seq: "1", queue: "queue", typ: "type", to: "'PENDING'",
	reason: "'submitted'", at: "created_at", trace: "nullif(trace_context, '{}'::jsonb)",
}.cte()

// sqlJobInsertManyUnkeyed is sqlJobInsertMany for a batch without idempotency keys: nothing can
// conflict, so no ON CONFLICT — whose speculative insertion costs a WAL record and a buffer lock
// per row even when the arbiter index's predicate excludes the row (measured: 8.07 → 7.08 WAL
// records per job in batches of 1,000) — and no lock order to keep (ORDER BY).
var sqlJobInsertManyUnkeyed = "-- name: job_insert_many_unkeyed\n" + unkeyed(sqlJobInsertMany)

// unkeyed drops the name line, the ORDER BY and the ON CONFLICT clause of sqlJobInsertMany.
func unkeyed(sql string) string {
	_, body, _ := strings.Cut(sql, "\n")
	for _, clause := range []string{
		"    ORDER BY queue, idempotency_key, ord\n",
		"    ON CONFLICT (queue, idempotency_key) WHERE idempotency_key <> '' DO NOTHING\n",
	} {
		if !strings.Contains(body, clause) {
			panic("postgres: sqlJobInsertMany lost the clause " + clause)
		}
		body = strings.Replace(body, clause, "", 1)
	}
	return body
}

const (
	sqlJobByIdempotencyKey = `-- name: job_by_idempotency_key
SELECT spec_hash, ` + jobColumns + `
FROM jobs
WHERE (queue, idempotency_key) IN (SELECT * FROM unnest($1::text[], $2::text[]))`
)

// JobInsertMany implements store.JobStore.
func (s *Store) JobInsertMany(ctx context.Context, ps []store.JobInsertParams) ([]store.JobInsertResult, error) {
	if len(ps) == 0 {
		return nil, nil
	}

	// Without idempotency keys the batch is one statement, atomic on its
	// own: no BEGIN/COMMIT round trips; a large one is copied (copyJobs). With keys, the read-back of jobs
	// already holding a key must share the insert's transaction, so that a
	// conflicting spec can still fail the whole batch.
	if !anyIdempotencyKey(ps) {
		if len(ps) >= copyMinBatch {
			return copyJobs(ctx, s.pool, ps)
		}
		return insertJobs(ctx, s.pool, ps)
	}
	var results []store.JobInsertResult
	err := pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		var err error
		results, err = insertJobs(ctx, tx, ps)
		return err
	})
	if err != nil {
		return nil, err
	}
	return results, nil
}

func anyIdempotencyKey(ps []store.JobInsertParams) bool {
	for _, p := range ps {
		if p.IdempotencyKey != "" {
			return true
		}
	}
	return false
}

// querier is a pool or a transaction.
type querier interface {
	Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error)
}

func insertJobs(ctx context.Context, tx querier, ps []store.JobInsertParams) ([]store.JobInsertResult, error) {
	sql := sqlJobInsertMany
	if !anyIdempotencyKey(ps) {
		sql = sqlJobInsertManyUnkeyed
	}

	n := len(ps)
	var (
		ids          = make([]string, n)
		queues       = make([]string, n)
		types        = make([]string, n)
		payloads     = make([][]byte, n)
		priorities   = make([]int16, n)
		maxRetries   = make([]int32, n)
		ttls         = make([]int64, n)
		timeouts     = make([]int64, n)
		runAts       = make([]*time.Time, n)
		keys         = make([]string, n)
		hashes       = make([][]byte, n)
		labels       = make([]string, n)
		keepResults  = make([]bool, n)
		traceContext = make([]string, n)
		principals   = make([]string, n)
		index        = make(map[string]int, n) // job id → position in ps
	)
	for i, p := range ps {
		ids[i] = p.ID
		if ids[i] == "" {
			ids[i] = newJobID()
		} else {
			ids[i], _ = store.ParseJobID(p.ID) // validated by the caller (storewrap, InsertTx)
		}
		if _, dup := index[ids[i]]; dup {
			return nil, fmt.Errorf("%w: job id %s appears twice in the batch", queue.ErrInvalidArgument, ids[i])
		}
		index[ids[i]] = i
		queues[i] = p.Queue
		types[i] = p.Type
		payloads[i] = p.Payload
		priorities[i] = int16(p.Priority)
		maxRetries[i] = -1 // the queue's default, resolved in SQL
		if p.MaxRetries != nil {
			maxRetries[i] = int32(*p.MaxRetries)
		}
		ttls[i] = -1 // the queue's default
		if p.TTL > 0 {
			ttls[i] = toMillis(p.TTL)
		}
		timeouts[i] = toMillis(p.Timeout)
		if p.Timeout == 0 {
			timeouts[i] = toMillis(queue.DefaultJobTimeout)
		}
		if !p.RunAt.IsZero() {
			runAts[i] = &p.RunAt
		}
		keys[i] = p.IdempotencyKey
		if p.IdempotencyKey != "" {
			// Only a keyed job's spec is ever compared; without a key the column holds '' — 32 bytes
			// less in every version of the row, and no hash computed.
			hashes[i] = p.SpecHash()
		} else {
			hashes[i] = []byte{}
		}
		labels[i] = jsonText(p.Labels)
		keepResults[i] = p.KeepResult
		traceContext[i] = jsonText(p.TraceContext)
		principals[i] = p.Principal
	}

	limitKeys, limitGens := insertLimits(ps)
	rows, err := tx.Query(ctx, sql, ids, queues, types, payloads, priorities, maxRetries,
		ttls, timeouts, runAts, keys, hashes, labels, keepResults, traceContext, principals, limitKeys, limitGens)
	if err != nil {
		return nil, translateInsertError(err)
	}
	results := make([]store.JobInsertResult, n)
	inserted := 0
	for rows.Next() {
		var (
			id               string
			maxRetries       int
			ttlMS            int64
			notBefore, creat time.Time
			expiresAt        *time.Time
		)
		if err := rows.Scan(&id, &maxRetries, &ttlMS, &notBefore, &expiresAt, &creat); err != nil {
			rows.Close()
			return nil, translateInsertError(err)
		}
		i := index[id]
		results[i] = store.JobInsertResult{Job: insertedJob(id, ps[i], timeouts[i], maxRetries, ttlMS, notBefore, expiresAt, creat)}
		inserted++
	}
	if err := rows.Err(); err != nil {
		return nil, translateInsertError(err)
	}
	if inserted == n {
		return results, nil
	}
	return results, resolveExisting(ctx, tx, ps, hashes, results)
}

// insertLimits are the limit_keys and limit_gen arrays of a batch: nil (NULL arrays, which unnest
// pads with NULLs) when no job of it was keyed at submit — every batch of an unconstrained queue.
func insertLimits(ps []store.JobInsertParams) (keys []*string, gens []*int64) {
	for i, p := range ps {
		if p.Limits == nil {
			continue
		}
		if keys == nil {
			keys, gens = make([]*string, len(ps)), make([]*int64, len(ps))
		}
		k := strings.Join(p.Limits.Entries, queue.EntrySeparator)
		keys[i], gens[i] = &k, &p.Limits.Gen
	}
	return keys, gens
}

// insertedJob is the job as the insert stored it: the caller's spec, the values the statement
// resolved, and the defaults of a new PENDING job.
func insertedJob(id string, p store.JobInsertParams, timeoutMS int64, maxRetries int, ttlMS int64,
	notBefore time.Time, expiresAt *time.Time, created time.Time) *queue.Job {
	payload := p.Payload
	if payload == nil {
		payload = []byte{}
	}
	created = created.UTC()
	j := &queue.Job{
		ID: id, Queue: p.Queue, Type: p.Type, Payload: payload, Priority: p.Priority,
		State: queue.StatePending, MaxRetries: maxRetries, TTL: fromMillis(ttlMS), Timeout: fromMillis(timeoutMS),
		NotBefore: notBefore.UTC(), ExpiresAt: deref(expiresAt), IdempotencyKey: p.IdempotencyKey,
		KeepResult: p.KeepResult, CreatedAt: created, UpdatedAt: created, Principal: p.Principal,
	}
	if len(p.Labels) > 0 {
		j.Labels = maps.Clone(p.Labels)
	}
	if len(p.TraceContext) > 0 {
		j.TraceContext = maps.Clone(p.TraceContext)
	}
	return j
}

// resolveExisting fills the results of rows skipped for a taken idempotency key with the job holding
// the key, or fails the batch when that job's spec differs.
func resolveExisting(ctx context.Context, tx querier, ps []store.JobInsertParams, hashes [][]byte,
	results []store.JobInsertResult) error {
	var qs, ks []string
	for i, r := range results {
		if r.Job == nil {
			qs = append(qs, ps[i].Queue)
			ks = append(ks, ps[i].IdempotencyKey)
		}
	}
	rows, err := tx.Query(ctx, sqlJobByIdempotencyKey, qs, ks)
	if err != nil {
		return errs.Wrap("insert jobs: read idempotent jobs", err)
	}
	type held struct {
		hash []byte
		job  *queue.Job
	}
	existing := map[[2]string]held{}
	for rows.Next() {
		var h held
		if h.job, err = scanJob(prefixedRow{rows, &h.hash}); err != nil {
			rows.Close()
			return errs.Wrap("insert jobs: read idempotent jobs", err)
		}
		existing[[2]string{h.job.Queue, h.job.IdempotencyKey}] = h
	}
	if err := rows.Err(); err != nil {
		return errs.Wrap("insert jobs: read idempotent jobs", err)
	}
	for i, r := range results {
		if r.Job != nil {
			continue
		}
		h, ok := existing[[2]string{ps[i].Queue, ps[i].IdempotencyKey}]
		if !ok {
			// The holder vanished between the insert and this read (its queue was force-deleted).
			return fmt.Errorf("postgres: insert jobs: job holding idempotency key %q of queue %q disappeared",
				ps[i].IdempotencyKey, ps[i].Queue)
		}
		if !bytes.Equal(h.hash, hashes[i]) {
			if h.job.Principal != ps[i].Principal {
				// Another principal's job: its id is not the caller's to learn.
				return fmt.Errorf("%w: key %q of queue %q is used by another job",
					queue.ErrIdempotencyConflict, ps[i].IdempotencyKey, ps[i].Queue)
			}
			return fmt.Errorf("%w: key %q of queue %q belongs to job %s",
				queue.ErrIdempotencyConflict, ps[i].IdempotencyKey, ps[i].Queue, h.job.ID)
		}
		results[i] = store.JobInsertResult{Job: h.job, Existing: true}
	}
	return nil
}

// prefixedRow scans a leading extra column before the job columns.
type prefixedRow struct {
	pgx.Row
	first any
}

func (r prefixedRow) Scan(dest ...any) error {
	return r.Row.Scan(append([]any{r.first}, dest...)...)
}

func translateInsertError(err error) error {
	pe := pgError(err)
	switch {
	case pe == nil:
	case pe.Code == codeForeignKeyViolation:
		// The batch names a queue that does not exist (or was just deleted).
		return fmt.Errorf("%w: %s", queue.ErrQueueNotFound, queueFromFKDetail(pe.Detail))
	case pe.Code == codeUniqueViolation && pe.ConstraintName == "jobs_pkey":
		return fmt.Errorf("%w: job id already exists", queue.ErrInvalidArgument)
	case pe.Code == codeCheckViolation, strings.HasPrefix(pe.Code, "22"):
		// A check constraint or a data exception (class 22: bad encoding, a value
		// out of range): the caller's input, never a reason to fail the others.
		return fmt.Errorf("%w: %s", queue.ErrInvalidArgument, pe.Message)
	}
	return errs.Wrap("insert jobs", err)
}

// queueFromFKDetail turns `Key (queue)=(emails) is not present in table "queues".` into `"emails"`.
func queueFromFKDetail(detail string) string {
	const pre = "Key (queue)=("
	if i := strings.Index(detail, pre); i >= 0 {
		rest := detail[i+len(pre):]
		if j := strings.Index(rest, ")"); j >= 0 {
			return strconv.Quote(rest[:j])
		}
	}
	return detail
}

// newJobID returns a random UUID v4, as SPEC FR-005 and the API contract promise. (A time-ordered v7
// would keep new ids together at the right edge of jobs_pkey; at the table sizes measured here the
// difference was within noise, so the contract wins.)
func newJobID() string { return uuid.NewString() }
