package sqlite

import (
	"bytes"
	"context"
	"database/sql"
	"errors"
	"fmt"
	"maps"
	"time"

	"github.com/google/uuid"

	"github.com/jq-dev/jq/queue"
	"github.com/jq-dev/jq/store"
	"github.com/jq-dev/jq/store/internal/sqlstore"
)

const (
	sqlQueueDefaults = `SELECT max_retries, ttl_ms FROM queues WHERE name = ?1`

	sqlJobInsert = `
INSERT INTO jobs (id, queue, type, payload, priority, state, max_retries, ttl_ms, timeout_ms,
                  not_before, expires_at, idempotency_key, spec_hash, labels, keep_result,
                  trace_context, created_at, updated_at, principal, limit_keys, limit_gen)
VALUES (?1, ?2, ?3, ?4, ?5, 'PENDING', ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14, ?15, ?16, ?16, ?17, ?18, ?19)`

	sqlSubmittedEvent = `
INSERT INTO job_events (job_id, job_n, seq, queue, type, from_state, to_state, reason, attempt, created_at)
VALUES (?1, last_insert_rowid(), 1, ?2, ?3, NULL, 'PENDING', 'submitted', 0, ?4)` // right after the job's insert

	sqlJobByIdempotencyKey = `SELECT spec_hash, ` + jobColumns + ` FROM jobs WHERE queue = ?1 AND idempotency_key = ?2`
)

// JobInsertMany implements store.JobStore: the batch is one write, so it is atomic, and the writer
// being the only one, a taken idempotency key is found by a read in the same write.
func (s *Store) JobInsertMany(ctx context.Context, ps []store.JobInsertParams) ([]store.JobInsertResult, error) {
	if len(ps) == 0 {
		return nil, nil
	}
	ids, err := newJobIDs(ps)
	if err != nil {
		return nil, err
	}
	var results []store.JobInsertResult
	err = s.write(ctx, func(tx *wtx) error {
		var err error
		results, err = insertJobs(tx, ps, ids)
		return err
	})
	if err != nil {
		return nil, err
	}
	return results, nil
}

// newJobIDs returns the ids of a validated batch: each job's own, or a new one.
func newJobIDs(ps []store.JobInsertParams) ([]string, error) {
	ids := make([]string, len(ps))
	seen := make(map[string]bool, len(ps))
	for i, p := range ps {
		ids[i] = p.ID
		if ids[i] == "" {
			ids[i] = uuid.NewString()
		} else {
			ids[i], _ = store.ParseJobID(p.ID) // validated by the caller
		}
		if seen[ids[i]] {
			return nil, fmt.Errorf("%w: job id %s appears twice in the batch", queue.ErrInvalidArgument, ids[i])
		}
		seen[ids[i]] = true
	}
	return ids, nil
}

func insertJobs(tx *wtx, ps []store.JobInsertParams, ids []string) ([]store.JobInsertResult, error) {
	defaults := map[string]sqlstore.QueueDefaults{}
	for _, p := range ps {
		if _, ok := defaults[p.Queue]; ok {
			continue
		}
		var d sqlstore.QueueDefaults
		err := tx.queryRow(sqlQueueDefaults, p.Queue).Scan(&d.MaxRetries, &d.TTLMS)
		if errors.Is(err, sql.ErrNoRows) {
			return nil, fmt.Errorf("%w: %q", queue.ErrQueueNotFound, p.Queue)
		}
		if err != nil {
			return nil, errs.Wrap("insert jobs", err)
		}
		defaults[p.Queue] = d
	}
	results := make([]store.JobInsertResult, len(ps))
	for i, p := range ps {
		var hash []byte
		if p.IdempotencyKey != "" {
			hash = p.SpecHash()
			existing, err := jobByKey(tx, p, hash)
			if err != nil {
				return nil, err
			}
			if existing != nil {
				results[i] = store.JobInsertResult{Job: existing, Existing: true}
				continue
			}
		}
		// Rows of one batch keep their submit order under the scheduler's (priority, created_at)
		// FIFO: each is a microsecond after the one before.
		created := tx.now.Add(time.Duration(i) * time.Microsecond).Truncate(time.Microsecond)
		maxRetries, ttlMS, timeoutMS := defaults[p.Queue].For(p)
		notBefore := created
		if !p.RunAt.IsZero() {
			notBefore = p.RunAt.UTC().Truncate(time.Microsecond)
		}
		var expiresAt time.Time
		if ttlMS > 0 {
			expiresAt = notBefore.Add(fromMillis(ttlMS))
		}
		payload := p.Payload
		if payload == nil {
			payload = []byte{}
		}
		if hash == nil {
			hash = []byte{}
		}
		// The entries computed at submit (store.LimitKeys), as a constrained claim stores them.
		var limitKeys, limitGen any
		if p.Limits != nil {
			limitKeys, limitGen = entriesText(p.Limits.Entries), p.Limits.Gen
		}
		_, err := tx.exec(sqlJobInsert, ids[i], p.Queue, p.Type, payload, p.Priority, maxRetries, ttlMS,
			timeoutMS, us(notBefore), usPtr(expiresAt), p.IdempotencyKey, hash, mapText(p.Labels),
			p.KeepResult, mapText(p.TraceContext), us(created), p.Principal, limitKeys, limitGen)
		if err != nil {
			return nil, translateInsertError(err)
		}
		if _, err := tx.exec(sqlSubmittedEvent, ids[i], p.Queue, p.Type, us(created)); err != nil {
			return nil, errs.Wrap("insert jobs", err)
		}
		j := &queue.Job{
			ID: ids[i], Queue: p.Queue, Type: p.Type, Payload: payload, Priority: p.Priority,
			State: queue.StatePending, MaxRetries: maxRetries, TTL: fromMillis(ttlMS), Timeout: fromMillis(timeoutMS),
			NotBefore: notBefore, ExpiresAt: expiresAt, IdempotencyKey: p.IdempotencyKey,
			KeepResult: p.KeepResult, CreatedAt: created, UpdatedAt: created, Principal: p.Principal,
		}
		if len(p.Labels) > 0 {
			j.Labels = maps.Clone(p.Labels)
		}
		if len(p.TraceContext) > 0 {
			j.TraceContext = maps.Clone(p.TraceContext)
		}
		results[i] = store.JobInsertResult{Job: j}
	}
	return results, nil
}

// jobByKey returns the job holding p's idempotency key (nil when none), or fails the batch when
// that job's spec differs.
func jobByKey(tx *wtx, p store.JobInsertParams, hash []byte) (*queue.Job, error) {
	var held []byte
	j, err := scanJob(prefixedRow{tx.queryRow(sqlJobByIdempotencyKey, p.Queue, p.IdempotencyKey), &held})
	if errors.Is(err, sql.ErrNoRows) {
		return nil, nil
	}
	if err != nil {
		return nil, errs.Wrap("insert jobs: read idempotent jobs", err)
	}
	if !bytes.Equal(held, hash) {
		if j.Principal != p.Principal {
			// Another principal's job: its id is not the caller's to learn.
			return nil, fmt.Errorf("%w: key %q of queue %q is used by another job",
				queue.ErrIdempotencyConflict, p.IdempotencyKey, p.Queue)
		}
		return nil, fmt.Errorf("%w: key %q of queue %q belongs to job %s",
			queue.ErrIdempotencyConflict, p.IdempotencyKey, p.Queue, j.ID)
	}
	return j, nil
}

// prefixedRow scans a leading extra column before the job columns.
type prefixedRow struct {
	scanner
	first any
}

func (r prefixedRow) Scan(dest ...any) error {
	return r.scanner.Scan(append([]any{r.first}, dest...)...)
}

func translateInsertError(err error) error {
	switch {
	case isUnique(err):
		return fmt.Errorf("%w: job id already exists", queue.ErrInvalidArgument)
	case isCheck(err):
		return fmt.Errorf("%w: %w", queue.ErrInvalidArgument, err)
	}
	return errs.Wrap("insert jobs", err)
}
