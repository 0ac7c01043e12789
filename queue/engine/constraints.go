package engine

import (
	"context"
	"fmt"
	"sync"
	"time"

	"go.uber.org/zap"

	"github.com/jq-dev/jq/queue"
	"github.com/jq-dev/jq/store"
)

// Constraints (docs/flow-control.md). The engine keeps the constraint set it last read,
// to tell which queues claim through the store's constrained path (store.ConstraintStore
// .JobClaimConstrained): a queue no constraint applies to keeps the plain one-statement claim. The
// constrained claim itself reads the set again under its lock, so what it enforces is always the
// set in force; the cache only decides the path, and is read again every scheduler interval (and
// at once after a change: on this replica, and on the others when its NOTIFY reaches them), so a
// change reaches every replica within one cycle at the latest.

// constraintCache is the engine's copy of the constraint set.
type constraintCache struct {
	mu      sync.Mutex
	read    time.Time // when set was last read (or its read began); zero: read it now
	set     *queue.ConstraintSet
	reading bool // a read is under way: the others go on with set meanwhile
	failing bool // the last read failed (logged once until one succeeds)
	// keyers are set's keyers by queue, made when a submit first needs one (keyJob).
	keyers map[string]*queue.Keyer
}

// constraintSet returns the constraint set as cached (nil: none read yet), reading it again when
// it is older than the scheduler interval. One caller reads while the others go on with the set
// read before (none waits for the database unless nothing was ever read); a failed read keeps it.
func (e *Engine) constraintSet(ctx context.Context) *queue.ConstraintSet {
	c := &e.constraints
	c.mu.Lock()
	// Freshness of a cached setting, not a rule of the domain: the monotonic wall clock.
	stale := c.read.IsZero() || time.Since(c.read) > e.opts.SchedulerInterval
	if c.set != nil && (!stale || c.reading) {
		defer c.mu.Unlock()
		return c.set
	}
	// Never read (or every read failed): this caller reads, whoever else is reading too.
	c.reading, c.read = true, time.Now()
	c.mu.Unlock()
	set, err := e.opts.Store.ConstraintSet(ctx)
	c.mu.Lock()
	defer c.mu.Unlock()
	c.reading = false
	switch {
	case err != nil && !c.failing:
		c.failing = true
		e.log.Warn("reading the constraints failed; dispatch goes on with the ones read before", zap.Error(err))
	case err == nil:
		if c.failing {
			c.failing = false
			e.log.Info("constraints read again")
		}
		c.set, c.keyers = set, nil
	}
	return c.set
}

// constraintsFor returns the cached set when a constraint in it applies to queue q (claim through
// the constrained path), nil otherwise (claim plainly). While no set could be read it returns
// unknownConstraints: every queue claims through the constrained path, which reads the set in
// force itself, rather than plainly past constraints it has not seen.
func (e *Engine) constraintsFor(ctx context.Context, q string) *queue.ConstraintSet {
	set := e.constraintSet(ctx)
	switch {
	case set == nil:
		return unknownConstraints
	case set.Constrains(q):
		return set
	}
	return nil
}

// unknownConstraints stands for a set not read yet: no generation (no stored one is negative), no
// constraint expected.
var unknownConstraints = &queue.ConstraintSet{Gen: -1}

// constraintsChanged is the notification a replica sends after it changed the constraints: the
// others read the set again at once instead of at the end of their scheduler interval (queue names
// never hold ':').
const constraintsChanged = "constraints:changed"

// announceConstraints tells the other replicas the constraints changed. A lost notification only
// delays them to their next read, within a scheduler interval.
func (e *Engine) announceConstraints(ctx context.Context) {
	if e.opts.Notifier == nil {
		return
	}
	if err := e.opts.Notifier.Notify(ctx, []string{constraintsChanged}); err != nil {
		e.log.Warn("telling the other replicas the constraints changed failed; they read them within a scheduler interval", zap.Error(err))
	}
}

// forgetConstraints makes the next claim read the set again.
func (e *Engine) forgetConstraints() {
	e.constraints.mu.Lock()
	e.constraints.read = time.Time{}
	e.constraints.mu.Unlock()
}

// ConstraintCreate creates (or with p.Replace replaces) a constraint. It applies on this replica
// from the next claim, on the others once its announcement reaches them (within a scheduler
// interval at the latest). Errors: as
// store.ConstraintStore.ConstraintCreate.
func (e *Engine) ConstraintCreate(ctx context.Context, p store.ConstraintCreateParams) (*queue.Constraint, error) {
	if q := p.Constraint.Match.Queue; q != "" && queue.ValidateQueueName(q) == nil {
		// A matcher naming a queue that does not exist would hold nothing back, silently (a typo);
		// a queue deleted later leaves a constraint that matches nothing, as a removed label would.
		if _, err := e.opts.Store.QueueGet(ctx, q); err != nil {
			return nil, fmt.Errorf("match: %w", err)
		}
	}
	c, err := e.opts.Store.ConstraintCreate(ctx, p)
	if err != nil {
		return nil, err
	}
	e.forgetConstraints()
	e.announceConstraints(ctx)
	e.log.Info("constraint created", zap.String("constraint", c.Name), zap.Bool("replace", p.Replace), zap.String("definition", c.String()))
	return c, nil
}

// ConstraintDelete deletes a constraint: its jobs are no longer held back (here at once, on other
// replicas once its announcement reaches them), and sessions claim again. Errors: ErrConstraintNotFound.
func (e *Engine) ConstraintDelete(ctx context.Context, name string) error {
	if err := e.opts.Store.ConstraintDelete(ctx, name); err != nil {
		return err
	}
	e.forgetConstraints()
	e.announceConstraints(ctx)
	e.log.Info("constraint deleted", zap.String("constraint", name))
	e.WakeScheduler()
	return nil
}

// claimConstrained is the claim of a queue constraints apply to: the store's constrained claim,
// its throttling counted, and the session's next claim brought forward to when a rate limit has a
// token again.
func (s *Session) claimConstrained(ctx context.Context, p store.JobClaimParams) ([]*queue.Job, error) {
	out, err := s.e.opts.Store.JobClaimConstrained(ctx, p)
	if err != nil {
		return nil, err
	}
	for name, n := range out.Throttled {
		s.e.opts.Observer.ConstraintThrottled(name, n)
	}
	if !out.RetryAt.IsZero() {
		s.retryAt(out.RetryAt)
	}
	return out.Jobs, nil
}

// constrainedSlotsFreed wakes the sessions of every replica after reports ended attempts in queues
// constraints apply to: a concurrency slot is free, and a job its key held back may start now
// rather than at the next poll. The set as cached decides; it is not read for this.
func (e *Engine) constrainedSlotsFreed(outs []store.LeaseOutcome) {
	e.constraints.mu.Lock()
	set := e.constraints.set
	e.constraints.mu.Unlock()
	if set == nil || len(set.Constraints) == 0 {
		return
	}
	var qs map[string]int
	for _, o := range outs {
		if o.Err != nil || o.Job == nil {
			continue
		}
		for _, c := range set.Constraints {
			if c.Concurrency > 0 && c.AppliesTo(o.Job.Queue) {
				if qs == nil {
					qs = map[string]int{}
				}
				qs[o.Job.Queue]++
				break
			}
		}
	}
	if len(qs) > 0 {
		e.notifyNewWork(qs)
	}
}

// keyJob computes a submitted job's constraint entries with the set as cached (store.LimitKeys), so
// that claims find them stored. A job of a queue no cached constraint applies to is left unkeyed;
// were the cache stale, the generation tells the claim to compute the entries again.
func (e *Engine) keyJob(ctx context.Context, p *store.JobInsertParams) {
	set := e.constraintsFor(ctx, p.Queue)
	if set == nil || set == unknownConstraints {
		return // the claim computes the entries
	}
	j := &queue.Job{Queue: p.Queue, Type: p.Type, Labels: p.Labels, Payload: p.Payload}
	p.Limits = &store.LimitKeys{Entries: e.keyerFor(set, p.Queue).Entries(j), Gen: set.Gen}
}

// keyerFor returns the keyer of set's constraints for queue q, made once per set and queue rather
// than per submit.
func (e *Engine) keyerFor(set *queue.ConstraintSet, q string) *queue.Keyer {
	c := &e.constraints
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.set != set { // replaced since: a keyer for this submit only
		return queue.NewKeyer(set.For(q))
	}
	if c.keyers == nil {
		c.keyers = map[string]*queue.Keyer{}
	}
	k := c.keyers[q]
	if k == nil {
		k = queue.NewKeyer(set.For(q))
		c.keyers[q] = k
	}
	return k
}
