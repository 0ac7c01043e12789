// Package executor is the worker runtime: it registers with the server,
// receives assignments over a stream, runs their handlers with bounded
// concurrency, acknowledges and reports in batches, heartbeats, reconnects,
// and stops in two phases. It talks to the server only through [Conn], which
// api/workerconn implements over the jq API; it never touches a store.
//
// # A lease in the worker
//
//	stream ─► accept ─slot?─yes──► RUNNING (handler starts at once; ctx: JobInfo, job timeout, cancel cause)
//	            │ no                  │ still running after AckDelay (or half-way to the deadline): ack;
//	            ▼                     │ ack refused ─► cancelled (lease lost), not reported
//	         prefetch room? ─no──► report failure "error" (protocol error, never run)
//	            │ yes                 │ handler returns (panic → error)
//	            ▼                     ├─ lease lost, or failed after the shutdown grace ─► abandoned (not reported)
//	         QUEUED (no slot; acked  ▼
//	         if it waits half-way ─► REPORTING (slot freed first; the report implies the ack) ──judged──► released
//	         to its deadline; starts
//	         in arrival order when a slot frees)
//
// The assignment is the lease: the server committed it (PENDING→ASSIGNED, the
// attempt as fencing token) before sending it, so a handler starts as soon as
// it arrives and holds a slot; no commit stands between a slot and its
// handler. The start is acknowledged beside the work: only for a job still
// running after AckDelay (default 1 s), and a shorter job's report records
// RUNNING and its outcome in one write. A refused ack means the attempt is no
// longer this worker's: the handler is cancelled and its outcome not reported.
// A crash before any report re-runs the job (at least once); fencing refuses
// the stale attempt's report.
//
// A slot of the concurrency semaphore is taken when a handler starts and given
// back when it returns, before the report is queued. With Prefetch, the server
// sends up to Concurrency+Prefetch assignments; the extra ones wait (QUEUED)
// and start the moment a slot frees. An assignment beyond both is a protocol
// error, reported as a retryable failure without running it (FR-021 holds
// locally whatever the server does).
//
// A lease is held from the assignment until the server has judged its report.
// Self-fencing (fence.go): a worker whose lease has gone unrenewed — no registration or heartbeat
// got through — for 3/4 of the server's worker_heartbeat_timeout, counted from when the last
// successful one was sent, cancels its running jobs and reports them as retryable failures. The
// server counts the same timeout from when it recorded that renewal, later, and needs a reaper
// pass after it, so the worker has stopped at least a quarter of the timeout before another
// worker can be given the job. Both measure elapsed time on their own monotonic clocks: an offset
// between the hosts' wall clocks does not matter. A handler that ignores its context cannot be
// fenced; the exec handler kills its process group at once.
//
// Heartbeats carry every held lease (a cancel in the answer hits only the
// attempt the heartbeat listed), and a (re)opened stream asks for concurrency
// plus prefetch minus the held leases: a lease awaiting its report still
// occupies a place on the server's side. The worker never opens a stream with
// capacity 0 (the server reads 0 as "all of them"); it waits for a report to
// be judged first.
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
// to 2 s, jittered); running jobs are unaffected. The connection's HTTP/2
// pings (api/rpcclient: 1 s silent, 1 s to answer) notice a dead or partitioned
// server within about 2 s, and a dial gives up after 3 s, so the worker is
// back within about 2 s of the network healing. Heartbeat answers drive the
// rest: DRAIN closes the stream and takes no more jobs; an answer without a
// command to a drained worker (the operator resumed it) opens the stream
// again; SHUTDOWN drains for good and stops Run; cancel_job_ids cancel those handlers (reported "cancelled");
// FAILED_PRECONDITION (declared offline) abandons the running jobs, whose
// leases are gone, and registers again; NOT_FOUND registers again.
//
// # Progress
//
// A handler's queue.Progress reaches its task (the ProgressReporter in the job's context) and
// records the latest value; nothing else happens for a job that never reports. progress.go sends
// it over the Conn when it implements ProgressConn (WorkerService.ReportProgress): a task's first
// update at once, later ones at most one per queue.ProgressInterval (1 s) after the previous
// send, the latest value winning; one goroutine sends every due task in one call. An update of a
// task no longer running is dropped; a rejected one (stale lease) is ignored — progress never
// stops a job; a failed call is retried with the latest value after the interval.
//
// # Circuit breakers
//
// With Options.CircuitBreaker on, each queue has a breaker (breaker.go): closed → open when
// the retryable failures of its attempts that finished within the rolling window reach the
// threshold (with at least MinSamples); open → half-open after the cooldown; the first job
// started while half-open is the probe: success closes, failure opens again. Permanent
// failures, cancellations and abandoned jobs are not samples. A change sends a heartbeat at
// once; every heartbeat lists the breakers that are not closed, and the server assigns no job
// of an open queue and at most one at a time of a half-open one. The worker never refuses a
// job: one of an open queue that arrives anyway runs, and does not move the breaker.
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
