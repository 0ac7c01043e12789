package engine

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"sync"
	"time"

	"go.uber.org/zap"

	"github.com/jq-dev/jq/queue"
	"github.com/jq-dev/jq/store"
)

// Session is one connected worker's assignment stream on this replica. It
// never has more than the worker's concurrency plus its prefetch attempts
// outstanding: an attempt counts from its assignment until its report
// arrives. The worker itself runs at most its concurrency at once (I7,
// FR-021); the prefetched assignments wait on the worker for a free slot.
//
// Dispatch is fair across the sessions of a replica: a session claims for its
// idle slots first, and claims beyond them (prefetch) only while no other
// session of the same queue still has idle slots it could fill (prefetchBlocked).
// Prefetch hides the claim's round trip from a busy worker; it must never take
// a job an idle worker could start now. Constrained queues are never
// prefetched: a buffered job would hold its key's slot while it waits.
type Session struct {
	e           *Engine
	workerID    string
	queues      []string
	types       []string // the job types the worker handles (none: every type), for the claim
	concurrency int      // the worker's concurrency plus its prefetch
	slots       int      // the worker's concurrency: what it runs at once

	mu          sync.Mutex
	outstanding map[string]string // job id → queue, assigned through this session
	// carried counts attempts the worker was already running when the
	// session opened (concurrency − capacity); their reports free slots too.
	carried int
	// released remembers attempts already freed, so that a second release of
	// the same job (the reaper failed it, then the worker's stale report
	// arrives) cannot free a carried slot as well. Cleared when it grows large.
	freed map[string]bool
	// intake caps the attempts outstanding per queue, from the worker's circuit breakers: 0 for
	// an open breaker, 1 for a half-open one (its probe); a queue not listed has no cap beyond
	// the session's.
	intake map[string]int
	next   int // round-robin start over queues
	// shortGen is one more than the ready generation before this session's latest claim, when
	// that claim saw every job it could take (0: it did not, or none yet). While no newer wake-up
	// happened, a claim would find nothing more: freed slots do not claim again, and idle slots
	// do not hold back the prefetch of others.
	shortGen uint64
	// retry is when a rate limit that held a job back has a token again: the session claims then
	// if nothing wakes it earlier (zero: at its next poll).
	retry time.Time
	wake  chan struct{}
	done  chan struct{}
	err   error
}

// OpenSession registers a worker's stream. capacity is the worker's free
// slots now (0 or more than concurrency: concurrency). A newer session of the
// same worker replaces this one.
func (e *Engine) OpenSession(w *queue.Worker, capacity int) *Session {
	return e.OpenSessionPrefetch(w, capacity, 0)
}

// OpenSessionPrefetch is OpenSession for a worker that buffers prefetch assignments beyond its
// concurrency (0..concurrency); capacity then counts up to concurrency plus prefetch.
func (e *Engine) OpenSessionPrefetch(w *queue.Worker, capacity, prefetch int) *Session {
	limit := w.Concurrency + min(max(prefetch, 0), w.Concurrency)
	if capacity <= 0 || capacity > limit {
		capacity = limit
	}
	s := &Session{
		e: e, workerID: w.ID, queues: slices.Clone(w.Queues), types: slices.Clone(w.Types), concurrency: limit, slots: w.Concurrency,
		outstanding: map[string]string{}, carried: limit - capacity, freed: map[string]bool{},
		intake: intakeOf(w.Queues, w.Breakers), wake: make(chan struct{}, 1), done: make(chan struct{}),
	}
	e.mu.Lock()
	if e.closing {
		e.mu.Unlock()
		s.close(queue.ErrShutdown)
		return s
	}
	old := e.sessions[w.ID]
	e.sessions[w.ID] = s
	e.mu.Unlock()
	if old != nil {
		old.close(ErrSessionReplaced)
	}
	e.WakeScheduler()
	return s
}

// Close ends the session (the stream went away). Attempts it handed out stay
// ASSIGNED/RUNNING in Postgres; the worker reports them later over any
// stream, or the reaper recovers them.
func (s *Session) Close() {
	s.e.mu.Lock()
	if s.e.sessions[s.workerID] == s {
		delete(s.e.sessions, s.workerID)
	}
	s.e.mu.Unlock()
	s.close(nil)
	s.e.wakePrefetchers(s) // its idle slots no longer hold anyone's prefetch back
}

func (s *Session) close(err error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	select {
	case <-s.done:
	default:
		s.err = err
		close(s.done)
	}
}

// intakeOf is the per-queue cap of a worker with these breakers.
func intakeOf(queues []string, breakers []queue.QueueBreaker) map[string]int {
	var m map[string]int
	for _, q := range queues {
		if n := queue.Intake(breakers, q); n >= 0 {
			if m == nil {
				m = map[string]int{}
			}
			m[q] = n
		}
	}
	return m
}

// SetBreakers applies a worker's circuit breakers (from its heartbeat) to its session on this
// replica: no more assignments of an open queue, at most one outstanding of a half-open one.
// Attempts already handed out are not touched. It reports whether the worker has a session
// here; one on another replica takes the breakers from the worker's row when it (re)opens.
func (e *Engine) SetBreakers(workerID string, breakers []queue.QueueBreaker) bool {
	e.mu.Lock()
	s := e.sessions[workerID]
	e.mu.Unlock()
	if s == nil {
		return false
	}
	intake := intakeOf(s.queues, breakers)
	s.mu.Lock()
	changed := !maps.Equal(s.intake, intake)
	s.intake = intake
	if changed {
		s.shortGen = 0 // a reopened queue's jobs were not looked at
	}
	s.mu.Unlock()
	if changed {
		// A queue may have reopened: claim and refill at once.
		select {
		case s.wake <- struct{}{}:
		default:
		}
		e.WakeScheduler()
	}
	return true
}

// room is how many of queue q's jobs the session may take now, out of free.
func (s *Session) room(q string, free int) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	limit, capped := s.intake[q]
	if !capped || free <= 0 {
		return free
	}
	for _, oq := range s.outstanding {
		if oq == q {
			limit--
		}
	}
	return min(free, max(limit, 0))
}

func (s *Session) free() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.concurrency - len(s.outstanding) - s.carried
}

// idle is how many of the worker's slots no attempt of this session will fill: prefetched
// attempts count as busy slots, since they start as soon as one frees.
func (s *Session) idle() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return max(s.slots-len(s.outstanding)-s.carried, 0)
}

// hungry reports whether the session has idle slots for queue q that its next claim may fill:
// it has not yet claimed since the wake-up of generation gen, or its last claim filled what it
// asked for.
func (s *Session) hungry(q string, gen uint64) bool {
	if !slices.Contains(s.queues, q) {
		return false
	}
	idle := s.idle()
	if idle == 0 || s.room(q, idle) == 0 {
		return false
	}
	return !s.exhaustedAt(gen)
}

// prefetchBlocked reports whether another session of this replica still has idle slots for
// queue q: its claim comes first.
func (e *Engine) prefetchBlocked(s *Session, q string) bool {
	e.mu.Lock()
	gen := e.readyGen
	others := make([]*Session, 0, len(e.sessions))
	for _, o := range e.sessions {
		if o != s {
			others = append(others, o)
		}
	}
	e.mu.Unlock()
	for _, o := range others {
		if o.hungry(q, gen) {
			return true
		}
	}
	return false
}

// wakePrefetchers wakes the sessions other than s that have room only for prefetch: s just
// claimed (or went away), which may unblock theirs.
func (e *Engine) wakePrefetchers(s *Session) {
	e.mu.Lock()
	defer e.mu.Unlock()
	for _, o := range e.sessions {
		if o == s || o.idle() > 0 || o.free() <= 0 {
			continue
		}
		select {
		case o.wake <- struct{}{}:
		default:
		}
	}
}

// released frees the slots of ended attempts and wakes the session. Only a
// report may free a carried slot (an attempt from before this session): a
// refused ack of an unknown id frees nothing, and an id is counted once per
// call, so a double release cannot let the server exceed the concurrency.
func (s *Session) released(ids []string, reported bool) {
	s.mu.Lock()
	seen := make(map[string]bool, len(ids))
	for _, id := range ids {
		if seen[id] {
			continue
		}
		seen[id] = true
		if _, ok := s.outstanding[id]; ok {
			delete(s.outstanding, id)
		} else if reported && s.carried > 0 && !s.freed[id] {
			s.carried--
		} else {
			continue
		}
		if len(s.freed) >= maxFreedMemory {
			clear(s.freed)
		}
		s.freed[id] = true
	}
	s.mu.Unlock()
	select {
	case s.wake <- struct{}{}:
	default:
	}
}

// Next blocks until it has assigned at least one job to this worker and
// returns the assigned jobs (state ASSIGNED, attempt = the fencing token), or
// until ctx ends or the session is replaced or closed.
func (s *Session) Next(ctx context.Context) ([]*queue.Job, error) {
	poll := time.NewTimer(s.e.opts.SchedulerInterval)
	defer poll.Stop()
	polled := false
	for {
		ready, gen := s.e.readySignal() // before claiming: a push during the claim is not missed
		select {
		case <-s.done: // closed or replaced: claim nothing more for this stream
			if s.err != nil {
				return nil, s.err
			}
			return nil, queue.ErrShutdown
		default:
		}
		// A claim that saw every job it could take, with no wake-up since, would find nothing
		// now: freed capacity alone does not make jobs due. Only the poll looks again then (jobs
		// whose not_before passed, a rate limit's next token).
		if polled || !s.exhaustedAt(gen) {
			jobs, err := s.claimRound(ctx, gen)
			if err != nil {
				return nil, err
			}
			if len(jobs) > 0 {
				return jobs, nil
			}
		}
		polled = false
		poll.Reset(s.pollIn())
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-s.done:
			if s.err != nil {
				return nil, s.err
			}
			return nil, queue.ErrShutdown
		case <-ready:
		case <-s.wake: // capacity came back: claim again if the last claim left jobs behind
		case <-poll.C:
			polled = true
		}
	}
}

// claimRound claims for the worker's idle slots or, with none idle, for its prefetch, and
// remembers whether the claim saw every job it could take (at wake-up generation gen).
func (s *Session) claimRound(ctx context.Context, gen uint64) ([]*queue.Job, error) {
	if idle := s.idle(); idle > 0 {
		// Idle slots first. A claim that came back short saw nothing more this worker can take,
		// so a prefetch claim now would find nothing either.
		jobs, exhausted, err := s.claim(ctx, idle, false)
		s.noteClaim(gen, exhausted)
		s.e.wakePrefetchers(s)
		return jobs, err
	}
	if free := s.free(); free > 0 {
		jobs, exhausted, err := s.claim(ctx, free, true)
		s.noteClaim(gen, exhausted)
		return jobs, err
	}
	return nil, nil
}

// noteClaim records whether the claim made at generation gen saw every job it could take.
func (s *Session) noteClaim(gen uint64, exhausted bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.shortGen = 0
	if exhausted {
		s.shortGen = gen + 1
	}
}

// exhaustedAt reports whether the session's last claim saw every job it could take and no
// wake-up happened since generation gen.
func (s *Session) exhaustedAt(gen uint64) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.shortGen == gen+1
}

// retryAt brings the session's next claim forward to t (a rate limit's next token).
func (s *Session) retryAt(t time.Time) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.retry.IsZero() || t.Before(s.retry) {
		s.retry = t
	}
}

// pollIn is how long the session waits for a wake-up before it claims again: the scheduler
// interval, or less when a rate limit has a token sooner. The retry time is the store's clock; the
// wait is measured on this one, which is near enough for a poll.
func (s *Session) pollIn() time.Duration {
	s.mu.Lock()
	defer s.mu.Unlock()
	d := s.e.opts.SchedulerInterval
	if !s.retry.IsZero() {
		d = min(d, max(s.retry.Sub(s.e.now()), time.Millisecond))
		s.retry = time.Time{}
	}
	return d
}

// claim assigns up to free due jobs of the worker's queues and types, taking them in turn from a
// rotating first queue: one Postgres statement per queue (store.DispatchStore.JobClaim; a queue with
// priority weights or max_wait takes the weighted claim, weights.go), then one Redis
// round trip that records them in the worker's in-flight set with their locks. Redis is
// bookkeeping, not the fence: when it is down the jobs are sent anyway (Postgres assigned them),
// counted in DirectClaims, and the reaper recovers them from Postgres like any other.
//
// A prefetch claim skips the queues where another session still has idle slots, and the
// constrained ones.
//
// exhausted reports that every queue's claim came back short: nothing more was due for this
// worker when it ran.
func (s *Session) claim(ctx context.Context, free int, prefetch bool) (out []*queue.Job, exhausted bool, err error) {
	s.mu.Lock()
	start := s.next
	s.next = (s.next + 1) % len(s.queues)
	s.mu.Unlock()
	exhausted = true
	for i := range s.queues {
		if free <= 0 {
			exhausted = false // queues left unvisited
			break
		}
		q := s.queues[(start+i)%len(s.queues)]
		room := s.room(q, free)
		if room <= 0 {
			continue // the worker's breaker for q is open, or its probe is out
		}
		if prefetch && s.e.prefetchBlocked(s, q) {
			exhausted = false
			continue
		}
		claimStart := time.Now()
		// The claim must reach a known outcome even if the stream goes away meanwhile: jobs it
		// assigns are this worker's from then on.
		actx, cancel := context.WithTimeout(context.WithoutCancel(ctx), assignTimeout)
		set := s.e.constraintsFor(actx, q)
		if prefetch && set != nil {
			cancel()
			exhausted = false
			continue
		}
		p := store.JobClaimParams{Queue: q, WorkerID: s.workerID, Limit: min(room, s.e.opts.BatchSize), Types: s.types}
		weighted := s.e.weigh(actx, &p)
		var jobs []*queue.Job
		if set != nil {
			p.Expect = set
			jobs, err = s.claimConstrained(actx, p)
		} else {
			jobs, err = s.e.opts.Store.JobClaim(actx, p)
		}
		cancel()
		if err != nil {
			out, err = s.partial(out, fmt.Errorf("claim %s: %w", q, err))
			return out, false, err
		}
		weighted.served(p, jobs)
		if len(jobs) >= p.Limit {
			exhausted = false
		}
		if len(jobs) == 0 {
			continue
		}
		s.mu.Lock()
		for _, j := range jobs {
			s.outstanding[j.ID] = q
		}
		s.mu.Unlock()
		for _, j := range jobs {
			s.e.jobChanged(j.ID)
		}
		s.recordInflight(ctx, q, jobs)
		s.e.opts.Observer.SchedulerCycle(time.Since(claimStart))
		s.e.traceAssigned(ctx, claimStart, s.workerID, jobs)
		s.e.opts.Observer.Assigned(q, len(jobs))
		free -= len(jobs)
		out = append(out, jobs...)
	}
	return out, exhausted, nil
}

// recordInflight adds freshly assigned jobs to the worker's in-flight set in Redis.
func (s *Session) recordInflight(ctx context.Context, q string, jobs []*queue.Job) {
	ids := make([]string, len(jobs))
	for i, j := range jobs {
		ids[i] = j.ID
	}
	rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), redisRecordTimeout)
	defer cancel()
	err := s.e.opts.Dispatcher.InflightAdd(rctx, store.InflightAddParams{Queue: q, WorkerID: s.workerID, IDs: ids, LockTTL: s.e.opts.LockTTL})
	if err != nil {
		s.e.redisDown(err)
		s.e.directClaims.Add(int64(len(jobs)))
		return
	}
	s.e.redisUp()
}

// redisRecordTimeout bounds the in-flight record of a claim: Redis down must not hold dispatch up.
const redisRecordTimeout = 2 * time.Second

// partial returns what a claim already assigned when a later queue fails:
// those jobs are ASSIGNED to this worker and must be sent, not dropped.
func (s *Session) partial(out []*queue.Job, err error) ([]*queue.Job, error) {
	if len(out) == 0 {
		return nil, err
	}
	s.e.log.Warn("claim failed after some jobs were assigned; sending those", zap.String("worker_id", s.workerID), zap.Error(err))
	return out, nil
}

// maxFreedMemory bounds Session.freed.
const maxFreedMemory = 10000

// assignTimeout bounds the assign compare-and-set.
const assignTimeout = 10 * time.Second

// queueOf returns the queue of an attempt this session handed out.
func (s *Session) queueOf(id string) (string, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	q, ok := s.outstanding[id]
	return q, ok
}

// AssignmentDeadline is when an assignment sent now must be acked by.
func (e *Engine) AssignmentDeadline() time.Time { return e.now().Add(e.opts.AssignmentTimeout) }
