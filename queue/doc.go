// Package queue is jq's domain: jobs, queues, workers, the job state machine, retry backoff and the
// sentinel errors every layer speaks. It does no I/O and imports nothing of the project, so the engine,
// the stores and the API can all depend on it without depending on each other.
//
// # Job states
//
// A job is in exactly one of six states (FR-009):
//
//	submit ─► PENDING ─claim─► ASSIGNED ─ack─► RUNNING ─success─► DONE
//	           ▲  │             │     │           │
//	           │  │             │     │ assign    │ failure
//	           │  │             │     │ timeout   ▼
//	           │  │             │     └──────► FAILED ─┐
//	           │  │             │                │     │ no retries left
//	           │  │ ttl/cancel  │ cancel         │     ▼
//	           │  └─────────────┴────────────────┼─► DEAD_LETTERED
//	           │                                 │     │
//	           └──── retry (backoff or manual) ──┴─────┘ manual retry
//
// The legal moves, and nothing else, are FR-010's eight edges plus the two operator actions of FR-012
// and FR-013:
//
//	from           to             when
//	PENDING        ASSIGNED       the scheduler claims the job
//	PENDING        DEAD_LETTERED  its TTL expired, or an operator cancelled it
//	ASSIGNED       RUNNING        the worker acknowledged it
//	ASSIGNED       FAILED         the assignment timed out
//	ASSIGNED       DEAD_LETTERED  an operator cancelled it (FR-012)
//	RUNNING        DONE           the worker reported success
//	RUNNING        FAILED         failure, execution timeout or worker lost
//	FAILED         PENDING        retry after backoff, or an operator's manual retry
//	FAILED         DEAD_LETTERED  no retries left, or a non-retryable failure
//	DEAD_LETTERED  PENDING        an operator's manual retry (FR-013)
//
// DONE and DEAD_LETTERED are terminal: nothing moves a job out of them on its own; only a manual retry
// brings a dead-lettered job back. Cancelling a RUNNING job is not an edge of its own: it is
// RUNNING→FAILED followed by FAILED→DEAD_LETTERED, two events.
//
// [CanTransition] and [CheckTransition] are the one place this table lives; stores check it before
// they write.
package queue
