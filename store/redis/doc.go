// Package redisstore is the Redis implementation of store.Dispatcher, on go-redis v9: the fast,
// disposable half of dispatch. Postgres decides every job's state and does the claim itself
// (store.DispatchStore.JobClaim: one FOR UPDATE SKIP LOCKED statement that assigns); Redis records
// which worker holds which job — each worker's in-flight set, the processing list of the
// BRPOPLPUSH pattern — and a lock per held job. Key layout: keys.go. Scripts: the .lua files, each
// with a header listing its KEYS, ARGV and reply.
//
// The package shares its name with the driver, which it imports as goredis; callers that need both
// alias one of them.
//
// # A job's life in Redis
//
//	         InflightAdd: ZADD processing:W, SET lock PX (one script per claimed batch)
//	absent ─────────────────────────────────────────────────► in-flight of W (locked)
//	  ▲                                                            │
//	  └──────────── InflightRemove: ZREM, DEL lock ────────────────┘
//	                (attempt ended: report, refused ack, reaper)
//
// Both scripts are O(log n) per job: no list scans, however many jobs a worker holds.
//
// # Invariants
//
//   - Every entry names a job Postgres assigned to that worker when the entry was written. The
//     engine writes it right after the claim commits; a crash in between leaves a job ASSIGNED
//     without an entry, which the reaper recovers from Postgres like any other.
//   - InflightRemove releases a lock only for ids that were in that worker's set, so a removal
//     naming a worker that no longer holds the job cannot unlock it for whoever holds it now.
//   - Redis loss loses nothing (I5). Acks, reports and recovery go to Postgres; the reaper finds a
//     dead worker's jobs there (worker_id, state, deadlines). While Redis is down, claims carry on
//     without entries (counted as direct claims); InflightRemove of an entry that vanished is a
//     no-op.
//
// # Orphaned in-flight entries (the reaper's part)
//
// An entry outlives its purpose when its worker dies, or when the attempt ended while Redis was
// unreachable. Nothing in Redis expires entries. The reaper, for every queue and every worker with
// a session on its replica (InflightList), compares each entry with Postgres (JobHeldBy) and
// removes those whose job the worker no longer holds.
//
// # Errors and contexts
//
// Errors are wrapped with the operation ("redis: inflight add: …"); malformed arguments are
// queue.ErrInvalidArgument before any I/O; redis.Nil never escapes. When the context has ended, its
// error is in the chain (errors.Is(err, context.DeadlineExceeded)) even if go-redis reported a
// socket timeout. Give the client ContextTimeoutEnabled so deadlines bound commands at all. While
// Redis is down every method returns an error; after it comes back (empty) they work again, and
// EVALSHA falls back to EVAL for scripts the server no longer has. The Dispatcher does not own the
// client: close it after the Dispatcher's last use.
package redisstore
