package server

import (
	"context"
	"errors"
	"sync"
	"time"

	"connectrpc.com/connect"

	"github.com/jq-dev/jq/api"
	jqv1 "github.com/jq-dev/jq/api/gen/jq/v1"
	"github.com/jq-dev/jq/queue"
	"github.com/jq-dev/jq/queue/engine"
)

// watchReread is how often a WatchJob stream re-reads its job without a wake-up: the bound on
// how late it sees a change this replica's engine does not announce (the reaper, the retry
// sweep, another replica's commits).
const watchReread = time.Second

// watchHub wakes the WatchJob streams of a job when the engine changes it, and the WatchEvents
// streams when it changes any job.
type watchHub struct {
	mu   sync.Mutex
	subs map[string]map[chan struct{}]struct{}
	any  map[chan struct{}]struct{}
}

func newWatchHub(e *engine.Engine) *watchHub {
	h := &watchHub{subs: map[string]map[chan struct{}]struct{}{}, any: map[chan struct{}]struct{}{}}
	if e != nil {
		e.OnJobChange(h.notify)
	}
	return h
}

// notify runs on the engine's commit paths: a send that would block is dropped, the channel
// already holds a wake-up.
func (h *watchHub) notify(id string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	for ch := range h.subs[id] {
		wakeUp(ch)
	}
	for ch := range h.any {
		wakeUp(ch)
	}
}

func wakeUp(ch chan struct{}) {
	select {
	case ch <- struct{}{}:
	default:
	}
}

// subscribeAll wakes the returned channel whenever the engine changes a job.
func (h *watchHub) subscribeAll() (<-chan struct{}, func()) {
	ch := make(chan struct{}, 1)
	h.mu.Lock()
	defer h.mu.Unlock()
	h.any[ch] = struct{}{}
	return ch, func() {
		h.mu.Lock()
		defer h.mu.Unlock()
		delete(h.any, ch)
	}
}

func (h *watchHub) subscribe(id string) (<-chan struct{}, func()) {
	ch := make(chan struct{}, 1)
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.subs[id] == nil {
		h.subs[id] = map[chan struct{}]struct{}{}
	}
	h.subs[id][ch] = struct{}{}
	return ch, func() {
		h.mu.Lock()
		defer h.mu.Unlock()
		delete(h.subs[id], ch)
		if len(h.subs[id]) == 0 {
			delete(h.subs, id)
		}
	}
}

// errWatchShutdown ends the streams of a replica that is shutting down (UNAVAILABLE: watch again
// elsewhere).
var errWatchShutdown = connect.NewError(connect.CodeUnavailable, errors.New("the server is shutting down; watch the job again"))

// WatchJob streams the job at every change of state or attempt until it ends.
func (s *jobService) WatchJob(ctx context.Context, req *connect.Request[jqv1.WatchJobRequest], stream *connect.ServerStream[jqv1.WatchJobResponse]) error {
	release, err := s.openWatch(ctx)
	if err != nil {
		return err
	}
	defer release()
	id := req.Msg.GetJobId()
	// Subscribed before the first read, so no change between the read and the wait is missed.
	wake, unsubscribe := s.watch.subscribe(id)
	defer unsubscribe()
	j, err := s.getJob(ctx, id) // GetJob's validation and authorization
	if err != nil {
		return err
	}
	tick := time.NewTicker(watchReread)
	defer tick.Stop()
	var sent *queue.Job
	for {
		if sent == nil || j.State != sent.State || j.Attempt != sent.Attempt {
			if err := stream.Send(&jqv1.WatchJobResponse{Job: api.JobProto(j)}); err != nil {
				return err
			}
			sent = j
		}
		if j.State.Terminal() {
			return nil
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-wake:
		case <-tick.C:
		}
		if s.engine != nil && s.engine.Closing() {
			return errWatchShutdown
		}
		if j, err = s.store.JobGet(ctx, id); err != nil {
			return err
		}
	}
}
