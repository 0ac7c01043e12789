// Package outbox is the transactional-outbox relay (FR-034, FR-036–FR-038, I8): it moves job
// events from Postgres to Kafka without ever making a job wait for Kafka.
//
// Every state change of a job writes its event in the same statement as the change (one event row
// per statement, holding every job it changed; per transition in the embedded store), so the store
// holds every event the moment the change commits: the events are the outbox. The relay, one
// per server replica, loops:
//
//	claim ──► publish ──ok──► mark published (advance the cursor) ──► claim …
//	  │          │
//	  │          └─error──► release the lease, count jq_kafka_publish_errors_total{topic}, back off
//	  └─none──► sleep PollInterval
//
// # Claim (store.OutboxStore.EventsClaim)
//
// Events are append-only: publishing one writes nothing to it. The relay keeps a cursor
// (outbox_cursors, migration 000012), the id of the last event published, and a claim leases that
// cursor and returns the events after it in id order. Nothing stays open in the database while
// Kafka is written: a slow or unreachable broker holds no connection, transaction or lock. One relay
// at a time holds the lease; the other replicas find nothing to claim until it ends.
//
// Transactions commit out of id order, so the cursor moves only up to a horizon: the newest id
// visible at some moment, which becomes final once every transaction running then has ended (the
// oldest running xid is past that moment's xmax). A transaction that drew an earlier id and commits
// later is therefore never skipped, and a job's events (numbered under its row lock) are published
// in seq order. A long-running writing transaction anywhere in the cluster delays the relay (not
// the jobs) until it ends.
//
// # Publish
//
// Each event becomes a protobuf jq.v1.JobEvent (the ListJobEvents item) keyed by job_id, on the
// events topic (jq.job-events); events into DEAD_LETTERED are also published to the dead-letter
// topic (job.dead-lettered). With tracing on, the job's W3C trace context travels as headers. A
// batch is published whole before the next claim, so per-key order holds within a relay.
//
// # Failure handling and delivery
//
//   - Kafka down or slow: the publish fails within PublishTimeout, the lease is released, and the
//     relay retries with exponential backoff (BackoffMin..BackoffMax, jittered). The first failure
//     of an outage is logged as a warning, later ones at debug level, and the recovery once, with
//     the outage's length. Jobs keep flowing; the backlog (jq_outbox_backlog_events,
//     jq_outbox_oldest_unpublished_seconds) grows and drains when Kafka returns.
//   - A batch whose dead-letter publish fails after its events-topic publish succeeded is published
//     again whole: duplicates, never gaps.
//   - An event too large for Kafka (over Options.MaxEventBytes, kafka.max_event_bytes, or refused by
//     the broker as MESSAGE_TOO_LARGE) never holds up the others: it is published without its trace
//     context (header jq-truncated: trace_context), or, if still too large, parked: marked published
//     with its batch but never sent; it stays in Postgres. Several messages refused at once (a whole
//     batch to a partition) are published one at a time, so that only a message refused on its own
//     is trimmed or parked. Counted in jq_outbox_events_oversized_total{action}.
//   - Postgres down: the claim fails; same backoff and logging.
//   - Relay killed after publishing, before marking: the lease expires and another claim publishes
//     the events again (the dead relay's late mark is refused: its lease is no longer the latest). Delivery is at least once; a duplicate carries the same (job_id, seq), which
//     consumers de-duplicate on.
//   - Shutdown: no new claim starts; a batch in flight is finished (published and marked) within
//     PublishTimeout, so a clean stop leaves no duplicates behind.
//
// Kafka disabled in the configuration: no relay runs and events stay in Postgres (job logs still
// read them there).
package outbox
