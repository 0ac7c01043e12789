package postgres

import (
	"encoding/json"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/jq-dev/jq/queue"
	"github.com/jq-dev/jq/store/internal/sqlstore"
)

// Column lists shared by every query that returns a row, and the scanners that read them in that
// order.
const (
	jobColumns = `id::text, queue, type, payload, priority, state, max_retries, retry_count, attempt,
		ttl_ms, timeout_ms, not_before, expires_at, idempotency_key, labels, keep_result, trace_context,
		worker_id, last_error, failure_reason, result, result_checksum,
		created_at, updated_at, started_at, completed_at, no_retry, cancel_requested, principal, result_size`

	// leanJobColumns are jobColumns with NULL for payload, labels, trace context and result: what the
	// outcomes of acks and reports carry (store.LeaseOutcome), read back for every job of a batch.
	leanJobColumns = `id::text, queue, type, NULL::bytea, priority, state, max_retries, retry_count, attempt,
		ttl_ms, timeout_ms, not_before, expires_at, idempotency_key, NULL::jsonb, keep_result, NULL::jsonb,
		worker_id, last_error, failure_reason, NULL::bytea, result_checksum,
		created_at, updated_at, started_at, completed_at, no_retry, cancel_requested, principal, result_size`

	// jobPageColumns are jobColumns with NULL for payload and result, followed by their sizes:
	// pages read the data of only the jobs that fit their byte budget (see jobPage).
	jobPageColumns = `id::text, queue, type, NULL::bytea, priority, state, max_retries, retry_count, attempt,
		ttl_ms, timeout_ms, not_before, expires_at, idempotency_key, labels, keep_result, trace_context,
		worker_id, last_error, failure_reason, NULL::bytea, result_checksum,
		created_at, updated_at, started_at, completed_at, no_retry, cancel_requested, principal, result_size,
		octet_length(payload), coalesce(octet_length(result), 0)`

	queueColumns = `name, max_retries, ttl_ms, priority_weights, backoff_base_ms, backoff_max_ms, paused,
		created_at, updated_at, result_retention_ms, max_wait_ms`
)

// workerColumns needs the table alias w: RunningJobs is counted from jobs.
const workerColumns = `w.id, w.hostname, w.status, w.concurrency, w.queues, w.version,
	(SELECT count(*) FROM jobs j WHERE j.worker_id = w.id AND j.state IN ('ASSIGNED', 'RUNNING'))::int,
	w.started_at, w.last_heartbeat_at, w.shutdown_requested, w.principal, w.breakers, w.types`

// scanJob reads jobColumns, or jobPageColumns with the two sizes scanned into extra.
func scanJob(row pgx.Row, extra ...any) (*queue.Job, error) {
	var (
		j                                 queue.Job
		state                             string
		ttlMS, timeoutMS                  int64
		expiresAt, startedAt, completedAt *time.Time
		labels, traceContext              map[string]string
	)
	dst := []any{&j.ID, &j.Queue, &j.Type, &j.Payload, &j.Priority, &state, &j.MaxRetries,
		&j.RetryCount, &j.Attempt, &ttlMS, &timeoutMS, &j.NotBefore, &expiresAt, &j.IdempotencyKey,
		&labels, &j.KeepResult, &traceContext, &j.WorkerID, &j.LastError, &j.FailureReason, &j.Result,
		&j.ResultChecksum, &j.CreatedAt, &j.UpdatedAt, &startedAt, &completedAt, &j.NoRetry, &j.CancelRequested, &j.Principal, &j.ResultSize}
	err := row.Scan(append(dst, extra...)...)
	if err != nil {
		return nil, err
	}
	j.State = queue.State(state)
	j.TTL = fromMillis(ttlMS)
	j.Timeout = fromMillis(timeoutMS)
	j.NotBefore = j.NotBefore.UTC()
	j.ExpiresAt = deref(expiresAt)
	j.StartedAt = deref(startedAt)
	j.CompletedAt = deref(completedAt)
	j.CreatedAt = j.CreatedAt.UTC()
	j.UpdatedAt = j.UpdatedAt.UTC()
	if len(labels) > 0 {
		j.Labels = labels
	}
	if len(traceContext) > 0 {
		j.TraceContext = traceContext
	}
	if j.Payload == nil {
		j.Payload = []byte{}
	}
	if j.State == queue.StateDone && j.ResultChecksum == "" && j.ResultSize == 0 {
		j.ResultChecksum = emptyChecksum // see storedChecksum
	}
	return &j, nil
}

func scanQueue(row pgx.Row) (*queue.Queue, error) {
	var (
		q                    queue.Queue
		ttlMS, baseMS, maxMS int64
		retentionMS, waitMS  int64
		weights              map[int]int
	)
	if err := row.Scan(&q.Name, &q.MaxRetries, &ttlMS, &weights, &baseMS, &maxMS, &q.Paused,
		&q.CreatedAt, &q.UpdatedAt, &retentionMS, &waitMS); err != nil {
		return nil, err
	}
	sqlstore.QueueMillis{TTL: ttlMS, BackoffBase: baseMS, BackoffMax: maxMS, ResultRetention: retentionMS,
		MaxWait: waitMS, Weights: weights}.Into(&q)
	q.CreatedAt = q.CreatedAt.UTC()
	q.UpdatedAt = q.UpdatedAt.UTC()
	return &q, nil
}

func scanWorker(row pgx.Row) (*queue.Worker, error) {
	var (
		w queue.Worker
		r sqlstore.WorkerRow
	)
	if err := row.Scan(&w.ID, &w.Hostname, &r.Status, &w.Concurrency, &w.Queues, &w.Version,
		&w.RunningJobs, &w.StartedAt, &w.LastHeartbeatAt, &w.ShutdownRequested, &w.Principal, &r.Breakers, &w.Types); err != nil {
		return nil, err
	}
	r.Into(&w)
	w.StartedAt = w.StartedAt.UTC()
	w.LastHeartbeatAt = w.LastHeartbeatAt.UTC()
	return &w, nil
}

// Durations are stored as milliseconds (sqlstore.ToMillis).
var toMillis, fromMillis = sqlstore.ToMillis, sqlstore.FromMillis

func deref(t *time.Time) time.Time {
	if t == nil {
		return time.Time{}
	}
	return t.UTC()
}

// jsonText encodes a string map for a jsonb parameter; nil becomes {} (never JSON null).
func jsonText(m map[string]string) string {
	if len(m) == 0 {
		return "{}"
	}
	b, _ := json.Marshal(m) // cannot fail for a map[string]string
	return string(b)
}

func breakersJSON(bs []queue.QueueBreaker) ([]byte, error) {
	return json.Marshal(sqlstore.BreakerRows(bs))
}

// emptyChecksum is the SHA-256 of no bytes, the checksum of every empty result.
var emptyChecksum = queue.Checksum(nil)

// storedChecksum is the result_checksum column's value for a reported result: its checksum, or ”
// for an empty result (scanJob gives it back as emptyChecksum): the 64 characters of a constant
// stay out of the row of every job that returns nothing (one more row version per job
// would carry them).
func storedChecksum(result []byte) string {
	if len(result) == 0 {
		return ""
	}
	return queue.Checksum(result)
}
