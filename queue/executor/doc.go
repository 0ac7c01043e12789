// Package executor is the worker runtime: it registers with the server,
// receives assignments over a stream, runs their handlers with bounded
// concurrency, acknowledges and reports in batches, heartbeats, reconnects,
// and stops in two phases. It talks to the server only through [Conn], which
// [NewRemote] implements over the jq API; it never touches a store.
//
// # A lease in the worker
//
//	stream ─► accept ─slot?─no──► report failure "error" (protocol error, never run)
//	            │ yes
//	            ▼
//	         ACKING ──ack rejected / deadline passed──► dropped (slot freed, not run, not reported)
//	            │ ack ok
//	            ▼
//	         RUNNING (ctx: JobInfo, job timeout, cancel cause)
//	            │ handler returns (panic → error)
//	            ├─ lease lost, or failed after the shutdown grace ─► abandoned (not reported)
//	            ▼
//	         REPORTING (slot freed first) ──report judged or given up──► released
//
// A slot of the concurrency semaphore is taken when an assignment is
// accepted and given back when its handler returns, before the report is
// queued: the server only sends a new assignment after a report arrives, so
// with a correct server the semaphore is never full when an assignment
// arrives; if it is, the assignment is a protocol error, reported as a
// retryable failure without running it (FR-021 holds locally whatever the
// server does). A handler starts only after the server accepted its ack (a
// rejected lease must not run), so the job's timeout counts from the ack as
// the contract says.
//
// A lease is held from the assignment until the server has judged its report.
// Heartbeats carry every held lease, and a (re)opened stream asks for
// concurrency minus the held leases: a lease awaiting its report still
// occupies a slot on the server's side. The worker never opens a stream with
// capacity 0 (the server reads 0 as "full concurrency"); it waits for a
// report to be judged first.
//
// # Batching
//
// Acks and reports each have one sender goroutine. While a call is in
// flight, new items accumulate; the next call takes all of them (up to
// MaxBatch). An idle sender sends a lone item at once: no linger, so
// batching costs no latency and grows with load. A failed call is retried
// with capped exponential backoff and jitter, merged with newer items, until
// each item's deadline (the ack deadline; Options.ReportTimeout for a
// report). A result with ok = false is final ("stale attempt": the job is no
// longer ours): the item is dropped, never retried. A report given up is
// logged at error level, never dropped silently.
//
// # Connection
//
// Register is retried with backoff until the server answers (in --role=all
// the server starts in the same process). When the stream breaks the worker
// registers again (idempotent) and reopens it with backoff (100 ms doubling
// to 5 s, jittered); running jobs are unaffected. Heartbeat answers drive the
// rest: DRAIN closes the stream and takes no more jobs; SHUTDOWN drains and
// stops Run; cancel_job_ids cancel those handlers (reported "cancelled");
// FAILED_PRECONDITION (declared offline) abandons the running jobs, whose
// leases are gone, and registers again; NOT_FOUND registers again.
//
// # Stop
//
// Run's context ending (or SHUTDOWN) starts the two-phase stop: the stream is
// closed (no new work); running jobs get Options.ShutdownGrace to finish and
// are reported; then the rest are cancelled with cause queue.ErrShutdown and
// left to the server's reaper (not reported as failed); the pending reports
// are flushed with their own timeout; the worker deregisters. Acks, reports
// and heartbeats keep flowing until then, on contexts detached from Run's.
package executor
