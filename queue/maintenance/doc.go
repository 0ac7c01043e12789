// Package maintenance is the server's periodic housekeeping of Postgres. One pass does three things:
// event retention, result retention, then progress retention.
//
// # Event retention
//
// The events are both the job history (`job logs`, FR-031) and the Kafka outbox. Once an event is
// published it is only kept for the history, for server.event_retention_h (7 days by default); the
// pass deletes what is older:
//
//	every Interval (1 min):
//	    repeat EventsPrune(OlderThan: retention, Limit: BatchSize)   -- one short statement each
//	    until a batch comes back short, MaxBatches were run, or the server stops
//
// Invariants:
//   - An unpublished event is never deleted, whatever its age: it is still owed to Kafka (I8). With
//     Kafka disabled nothing is ever published, so nothing is ever deleted; the table then grows
//     with the job history, like the jobs table.
//   - Each statement deletes at most BatchSize rows (5,000) through an index on published events'
//     created_at, so it holds few locks for a short time, and a pass costs the rows it deletes, not
//     the size of the table. MaxBatches (100) bounds one pass; a larger backlog (the first pass
//     after an upgrade, or after raising the rate) is worked off over the following passes.
//   - Ages are measured by the database's clock, one clock for every replica. Every replica runs
//     the pass; their statements skip each other's rows (SKIP LOCKED), so they share the work and
//     never wait on one another.
//   - Only events go: jobs keep their rows and their event_seq, so a job's next event continues
//     its numbering and Kafka consumers still de-duplicate on (job_id, seq). A long-lived job's
//     `job logs` may start after seq 1.
//
// # Result retention
//
// A job submitted with keep_result keeps its result bytes after it is DONE until a consuming fetch
// (GetJobResult consume) takes them, or until its queue's result_retention (24 h by default) has
// passed since completed_at (seed 001). After the events, each pass runs
//
//	repeat JobResultsDrop(Limit: BatchSize)   -- NULLs the bytes of up to BatchSize expired results
//	until a batch comes back short or MaxBatches were run
//
// The statement walks a partial index of the rows that still hold result bytes, queue by queue from
// the oldest, so it costs the results it drops, not the size of the jobs table. Only the bytes go:
// the checksum, size, state and updated_at stay, and no event is written. A fetch afterwards finds
// no result (found = false), exactly as for a job submitted without keep_result. The count is
// Stats.ResultsDropped (jq_results_dropped_total) and one log line per queue and pass.
//
// # Progress retention
//
// With Options.Progress, each pass then deletes the job_progress rows whose attempt is
// over — the job finished, was retried or was deleted — in batches of BatchSize. Reads never show
// such a row (they join the job's current attempt), so this only keeps the table to the jobs
// running now and those that reported lately.
//
// Failure handling: a failed statement ends the pass; the next pass retries. The failure is logged
// once when it starts and once when a pass succeeds again, never at every attempt.
package maintenance
