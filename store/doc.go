// Package store declares what jq needs from its system of record, as interfaces owned by their
// consumers, with one params struct per call and noun-first method names. Backends (store/postgres,
// store/sqlite) implement them; store/storetest is the executable form of this contract and every
// backend must pass it.
//
// The package holds the contract only: interfaces, their params and results, the params' validation
// and the limits it applies (internal/archtest checks every exported name). What the two SQL stores
// share beyond it — the job list query built once with a dialect per store, the state filter, the
// claims' step arithmetic, page cutting, id-prefix ranges — is in store/internal/sqlstore, which
// nothing outside store can import.
//
// # Errors
//
// Backends translate their driver's errors into the queue package's sentinels, wrapped with detail:
// ErrQueueNotFound, ErrQueueExists, ErrQueueNotEmpty, ErrJobNotFound, ErrWorkerNotFound,
// ErrIllegalTransition, ErrStaleAttempt, ErrIdempotencyConflict and ErrInvalidArgument. Anything else
// is an infrastructure failure (connection lost, timeout) that the caller may retry. Argument checks
// live in this package (the Validate methods) and run once, in store/storewrap, the wrapper every
// component reaches a store through, before the backend sees the call: every backend refuses the same
// input with the same error, and a malformed job id is ErrInvalidArgument, never ErrJobNotFound.
//
// # Submitting jobs
//
// JobInsertMany is atomic for the whole batch: every job with its first event (from none to PENDING,
// reason "submitted"), or nothing. Unset fields take defaults at insert time and the stored job shows
// the effective values:
//
//   - MaxRetries is a pointer: nil takes the queue's max_retries, a pointer to 0 means no retries.
//   - TTL 0 takes the queue's TTL (itself 0 = none). The TTL counts from when the job is due
//     (NotBefore), and again from the new NotBefore each time the job returns to PENDING.
//   - Timeout 0 becomes queue.DefaultJobTimeout (30 s).
//   - RunAt zero makes the job due at once (NotBefore = CreatedAt).
//
// Jobs of one batch get strictly increasing CreatedAt in input order, so FIFO within a priority keeps
// submit order inside a batch. Durations are stored with millisecond precision (a positive value under
// 1 ms rounds up), times with microsecond precision.
//
// Idempotency: a non-empty IdempotencyKey is unique per queue. Re-submitting it with the same spec (see
// JobInsertParams.SpecHash: queue, type, payload, priority, max_retries, ttl, timeout, run_at, labels,
// keep_result, as submitted) returns the original job with Existing set and writes nothing; a
// different spec fails the batch with ErrIdempotencyConflict. This holds under any number of
// concurrent submitters of the same key.
//
// # State changes
//
// The engine (queue/engine) is the only caller that changes job state, and the store computes no rule:
// what a cancel, a retry, a failure or a deadline leads to is decided in Go (queue/rules.go) and the
// store writes the decided values. Every state change is a compare-and-set on (state, attempt) that
// also appends the job's next event (Seq n+1) — both or neither — through one of: JobTransition (one
// job, any edge of the table: operator commands), the dispatch batches (JobAssignMany, JobAckMany,
// JobReportMany), and the reaper's (JobFailMany, JobSettleFailed with its decision callback,
// JobExpireTTL). Each checks queue.CheckTransition for the edges it writes before any I/O. Of any number of concurrent callers expecting the same state and attempt, exactly
// one succeeds; the others get ErrStaleAttempt and change nothing. The attempt is the fencing token:
// PENDING→ASSIGNED increments it, and workers' later reports carry it.
//
// retry_count counts automatic retries: it increments on FAILED→PENDING (not on →FAILED), and
// ResetRetries (an operator's manual retry, FR-013) sets it to 0. So a job may be re-queued
// automatically while RetryCount < MaxRetries (queue.Job.RetriesLeft), checked by the caller before
// it asks for FAILED→PENDING. JobTransitionParams documents every field each target state sets.
//
// # Queues
//
// QueueDelete refuses a queue holding any job, terminal ones included (its history would vanish with
// it), with ErrQueueNotEmpty; Force deletes the jobs and their events too. A submit racing with a
// delete either commits first (and is deleted, or blocks a non-forced delete) or fails with
// ErrQueueNotFound.
//
// # Listing
//
// JobList pages newest first, ordered by (CreatedAt DESC, ID DESC), or oldest first with Ascending
// (CreatedAt ASC, ID ASC: the same order walked the other way), with keyset cursors: a walk visits
// every job that existed when it began exactly once, whatever is submitted or changes state meanwhile
// (jobs submitted during the walk may or may not appear). Cursors are opaque, versioned tokens; a
// malformed one is ErrInvalidArgument. NextCursor is empty on the last page.
//
// # Workers
//
// Heartbeats use the store's clock, not the caller's, so ages compare across server replicas. A
// deregistered (OFFLINE) worker keeps its row; only WorkerRegister brings it back ONLINE.
package store
