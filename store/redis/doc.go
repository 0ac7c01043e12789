// Package redis is the Redis implementation of store.Dispatcher, on go-redis v9: the fast, disposable
// half of dispatch. Postgres decides every job's state; Redis only holds which PENDING jobs are
// ready to hand out, in which order, and which worker took which. Key layout: keys.go. Scripts: the
// .lua files, each with a header listing its KEYS, ARGV and reply.
//
// The package shares its name with the driver, which it imports as goredis; callers that need both
// alias one of them.
//
// # A job's life in Redis
//
//	           ReadyPush: SET lock NX PX, ZADD ready
//	absent ──────────────────────────────────────────► ready (locked)
//	  ▲                                                  │
//	  │                                                  │ Claim: ZPOPMIN ready, RPUSH inflight:W
//	  │                                                  ▼        (one script)
//	  └──────── InflightRemove: LREM, DEL lock ──── in-flight of W (locked)
//	            (attempt ended, or Postgres refused the claim)
//
// A lock expiring moves nothing: a job still in the ready set is re-locked, not duplicated, by the
// next ReadyPush; for one already in flight see the invariants.
//
// The scheduler reads due PENDING jobs from Postgres and calls ReadyPush. A job whose lock is held
// is skipped, which is what stops a second scheduler replica (or the next tick) from queueing it
// twice. Claim pops the best jobs and appends them to the worker's in-flight list in one atomic
// script, so a job is never out of both structures while its lock is held; the engine then
// compare-and-sets PENDING→ASSIGNED in Postgres and calls InflightRemove for the ids the database
// refused (cancelled, expired, taken by someone else). When the attempt ends (report, failure,
// reaper), InflightRemove takes the id out of the list and deletes the lock, so the job — if
// Postgres returns it to PENDING for a retry — can be pushed again at once instead of after the
// lock's TTL.
//
// # Invariants
//
//   - Ordering: ready-set score = (9 − priority) × 4e14 + µs since 2024-01-01 (score.go), exact in
//     a float64; ZPOPMIN yields priority 9 first, oldest first within a priority, job id on a tie —
//     the order of store.DispatchStore.JobDue.
//   - While the lock taken by the ReadyPush that queued a job is held, the job id is in at most one
//     of {the queue's ready set, some worker's in-flight list}, and in it at most once. Claim moves
//     atomically; a second ReadyPush skips the job.
//   - The lock is an optimisation, not the fence. If it expires while the job is still claimable
//     or claimed but not yet ASSIGNED in Postgres (LockTTL shorter than push→claim→CAS, or a
//     crashed engine), a later ReadyPush queues the job again and two workers may claim it; the
//     Postgres compare-and-set on (state, attempt) lets exactly one win, and the loser's engine
//     removes its entry. Choose LockTTL well above the claim-to-CAS time (seconds, not
//     milliseconds); a job sitting unclaimed in the ready set past its TTL is merely re-locked.
//   - InflightRemove releases a lock only for ids that were in that worker's list, so a removal
//     naming a worker that no longer holds the job cannot unlock it for whoever holds it now.
//   - Redis loss loses nothing. Every job in Redis is also PENDING or ASSIGNED/RUNNING in Postgres:
//     the scheduler refills empty ready sets from Postgres on its next pass (no locks survive, so
//     nothing is skipped); ASSIGNED/RUNNING jobs carry on, because acks and reports go to Postgres
//     and InflightRemove of an entry that vanished is a no-op.
//
// # Orphaned in-flight entries (the reaper's part)
//
// An in-flight entry outlives its purpose when its worker dies, or when the engine crashed between
// Claim and the Postgres compare-and-set (the entry names a job still PENDING, or by now assigned to
// another worker). Nothing in Redis expires such entries. The reaper, for every queue and every
// known worker (InflightList), compares each entry with Postgres:
//
//   - job ASSIGNED/RUNNING to that worker at its current attempt: live, keep it — unless the worker
//     is OFFLINE by heartbeat timeout, in which case the reaper first fails the attempt in Postgres
//     (compare-and-set) and then removes the entry;
//   - job in any other state or assigned to another worker: remove it (InflightRemove);
//   - job PENDING: the claim may be in progress (claim → CAS takes milliseconds), so remove the
//     entry only when it was already there on a previous pass at least LockTTL earlier. Removing
//     it releases the lock, so the scheduler can dispatch the job again at once.
//
// Removal is idempotent and every decision is a compare-and-set in Postgres, so two replicas
// reaping at once only duplicate work.
//
// # What callers must know
//
//   - Claim never blocks: Redis does not wake anyone. The engine wakes its sessions when a ReadyPush
//     returns more than 0 (and across replicas through store.Notifier), and polls as a fallback.
//   - ReadyPush returns the number of locks it took, which includes re-locked jobs that were still
//     waiting in the ready set; ReadyLen is the number of distinct jobs waiting.
//   - Claim does not know about paused queues or cancelled jobs: what is in the ready set is handed
//     out, and the Postgres compare-and-set (JobAssignMany) must refuse it. Ids it refuses, and ids
//     whose assignment failed outright, belong in InflightRemove; left alone they stay in the list
//     until the reaper removes them, and their jobs wait for the lock to expire.
//   - The Dispatcher does not own the client: close it after the Dispatcher's last use.
//
// # Errors and contexts
//
// Errors are wrapped with the operation ("redis: claim: …"); malformed arguments are
// queue.ErrInvalidArgument before any I/O; redis.Nil never escapes. When the context has ended, its
// error is in the chain (errors.Is(err, context.DeadlineExceeded)) even if go-redis reported a
// socket timeout. Give the client ContextTimeoutEnabled so deadlines bound commands at all. While
// Redis is down every method returns an error; after it comes back (empty) they work again, and
// EVALSHA falls back to EVAL for scripts the server no longer has.
package redis
