package apiserver

import (
	"context"
	"math/rand/v2"
	"sync"
	"time"

	"connectrpc.com/connect"
	"go.uber.org/zap"

	"github.com/jq-dev/jq/api"
	"github.com/jq-dev/jq/api/apierr"
	jqv1 "github.com/jq-dev/jq/api/gen/jq/v1"
	"github.com/jq-dev/jq/queue"
	"github.com/jq-dev/jq/queue/engine"
	"github.com/jq-dev/jq/store"
)

// watchFeedInterval is how often a replica's watch hub reads the events recorded since its last
// read while any stream watches: the bound on how late a stream hears a change this replica's
// engine does not announce (the reaper, the retry sweep, another replica's commits). One read per
// replica, whatever the number of streams.
const watchFeedInterval = time.Second

// watchSafety is how often a stream re-reads on its own, for a change that records no event (a
// queue deleted with its jobs: the stream then ends with NOT_FOUND) or one the feed could not read,
// jittered by up to a quarter so that streams opened together do not read together: 5,000 streams
// cost about 37 reads a second.
const watchSafety = 2 * time.Minute

// watchFeedLimit bounds one read of the hub's feed.
const watchFeedLimit = 10_000

// watchReadyWait bounds how long a new stream waits for the hub's first read (its cursor) before
// its own first read, so that no event between the two is missed.
const watchReadyWait = 2 * time.Second

// watchHub wakes the streams. Every state change records an event (in the change's
// statement), so one reader of the event feed per replica (store.EventFeed, the outbox that the
// Kafka relay reads) hears every change, whichever replica or loop made it: it wakes the WatchJob
// streams of the jobs whose events it read and, when it read any, the WatchEvents streams. The
// engine's own changes wake their streams at once, before the feed has them. The reader runs only
// while a stream is open.
type watchHub struct {
	read func(ctx context.Context, p store.EventsReadParams) (store.EventsReadResult, error)
	log  *zap.Logger

	mu      sync.Mutex
	subs    map[string]map[chan struct{}]struct{}
	any     map[chan struct{}]struct{}
	n       int           // open subscriptions
	running bool          // the feed reader runs
	ready   chan struct{} // closed once the running reader has its cursor
	idle    chan struct{} // the last subscription ended: the reader stops now
}

func newWatchHub(e *engine.Engine, read func(context.Context, store.EventsReadParams) (store.EventsReadResult, error), log *zap.Logger) *watchHub {
	h := &watchHub{read: read, log: log, subs: map[string]map[chan struct{}]struct{}{}, any: map[chan struct{}]struct{}{},
		idle: make(chan struct{}, 1)}
	if e != nil {
		e.OnJobChange(h.notify)
		e.OnJobProgress(h.notifyJob)
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

// notifyJob wakes only the streams of job id: a change that is no event (progress), which the
// WatchEvents streams do not carry.
func (h *watchHub) notifyJob(id string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	for ch := range h.subs[id] {
		wakeUp(ch)
	}
}

func wakeUp(ch chan struct{}) {
	select {
	case ch <- struct{}{}:
	default:
	}
}

// subscribeAll wakes the returned channel whenever a job changes.
func (h *watchHub) subscribeAll(ctx context.Context) (<-chan struct{}, func()) {
	ch := make(chan struct{}, 1)
	h.mu.Lock()
	h.any[ch] = struct{}{}
	ready := h.started()
	h.mu.Unlock()
	h.waitReady(ctx, ready)
	return ch, func() {
		h.mu.Lock()
		defer h.mu.Unlock()
		delete(h.any, ch)
		h.ended()
	}
}

// subscribe wakes the returned channel whenever job id changes.
func (h *watchHub) subscribe(ctx context.Context, id string) (<-chan struct{}, func()) {
	ch := make(chan struct{}, 1)
	h.mu.Lock()
	if h.subs[id] == nil {
		h.subs[id] = map[chan struct{}]struct{}{}
	}
	h.subs[id][ch] = struct{}{}
	ready := h.started()
	h.mu.Unlock()
	h.waitReady(ctx, ready)
	return ch, func() {
		h.mu.Lock()
		defer h.mu.Unlock()
		delete(h.subs[id], ch)
		if len(h.subs[id]) == 0 {
			delete(h.subs, id)
		}
		h.ended()
	}
}

// started counts a subscription and starts the feed reader if it is not running; it returns the
// reader's ready channel. Called with h.mu held.
func (h *watchHub) started() chan struct{} {
	h.n++
	if !h.running && h.read != nil {
		h.running, h.ready = true, make(chan struct{})
		go h.run(h.ready)
	}
	return h.ready
}

// ended counts a subscription's end; the last one stops the reader. Called with h.mu held.
func (h *watchHub) ended() {
	if h.n--; h.n == 0 {
		wakeUp(h.idle)
	}
}

func (h *watchHub) waitReady(ctx context.Context, ready chan struct{}) {
	if ready == nil {
		return
	}
	t := time.NewTimer(watchReadyWait)
	defer t.Stop()
	select {
	case <-ready:
	case <-ctx.Done():
	case <-t.C: // the store does not answer: the stream's own reads cover what the feed misses
	}
}

// run reads the event feed from now on and wakes the streams of what it finds, until no stream is
// left.
func (h *watchHub) run(ready chan struct{}) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	tick := time.NewTicker(watchFeedInterval)
	defer tick.Stop()
	soon := time.NewTimer(time.Hour)
	soon.Stop()
	defer soon.Stop()
	p := store.EventsReadParams{Limit: watchFeedLimit, FromNow: true}
	pause, failing := watchEventsSoon, false
	for {
		h.mu.Lock()
		if h.n == 0 {
			h.running = false
			h.mu.Unlock()
			return
		}
		h.mu.Unlock()
		r, err := h.read(ctx, p)
		switch {
		case err != nil && !failing:
			failing = true
			h.log.Warn("watch streams cannot read the event feed; they re-read on their own", zap.Error(err))
		case err == nil:
			if failing {
				failing = false
				h.log.Info("watch streams read the event feed again")
			}
			if p.FromNow {
				close(ready)
			}
			p = r.Next(p)
			h.wake(r.Events)
			if r.Pending {
				soon.Reset(pause)
				pause = min(2*pause, watchFeedInterval)
			} else {
				pause = watchEventsSoon
			}
		}
		select {
		case <-tick.C:
		case <-soon.C:
		case <-h.idle:
		}
	}
}

// wake wakes the streams of the jobs of evs, and every WatchEvents stream when there are any.
func (h *watchHub) wake(evs []queue.Event) {
	if len(evs) == 0 {
		return
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	for i := range evs {
		for ch := range h.subs[evs[i].JobID] {
			wakeUp(ch)
		}
	}
	for ch := range h.any {
		wakeUp(ch)
	}
}

// safetyInterval is one stream's own re-read interval, jittered.
func safetyInterval() time.Duration {
	return watchSafety + rand.N(watchSafety/4)
}

// errWatchShutdown ends the streams of a replica that is shutting down (UNAVAILABLE: watch again
// elsewhere).
var errWatchShutdown = apierr.New(queue.ErrShutdown, "the server is shutting down; watch the job again")

// watchProgressInterval is how often a WatchJob stream of a running job re-reads its progress when
// another replica may have recorded it (progress records no event, so the hub's feed never hears
// it): one read of one small row per such stream. A replica that knows it runs alone relies on
// its engine's announcements instead.
const watchProgressInterval = time.Second

// WatchJob streams the job at every change of state, attempt or progress until it ends.
func (s *jobService) WatchJob(ctx context.Context, req *connect.Request[jqv1.WatchJobRequest], stream *connect.ServerStream[jqv1.WatchJobResponse]) error {
	release, err := s.openWatch(ctx)
	if err != nil {
		return err
	}
	defer release()
	id := req.Msg.GetJobId()
	// Subscribed before the first read, so no change between the read and the wait is missed.
	wake, unsubscribe := s.watch.subscribe(ctx, id)
	defer unsubscribe()
	j, err := s.getJob(ctx, id) // GetJob's validation and authorization
	if err != nil {
		return err
	}
	s.readProgress(ctx, j)
	tick := time.NewTicker(safetyInterval())
	defer tick.Stop()
	progressTick := time.NewTicker(watchProgressInterval)
	defer progressTick.Stop()
	var sent *queue.Job
	for {
		if sent == nil || j.State != sent.State || j.Attempt != sent.Attempt || !sameProgress(j.Progress, sent.Progress) {
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
		case <-progressTick.C:
			if !running(j) || (s.engine != nil && s.engine.Alone()) {
				continue
			}
			next := *j
			if s.readProgress(ctx, &next); sameProgress(next.Progress, j.Progress) {
				continue
			}
			// Changed: read the job too, whose attempt may have ended (no progress then).
		}
		if s.engine != nil && s.engine.Closing() {
			return errWatchShutdown
		}
		if j, err = s.store.JobGet(ctx, id); err != nil {
			return err
		}
		s.readProgress(ctx, j)
	}
}

// running: the job holds a lease, so it may report progress.
func running(j *queue.Job) bool {
	return j.State == queue.StateAssigned || j.State == queue.StateRunning
}

// readProgress sets j.Progress while j runs. Progress is best effort: a failed read shows none
// rather than failing the job's read.
func (s *jobService) readProgress(ctx context.Context, j *queue.Job) {
	j.Progress = nil
	if !running(j) {
		return
	}
	p, err := s.store.JobProgressGet(ctx, j.ID)
	if err != nil {
		if ctx.Err() == nil {
			s.log.Warn("read job progress failed", zap.String("job_id", j.ID), zap.Error(err))
		}
		return
	}
	j.Progress = p
}

func sameProgress(a, b *queue.JobProgress) bool {
	if a == nil || b == nil {
		return a == b
	}
	return a.Percent == b.Percent && a.Message == b.Message && a.UpdatedAt.Equal(b.UpdatedAt)
}
