package store

import (
	"context"
	"time"
)

// MaxEventsPruneBatch bounds one EventsPrune statement, so a pass never holds a long transaction or
// locks a huge set of rows.
const MaxEventsPruneBatch = 10_000

// RetentionStore is the maintenance pass's view of the events: published events are kept
// for the configured period, for `job logs`, then deleted in bounded batches. An unpublished event
// is never deleted while Kafka is on, whatever its age: it is still owed to Kafka (the outbox, I8).
// With Kafka off (kafka.enabled false) no event is ever published, so the pass also deletes
// unpublished events past the retention (EventsPruneParams.Unpublished); otherwise the events would
// grow without end.
type RetentionStore interface {
	// EventsPrune deletes the published events (at or below the outbox relay's cursor; with
	// p.Unpublished every event) that were created more than p.OlderThan ago (by the database's
	// clock) among the p.Limit oldest, as one id range, and returns how many it deleted. An event
	// newer than the retention among them (a transaction that overlapped older ones) waits for a
	// later pass, and so do the older events after it. Concurrent calls wait for each other's rows
	// and skip what is gone. The job rows and their event_seq are untouched, so later events keep
	// numbering from where the job was. Errors: ErrInvalidArgument (p out of range).
	EventsPrune(ctx context.Context, p EventsPruneParams) (int64, error)
	// JobResultsDrop drops the result bytes of up to limit DONE jobs whose queue's
	// result_retention passed since they completed (by the database's clock), oldest first per
	// queue, and returns how many it dropped, by queue (no entry for a queue with none). The
	// checksum and size stay; the job is otherwise untouched (no event: its state does not
	// change). A fetch afterwards finds no result. Concurrent calls skip each other's rows.
	// Errors: ErrInvalidArgument (limit out of 1..MaxResultsDropBatch).
	JobResultsDrop(ctx context.Context, limit int) (map[string]int, error)
}

// MaxResultsDropBatch bounds one JobResultsDrop statement, as MaxEventsPruneBatch does for events.
const MaxResultsDropBatch = 10_000

// EventsPruneParams selects one batch of expired events.
type EventsPruneParams struct {
	OlderThan time.Duration // >= 1 ms: the retention period
	Limit     int           // 1..MaxEventsPruneBatch
	// Unpublished: Kafka is off, so unpublished events are not owed to anyone and expire too.
	Unpublished bool
}

// Validate checks the params before any I/O.
func (p EventsPruneParams) Validate() error {
	if p.OlderThan < time.Millisecond {
		return invalid("event retention must be at least 1ms, got %s", p.OlderThan)
	}
	if p.Limit < 1 || p.Limit > MaxEventsPruneBatch {
		return invalid("events prune limit must be 1..%d, got %d", MaxEventsPruneBatch, p.Limit)
	}
	return nil
}
