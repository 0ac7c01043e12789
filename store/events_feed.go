package store

import (
	"context"

	"github.com/jq-dev/jq/queue"
)

// MaxEventsRead bounds one EventsRead.
const MaxEventsRead = 10_000

// EventFeed reads the recorded events in the order they were recorded, for the WatchEvents streams
// (api/server): a reader keeps a cursor (After) and a horizon, and EventsRead returns each event
// once, never one before an earlier one that a running transaction may still commit.
//
// Event ids are drawn before their transactions commit, so a newer id can be visible while an
// older one is not yet. A horizon (the newest id and the snapshot's xmax, as the outbox relay's,
// migration 000012) becomes final once no transaction older than it runs; only then are the events
// up to it read. A reader that finds its horizon not final reads again shortly (Pending).
type EventFeed interface {
	// EventsRead returns the events after p.After up to a final horizon, filtered by queue and
	// principal, and where to read from next. Errors: ErrInvalidArgument (limit out of
	// 1..MaxEventsRead, a bad queue name).
	EventsRead(ctx context.Context, p EventsReadParams) (EventsReadResult, error)
}

// EventsHorizon is a point in the event ids that becomes final once no transaction with an xid
// below XID runs.
type EventsHorizon struct {
	ID  int64
	XID int64
}

// EventsReadParams selects the next events of a feed.
type EventsReadParams struct {
	// After is the cursor: events with a greater id are read.
	After   int64
	Horizon EventsHorizon
	// FromNow makes this a new reader's first read: it returns no events and puts the cursor at the
	// newest event recorded.
	FromNow bool
	// Queue selects one queue's events ("" = every queue); Principal only the events of jobs that
	// principal submitted ("" = every job's).
	Queue     string
	Principal string
	Limit     int // 1..MaxEventsRead
}

// Validate checks the parameters.
func (p EventsReadParams) Validate() error {
	if p.Limit < 1 || p.Limit > MaxEventsRead {
		return invalid("events read limit must be 1..%d, got %d", MaxEventsRead, p.Limit)
	}
	if p.Queue != "" {
		if err := queue.ValidateQueueName(p.Queue); err != nil {
			return invalid("%v", err)
		}
	}
	return nil
}

// EventsReadResult is one read of a feed.
type EventsReadResult struct {
	Events []queue.Event
	// After and Horizon are the next read's.
	After   int64
	Horizon EventsHorizon
	// Pending: newer events exist that were not final yet (or past the limit); read again soon
	// rather than on the next change.
	Pending bool
}

// Next returns the parameters of the read after r, with the same filters and limit as p.
func (r EventsReadResult) Next(p EventsReadParams) EventsReadParams {
	p.After, p.Horizon, p.FromNow = r.After, r.Horizon, false
	return p
}
