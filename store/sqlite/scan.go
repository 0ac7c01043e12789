package sqlite

import (
	"encoding/json"
	"fmt"
	"time"

	"github.com/jq-dev/jq/queue"
	"github.com/jq-dev/jq/store/internal/sqlstore"
)

// Column lists shared by every query that returns a row, and the scanners that read them in that
// order (the Postgres store's, in SQLite's types).
const (
	jobColumns = `id, queue, type, payload, priority, state, max_retries, retry_count, attempt,
		ttl_ms, timeout_ms, not_before, expires_at, idempotency_key, labels, keep_result, trace_context,
		worker_id, last_error, failure_reason, result, result_checksum,
		created_at, updated_at, started_at, completed_at, no_retry, cancel_requested, principal, result_size`

	// leanJobColumns: without payload, labels, trace context and result (sqlstore.LeanJob).
	leanJobColumns = `id, queue, type, NULL, priority, state, max_retries, retry_count, attempt,
		ttl_ms, timeout_ms, not_before, expires_at, idempotency_key, NULL, keep_result, NULL,
		worker_id, last_error, failure_reason, NULL, result_checksum,
		created_at, updated_at, started_at, completed_at, no_retry, cancel_requested, principal, result_size`

	// jobPageColumns: without payload and result, followed by their sizes.
	jobPageColumns = `id, queue, type, NULL, priority, state, max_retries, retry_count, attempt,
		ttl_ms, timeout_ms, not_before, expires_at, idempotency_key, labels, keep_result, trace_context,
		worker_id, last_error, failure_reason, NULL, result_checksum,
		created_at, updated_at, started_at, completed_at, no_retry, cancel_requested, principal, result_size,
		length(payload), coalesce(length(result), 0)`

	queueColumns = `name, max_retries, ttl_ms, priority_weights, backoff_base_ms, backoff_max_ms, paused,
		created_at, updated_at, result_retention_ms, max_wait_ms`

	eventColumns = `job_id, seq, queue, type, coalesce(from_state, ''), to_state, reason, error,
		worker_id, attempt, created_at`

	// workerColumns needs the table alias w: RunningJobs is counted from jobs.
	workerColumns = `w.id, w.hostname, w.status, w.concurrency, w.queues, w.version,
	(SELECT count(*) FROM jobs j WHERE j.worker_id = w.id AND j.state IN ('ASSIGNED', 'RUNNING')),
	w.started_at, w.last_heartbeat_at, w.shutdown_requested, w.principal, w.breakers, w.types`
)

// scanner is a *sql.Row or *sql.Rows.
type scanner interface{ Scan(dest ...any) error }

// us is a time as stored: microseconds since the epoch.
func us(t time.Time) int64 { return t.UnixMicro() }

// usPtr is a nullable time: nil for the zero time.
func usPtr(t time.Time) any {
	if t.IsZero() {
		return nil
	}
	return t.UnixMicro()
}

func fromUS(v int64) time.Time { return time.UnixMicro(v).UTC() }

// tm scans a time column (INTEGER microseconds, or NULL: the zero time).
type tm struct{ t *time.Time }

func (d tm) Scan(src any) error {
	switch v := src.(type) {
	case nil:
		*d.t = time.Time{}
	case int64:
		*d.t = fromUS(v)
	default:
		return fmt.Errorf("sqlite: time column holds %T", src)
	}
	return nil
}

// blob scans a BLOB column keeping NULL (nil) apart from an empty value ([]byte{}): a kept empty
// result is not a missing one. (Scanning into *[]byte makes both nil.)
type blob struct{ b *[]byte }

func (c blob) Scan(src any) error {
	switch v := src.(type) {
	case nil:
		*c.b = nil
	case []byte:
		*c.b = append([]byte{}, v...) // the driver's bytes are valid only until the next Scan
	case string:
		*c.b = []byte(v)
	default:
		return fmt.Errorf("sqlite: BLOB column holds %T", src)
	}
	return nil
}

// jsonCol scans a JSON text column into v (NULL leaves v as it is).
type jsonCol struct{ v any }

func (c jsonCol) Scan(src any) error {
	switch b := src.(type) {
	case nil:
		return nil
	case string:
		if b == "{}" || b == "[]" {
			// The common case (no labels, no trace context, no breakers): no decoder run. A
			// slice target still gets its empty, non-nil value.
			if l, ok := c.v.(*[]string); ok {
				*l = []string{}
			}
			return nil
		}
		return json.Unmarshal([]byte(b), c.v)
	case []byte:
		return json.Unmarshal(b, c.v)
	default:
		return fmt.Errorf("sqlite: JSON column holds %T", src)
	}
}

// jsonText encodes a value for a JSON text column; an empty map is {} and an empty list [].
func jsonText(v any) string {
	b, err := json.Marshal(v)
	if err != nil {
		panic(fmt.Sprintf("sqlite: encode %T: %v", v, err)) // maps of strings and lists cannot fail
	}
	return string(b)
}

// mapText encodes a string map; nil is {}.
func mapText(m map[string]string) string {
	if len(m) == 0 {
		return "{}"
	}
	return jsonText(m)
}

// listText encodes a string list; nil is [].
func listText(l []string) string {
	if len(l) == 0 {
		return "[]"
	}
	return jsonText(l)
}

// scanJob reads jobColumns (or the lean or page columns, with the page's two sizes in extra).
func scanJob(row scanner, extra ...any) (*queue.Job, error) {
	var (
		j                      queue.Job
		state                  string
		ttlMS, timeoutMS       int64
		labels, traceContext   map[string]string
		payload, result        []byte
		keep, noRetry, cancelR bool
	)
	dst := []any{&j.ID, &j.Queue, &j.Type, &payload, &j.Priority, &state, &j.MaxRetries,
		&j.RetryCount, &j.Attempt, &ttlMS, &timeoutMS, tm{&j.NotBefore}, tm{&j.ExpiresAt}, &j.IdempotencyKey,
		jsonCol{&labels}, &keep, jsonCol{&traceContext}, &j.WorkerID, &j.LastError, &j.FailureReason, blob{&result},
		&j.ResultChecksum, tm{&j.CreatedAt}, tm{&j.UpdatedAt}, tm{&j.StartedAt}, tm{&j.CompletedAt},
		&noRetry, &cancelR, &j.Principal, &j.ResultSize}
	if err := row.Scan(append(dst, extra...)...); err != nil {
		return nil, err
	}
	j.State = queue.State(state)
	j.TTL = fromMillis(ttlMS)
	j.Timeout = fromMillis(timeoutMS)
	j.KeepResult, j.NoRetry, j.CancelRequested = keep, noRetry, cancelR
	if len(labels) > 0 {
		j.Labels = labels
	}
	if len(traceContext) > 0 {
		j.TraceContext = traceContext
	}
	j.Payload = payload
	if j.Payload == nil {
		j.Payload = []byte{}
	}
	j.Result = result
	if j.State == queue.StateDone && j.ResultChecksum == "" && j.ResultSize == 0 {
		j.ResultChecksum = emptyChecksum
	}
	return &j, nil
}

func scanQueue(row scanner) (*queue.Queue, error) {
	var (
		q                    queue.Queue
		ttlMS, baseMS, maxMS int64
		retentionMS, waitMS  int64
		weights              map[int]int
	)
	if err := row.Scan(&q.Name, &q.MaxRetries, &ttlMS, jsonCol{&weights}, &baseMS, &maxMS, &q.Paused,
		tm{&q.CreatedAt}, tm{&q.UpdatedAt}, &retentionMS, &waitMS); err != nil {
		return nil, err
	}
	sqlstore.QueueMillis{TTL: ttlMS, BackoffBase: baseMS, BackoffMax: maxMS, ResultRetention: retentionMS,
		MaxWait: waitMS, Weights: weights}.Into(&q)
	return &q, nil
}

func scanEvent(row scanner) (queue.Event, error) {
	var (
		e        queue.Event
		from, to string
	)
	if err := row.Scan(&e.JobID, &e.Seq, &e.Queue, &e.Type, &from, &to, &e.Reason, &e.Error,
		&e.WorkerID, &e.Attempt, tm{&e.At}); err != nil {
		return queue.Event{}, err
	}
	e.From = queue.State(from)
	e.To = queue.State(to)
	return e, nil
}

func scanWorker(row scanner) (*queue.Worker, error) {
	var (
		w queue.Worker
		r sqlstore.WorkerRow
	)
	if err := row.Scan(&w.ID, &w.Hostname, &r.Status, &w.Concurrency, jsonCol{&w.Queues}, &w.Version,
		&w.RunningJobs, tm{&w.StartedAt}, tm{&w.LastHeartbeatAt}, &w.ShutdownRequested, &w.Principal,
		jsonCol{&r.Breakers}, jsonCol{&w.Types}); err != nil {
		return nil, err
	}
	r.Into(&w)
	return &w, nil
}

func breakersText(bs []queue.QueueBreaker) string {
	return jsonText(sqlstore.BreakerRows(bs))
}

// Durations are stored as milliseconds (sqlstore.ToMillis).
var toMillis, fromMillis = sqlstore.ToMillis, sqlstore.FromMillis

// emptyChecksum is the SHA-256 of no bytes, the checksum of every empty result.
var emptyChecksum = queue.Checksum(nil)

// storedChecksum is the result_checksum stored for a reported result: "" for an empty one.
func storedChecksum(result []byte) string {
	if len(result) == 0 {
		return ""
	}
	return queue.Checksum(result)
}
