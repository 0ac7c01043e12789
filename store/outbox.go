package store

import (
	"context"
	"fmt"
	"time"

	"github.com/jq-dev/jq/queue"
)

// MaxOutboxBatch bounds one claim of the outbox relay.
const MaxOutboxBatch = 10_000

// OutboxStore is the outbox relay's view of the events (FR-038, I8): every state change already
// wrote its event in the same statement, and the relay moves events to Kafka in id order. Events
// are append-only: publishing one writes nothing to it; the relay keeps a cursor, the id of the
// last event published, which it advances only past ids that no running transaction can still
// commit (migration 000012).
//
// A claim is a lease on the cursor, not a transaction: the relay publishes with nothing open in the
// database, so a slow or unreachable broker never holds a connection, a transaction or row locks.
// One relay at a time holds the lease; the others find nothing to claim. A relay that dies or stalls
// loses the lease when it expires, and the next claim publishes the same events again, with the
// same (job_id, seq). Delivery is at least once, and each job's events are published in seq order.
type OutboxStore interface {
	// EventsClaim leases the cursor for p.Lease and returns up to p.Limit events after it, in id
	// order (the order they must be published in). The events stored under one id — a batch of
	// one statement's transitions, or the two transitions of one row — come together, even past
	// p.Limit when they are the claim's first; none while another relay's lease is live, or
	// while every event after the cursor may still be joined by an earlier one being committed.
	// Errors: ErrInvalidArgument (limit or lease out of range).
	EventsClaim(ctx context.Context, p EventsClaimParams) (OutboxClaim, error)
	// EventsMarkPublished moves the cursor past the claim's events and ends its lease. A claim
	// whose lease another relay has taken since changes nothing and returns ErrStaleAttempt (that
	// relay publishes the events again). An empty claim is a no-op.
	EventsMarkPublished(ctx context.Context, c OutboxClaim) error
	// EventsRelease ends the claim's lease without moving the cursor (its publish failed), so the
	// next claim may take the events at once instead of after the lease. A lease taken over since
	// is left alone.
	EventsRelease(ctx context.Context, c OutboxClaim) error
	// OutboxBacklog counts the unpublished events and the age of the first one in id order, by the
	// database's clock; zero values when there are none.
	OutboxBacklog(ctx context.Context) (OutboxBacklog, error)
}

// OutboxClaim is a leased batch of events.
type OutboxClaim struct {
	Events []OutboxEvent
	// Lease is the claim's fencing token: marking or releasing applies only while it is the
	// cursor's latest.
	Lease int64
	// Through is the id the cursor moves to when the claim is marked published: the last event's
	// id, or beyond it over ids that were never committed.
	Through int64
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
	ID int64 // the event's outbox id, the publish order: shared by the events stored together
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
