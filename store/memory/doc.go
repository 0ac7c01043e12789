// Package memory holds the in-process dispatcher of jq's embedded mode (jq --role=all on an
// embedded store, without Redis): Dispatcher, the store.Dispatcher that store/redis implements for
// a fleet. (The embedded mode needs no Notifier: one engine wakes its own scheduler.)
//
// It serves one process only: every scheduler, session and reaper that uses it must run in the
// process that holds it. Like Redis, it is not the truth: the store decides every job's state
// and does the claim, so losing them (a restart) loses no job; the reaper recovers whatever was held
// from the store, exactly as after a Redis restart.
//
// # A job's life in the Dispatcher
//
//	         InflightAdd: enters W's in-flight set, lock until now+LockTTL
//	absent ─────────────────────────────────────────────────────────────► in-flight of W (locked)
//	  ▲                                                                          │
//	  └──────────── InflightRemove: leaves W's set, lock released ───────────────┘
//	                (attempt ended: report, refused ack, reaper)
//
// The same invariants as store/redis (its doc.go): InflightRemove releases a lock only for ids that
// were in that worker's set, so a stale caller cannot unlock a job for whoever holds it now; a lock
// marks a job as held, it is never the fence (the store's attempt is). Every operation is O(1) per
// job (a map and a linked list per set), under one mutex held only for the batch's own work.
//
// # Memory
//
// Nothing grows without bound: a set is deleted with its last id and a queue with its last set;
// an expired lock is dropped when it is next looked at, and a sweep, run when the lock table has
// doubled since the previous one, drops the rest (amortised O(1) per lock written). In-flight
// entries never expire on their own, as in Redis: those of a dead worker wait for the reaper.
package memory
