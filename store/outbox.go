package store

import (
	"context"
	"fmt"
	"time"

	"github.com/jq-dev/jq/queue"
)

// MaxOutboxBatch bounds one claim of the outbox relay.
const MaxOutboxBatch = 10_000

// OutboxStore is the outbox relay's view of job_events (FR-038, I8): every state change already
// wrote its event in the same statement, and the relay moves unpublished events to Kafka.
//
// A claim is a lease, not a transaction: the relay publishes with nothing open in the database, so
// a slow or unreachable broker never holds a connection, a transaction or row locks. Events a live
// lease covers are skipped by every other claim, so several replicas do not publish the same events
// in normal operation; an event whose lease expired (its relay died or stalled) is claimed again and
// may be published twice, with the same (job_id, seq). Delivery is at least once.
type OutboxStore interface {
	// EventsClaim leases up to p.Limit of the oldest unpublished events not under a live lease, for
	// p.Lease, and returns them in id order (the order they must be published in). Concurrent claims
	// skip each other's rows. An event is left out while an earlier unpublished event of the same job
	// is leased elsewhere or not in this claim, so a job's events are never split across relays and
	// are published in seq order. Errors: ErrInvalidArgument (limit or lease out of range).
	EventsClaim(ctx context.Context, p EventsClaimParams) ([]OutboxEvent, error)
	// EventsMarkPublished records that the events are in Kafka (published_at = now()). Idempotent:
	// an event already published keeps its first time; unknown ids are ignored.
	EventsMarkPublished(ctx context.Context, ids []int64) error
	// EventsRelease ends the lease of unpublished events (their publish failed), so the next claim
	// may take them at once instead of after the lease. Unknown or published ids are ignored.
	EventsRelease(ctx context.Context, ids []int64) error
	// OutboxBacklog counts the unpublished events and the age of the first one in id order, by the
	// database's clock; zero values when there are none.
	OutboxBacklog(ctx context.Context) (OutboxBacklog, error)
}

// EventsClaimParams selects and leases a batch of unpublished events.
type EventsClaimParams struct {
	Limit int           // 1..MaxOutboxBatch
	Lease time.Duration // >= 1 ms: how long other relays leave the batch alone
}

// Validate checks the params before any I/O.
func (p EventsClaimParams) Validate() error {
	if p.Limit < 1 || p.Limit > MaxOutboxBatch {
		return invalid("outbox claim limit must be 1..%d, got %d", MaxOutboxBatch, p.Limit)
	}
	if p.Lease < time.Millisecond {
		return invalid("outbox claim lease must be at least 1ms, got %s", p.Lease)
	}
	return nil
}

// OutboxEvent is one claimed event with its outbox id.
type OutboxEvent struct {
	ID int64 // job_events.id: global publish order, and the handle to mark or release it
	queue.Event
	// TraceContext is the job's W3C trace context as the submitter sent it (empty when none).
	TraceContext map[string]string
}

// OutboxBacklog is the relay's lag.
type OutboxBacklog struct {
	Events    int64         // unpublished events
	OldestAge time.Duration // age of the first unpublished event in id order
}

// EventSink is where the outbox relay publishes events: Kafka (store/kafka).
type EventSink interface {
	// EventsPublish writes msgs to topic, in order per key, and returns once the broker has
	// acknowledged every one (as its acks setting asks). On error any subset may have been written:
	// the relay publishes the batch again, and consumers de-duplicate on (job_id, seq). Messages
	// refused for their size are named by an *EventsTooLargeError.
	EventsPublish(ctx context.Context, topic string, msgs []EventMessage) error
	// Close flushes and releases the sink's connections.
	Close() error
}

// EventsTooLargeError is an EventsPublish error for messages that the sink or the broker refused as
// too large (Kafka's MESSAGE_TOO_LARGE). Publishing them again as they are fails again; the other
// messages of the call may or may not have been written.
type EventsTooLargeError struct {
	Indexes []int // positions in msgs of the refused messages
	Err     error
}

func (e *EventsTooLargeError) Error() string {
	return fmt.Sprintf("%d of the messages too large: %v", len(e.Indexes), e.Err)
}

func (e *EventsTooLargeError) Unwrap() error { return e.Err }

// EventMessage is one encoded event.
type EventMessage struct {
	Key     []byte // the job id: a job's events share a partition, in order
	Value   []byte // protobuf jq.v1.JobEvent
	Headers []EventHeader
}

// EventHeader is a message header (the job's trace context).
type EventHeader struct {
	Key   string
	Value []byte
}
