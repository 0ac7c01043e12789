// Package conformance is the worker conformance suite: one list of scenarios run against every worker
// implementation of the WorkerService protocol — the Go executor (goworker), the TypeScript SDK's
// worker and the Python SDK's worker — each given as a command that runs the same scenario handlers,
// chosen by job type (succeed, fail_once, fail_permanent, sleep, progress, noop). Each scenario is
// checked from the server's event log (ListJobEvents), never from the worker's own account:
//
//   - success: PENDING → ASSIGNED → RUNNING → DONE, the result stored;
//   - failure then retry: RUNNING → FAILED "error" → PENDING, then DONE at attempt 2;
//   - permanent failure: dead-lettered at attempt 1 with its retries unused;
//   - timeout: the job's timeout fails the attempt with reason "timeout";
//   - cancel while running: CancelJob reaches the handler; DEAD_LETTERED "cancelled";
//   - progress: GetJob shows the handler's progress while it runs;
//   - heartbeat loss and self-fencing: the server frozen for longer than 3/4 of the heartbeat
//     timeout but less than the timeout: the worker stops the job itself, reported "lease_expired",
//     and the server never had to declare it lost;
//   - a report after the lease moved is refused: a frozen worker is declared lost, the job runs
//     again elsewhere; when the first worker wakes, nothing it sends changes the job;
//   - graceful shutdown with jobs in flight: SIGTERM; every job in flight ends DONE by that worker,
//     which deregisters (OFFLINE) with no job lost;
//   - a server restart mid-stream: a job running across the restart, and one submitted after it,
//     end DONE by the same worker.
//
// The suite needs the SDKs' runtimes and the TypeScript build (npm ci, tsc): `task test:sdks` runs it
// with JQ_CONFORMANCE=1; elsewhere it skips. JQ_CONFORMANCE_LANGS=go,python selects languages.
package conformance
