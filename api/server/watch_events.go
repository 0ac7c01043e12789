package apiserver

import (
	"context"
	"time"

	"connectrpc.com/connect"

	"github.com/jq-dev/jq/api"
	"github.com/jq-dev/jq/api/apierr"
	jqv1 "github.com/jq-dev/jq/api/gen/jq/v1"
	"github.com/jq-dev/jq/queue"
	"github.com/jq-dev/jq/store"
)

// watchEventsLimit bounds one read of a WatchEvents stream, and so one message.
const watchEventsLimit = 1000

// watchEventsSoon is the first pause before a stream reads again while newer events wait for
// their horizon (a transaction that began before them still runs); it doubles up to
// watchFeedInterval.
const watchEventsSoon = 5 * time.Millisecond

// WatchEvents streams the events recorded from now on, of one queue or all, as the feed
// (store.EventFeed) makes them final: read again when the watch hub hears a change (this replica's
// engine's at once, any other through the hub's feed), soon while events wait on a horizon, and on
// its own every watchSafety.
func (s *jobService) WatchEvents(ctx context.Context, req *connect.Request[jqv1.WatchEventsRequest], stream *connect.ServerStream[jqv1.WatchEventsResponse]) error {
	q := req.Msg.GetQueue()
	if q != "" {
		if err := queue.ValidateQueueName(q); err != nil {
			return apierr.New(queue.ErrInvalidArgument, "queue: "+err.Error())
		}
		if _, err := s.store.QueueGet(ctx, q); err != nil {
			return err
		}
	}
	release, err := s.openWatch(ctx)
	if err != nil {
		return err
	}
	defer release()
	// Subscribed before the first read: no change between the read and the wait is missed.
	wake, unsubscribe := s.watch.subscribeAll(ctx)
	defer unsubscribe()
	p := store.EventsReadParams{Queue: q, Limit: watchEventsLimit, FromNow: true}
	p.Principal, _ = ownJobsOnly(ctx) // like ListJobs: a producer sees its own jobs' events
	r, err := s.store.EventsRead(ctx, p)
	if err != nil {
		return err
	}
	p = r.Next(p)
	if err := stream.Send(&jqv1.WatchEventsResponse{}); err != nil { // open: what follows is new
		return err
	}
	tick := time.NewTicker(safetyInterval())
	defer tick.Stop()
	soon := time.NewTimer(time.Hour)
	soon.Stop()
	defer soon.Stop()
	pause := watchEventsSoon
	for {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-wake:
		case <-tick.C:
		case <-soon.C:
		}
		if s.engine != nil && s.engine.Closing() {
			return errWatchShutdown
		}
		r, err := s.store.EventsRead(ctx, p)
		if err != nil {
			return err
		}
		p = r.Next(p)
		if len(r.Events) > 0 {
			out := make([]*jqv1.JobEvent, len(r.Events))
			for i := range r.Events {
				out[i] = api.EventProto(&r.Events[i])
			}
			if err := stream.Send(&jqv1.WatchEventsResponse{Events: out}); err != nil {
				return err
			}
		}
		if !r.Pending {
			pause = watchEventsSoon
			continue
		}
		soon.Reset(pause)
		pause = min(2*pause, watchFeedInterval)
	}
}
