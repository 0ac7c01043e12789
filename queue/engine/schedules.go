package engine

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"sync/atomic"
	"time"

	"go.uber.org/zap"

	"github.com/jq-dev/jq/queue"
	"github.com/jq-dev/jq/queue/schedule"
	"github.com/jq-dev/jq/store"
)

// Schedules are the periodic jobs of an engine (docs/schedules.md): the operator's commands on
// them, and the fire loop every server replica runs.
//
// The fire loop, on every replica alike, with no leader: read the schedules due by the store's
// clock; for each, decide its fires with queue/schedule's rules (PlanFires: the missed-fire policy,
// never a fire time later than now); submit every fire's job through the engine's normal submit
// path with the idempotency key schedule:<name>:<fire time>; then advance next_fire_at with a
// compare-and-set on the value read. Two replicas firing the same time submit the same key, and
// the store keeps one job per key: exactly one job per fire time. A replica that dies between the
// submit and the advance leaves next_fire_at where it was; whoever looks next submits the same
// key again (and finds the job) and advances. An infrastructure failure leaves the schedule
// unadvanced for the next pass; a refused job (its queue deleted, say) is recorded as the fire's
// outcome and the schedule moves on.
type Schedules struct {
	e    *Engine
	opts ScheduleOptions
	log  *zap.Logger
	wake chan struct{}
	// failing: the last pass failed (its warning is logged once per outage).
	failing atomic.Bool
}

// ScheduleObserver receives what the fire loop did, for metrics. Counts are per replica: a fire
// is counted by the replica whose submit created its job.
type ScheduleObserver interface {
	// ScheduleFired: a fire created its job, lag after its fire time.
	ScheduleFired(schedule string, lag time.Duration)
	// ScheduleFireFailed: a fire's job was refused (see Schedule.LastError).
	ScheduleFireFailed(schedule string)
	// ScheduleMissed: n fire times were dropped under the missed-fire policy.
	ScheduleMissed(schedule string, n int)
}

// NopScheduleObserver observes nothing.
type NopScheduleObserver struct{}

func (NopScheduleObserver) ScheduleFired(string, time.Duration) {}
func (NopScheduleObserver) ScheduleFireFailed(string)           {}
func (NopScheduleObserver) ScheduleMissed(string, int)          {}

// ScheduleOptions configure Schedules. Zero values take the documented defaults.
type ScheduleOptions struct {
	Store store.ScheduleStore
	// Grace is the misfire grace (schedule.DefaultGrace): a fire time handled later than this is
	// missed, and its schedule's policy decides.
	Grace time.Duration
	// Interval is the longest pause between two looks at the table (1 s); the loop wakes earlier
	// for the earliest next fire time it saw, and at once after a create or resume here.
	Interval time.Duration
	// Batch is the most due schedules one pass reads (100).
	Batch    int
	Observer ScheduleObserver
}

// ScheduleLabel is the label every scheduled job carries: its schedule's name.
const ScheduleLabel = "jq.schedule"

// NewSchedules returns the schedules of e.
func NewSchedules(e *Engine, o ScheduleOptions) (*Schedules, error) {
	if e == nil || o.Store == nil {
		return nil, errors.New("engine: schedules need an engine and a schedule store")
	}
	if o.Grace <= 0 {
		o.Grace = schedule.DefaultGrace
	}
	if o.Interval <= 0 {
		o.Interval = time.Second
	}
	if o.Batch <= 0 {
		o.Batch = 100
	}
	if o.Observer == nil {
		o.Observer = NopScheduleObserver{}
	}
	return &Schedules{e: e, opts: o, log: e.log.Named("schedules"), wake: make(chan struct{}, 1)}, nil
}

// checkSpec parses a schedule's spec and returns its first fire time after now. A spec that never
// fires (30 February) is refused.
func (s *Schedules) checkSpec(p *store.ScheduleParams) error {
	if p.TimeZone == "" {
		p.TimeZone = schedule.DefaultTimeZone
	}
	if p.Missed == "" {
		p.Missed = queue.MissedSkip
	}
	n, err := queue.ValidateMissed(p.Missed, p.CatchUpMax)
	if err != nil {
		return fmt.Errorf("schedule %s: %w", p.Name, err)
	}
	p.CatchUpMax = n
	spec, err := schedule.Parse(p.Cron, p.TimeZone)
	if err != nil {
		return fmt.Errorf("schedule %s: %w", p.Name, err)
	}
	if len(p.Template.Labels) >= store.MaxLabels {
		return fmt.Errorf("%w: schedule %s: at most %d labels (the job also gets %s)", queue.ErrInvalidArgument, p.Name,
			store.MaxLabels-1, ScheduleLabel)
	}
	if _, ok := p.Template.Labels[ScheduleLabel]; ok {
		return fmt.Errorf("%w: schedule %s: label %s is set by the schedule", queue.ErrInvalidArgument, p.Name, ScheduleLabel)
	}
	p.Cron = spec.String()
	p.NextFireAt = spec.Next(s.e.now())
	if p.NextFireAt.IsZero() {
		return fmt.Errorf("%w: schedule %s: cron spec %s never fires", queue.ErrInvalidArgument, p.Name, queue.Excerpt(p.Cron))
	}
	return nil
}

// ScheduleCreate creates an API-owned schedule, first firing at its spec's first time after now.
// Errors: ErrInvalidArgument, ErrScheduleExists.
func (s *Schedules) ScheduleCreate(ctx context.Context, p store.ScheduleParams) (*queue.Schedule, error) {
	p.Owner = queue.OwnerAPI
	if err := s.checkSpec(&p); err != nil {
		return nil, err
	}
	sc, err := s.opts.Store.ScheduleCreate(ctx, p)
	if err != nil {
		return nil, err
	}
	s.log.Info("schedule created", zap.String("schedule", sc.Name), zap.String("cron", sc.Cron),
		zap.String("time_zone", sc.TimeZone), zap.String("queue", sc.Template.Queue), zap.Time("next_fire_at", sc.NextFireAt))
	s.Wake()
	return sc, nil
}

// ScheduleDelete deletes an API-owned schedule. Errors: ErrScheduleNotFound, ErrScheduleOwnedByConfig.
func (s *Schedules) ScheduleDelete(ctx context.Context, name string) error {
	if err := queue.ValidateScheduleName(name); err != nil {
		return err
	}
	if err := s.opts.Store.ScheduleDelete(ctx, store.ScheduleDeleteParams{Name: name, Owner: queue.OwnerAPI}); err != nil {
		return err
	}
	s.log.Info("schedule deleted", zap.String("schedule", name))
	return nil
}

// ScheduleSetPaused pauses or resumes a schedule (config-owned ones too: pausing is operation, not
// configuration). A resumed schedule fires from its first fire time after now: what passed while
// it was paused is not fired. Errors: ErrScheduleNotFound.
func (s *Schedules) ScheduleSetPaused(ctx context.Context, name string, paused bool) (*queue.Schedule, error) {
	if err := queue.ValidateScheduleName(name); err != nil {
		return nil, err
	}
	p := store.ScheduleSetPausedParams{Name: name, Paused: paused}
	if !paused {
		sc, err := s.opts.Store.ScheduleGet(ctx, name)
		if err != nil {
			return nil, err
		}
		spec, err := schedule.Parse(sc.Cron, sc.TimeZone)
		if err != nil {
			return nil, fmt.Errorf("schedule %s: %w", name, err)
		}
		p.NextFireAt = spec.Next(s.e.now())
	}
	sc, err := s.opts.Store.ScheduleSetPaused(ctx, p)
	if err != nil {
		return nil, err
	}
	s.log.Info("schedule paused or resumed", zap.String("schedule", name), zap.Bool("paused", paused))
	if !paused {
		s.Wake()
	}
	return sc, nil
}

// ScheduleTrigger submits the schedule's job now, outside its spec (paused or not); the next fire
// time does not change. Errors: ErrScheduleNotFound, and the submit's.
func (s *Schedules) ScheduleTrigger(ctx context.Context, name string) (store.JobInsertResult, error) {
	if err := queue.ValidateScheduleName(name); err != nil {
		return store.JobInsertResult{}, err
	}
	sc, err := s.opts.Store.ScheduleGet(ctx, name)
	if err != nil {
		return store.JobInsertResult{}, err
	}
	now := s.e.now()
	res, err := s.e.Submit(ctx, jobOf(sc, schedule.TriggerKey(name, now), time.Time{}))
	if err != nil {
		return store.JobInsertResult{}, err
	}
	s.log.Info("schedule triggered", zap.String("schedule", name), zap.String("job_id", res.Job.ID))
	return res, nil
}

// ScheduleReconcile makes the config-owned schedules exactly ps (the configuration file's), at a
// server's start: see store.ScheduleStore.ScheduleReconcile.
func (s *Schedules) ScheduleReconcile(ctx context.Context, ps []store.ScheduleParams) (store.ScheduleReconcileResult, error) {
	ps = append([]store.ScheduleParams(nil), ps...)
	var errs []error
	for i := range ps {
		ps[i].Owner = queue.OwnerConfig
		if err := s.checkSpec(&ps[i]); err != nil {
			errs = append(errs, err)
		}
	}
	if err := errors.Join(errs...); err != nil {
		return store.ScheduleReconcileResult{}, err
	}
	res, err := s.opts.Store.ScheduleReconcile(ctx, store.ScheduleReconcileParams{Schedules: ps})
	if err != nil {
		return res, err
	}
	for _, n := range res.TakenOver {
		s.log.Warn("schedule created over the API is now declared in the configuration file", zap.String("schedule", n))
	}
	s.log.Info("configured schedules reconciled", zap.Strings("created", res.Created), zap.Strings("updated", res.Updated),
		zap.Strings("deleted", res.Deleted))
	s.Wake()
	return res, nil
}

// Wake asks the fire loop of this replica to look at the table now.
func (s *Schedules) Wake() {
	select {
	case s.wake <- struct{}{}:
	default:
	}
}

// Run fires the due schedules until ctx ends.
func (s *Schedules) Run(ctx context.Context) error {
	timer := time.NewTimer(0)
	defer timer.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-s.wake:
		case <-timer.C:
		}
		wait, err := s.Pass(ctx)
		if ctx.Err() != nil {
			return nil
		}
		switch {
		case err != nil && !s.failing.Swap(true):
			s.log.Warn("schedule pass failed; retrying", zap.Error(err))
		case err == nil && s.failing.Swap(false):
			s.log.Info("schedule passes work again")
		}
		if !timer.Stop() {
			select {
			case <-timer.C:
			default:
			}
		}
		timer.Reset(wait)
	}
}

// Pass fires every schedule due now and returns how long to wait before the next pass.
func (s *Schedules) Pass(ctx context.Context) (time.Duration, error) {
	for {
		start := time.Now()
		res, err := s.opts.Store.ScheduleDue(ctx, s.opts.Batch)
		if err != nil {
			return s.opts.Interval, err
		}
		// The store's clock, moved on by what this pass spent so far.
		clock := func() time.Time { return res.Now.Add(time.Since(start)) }
		for _, sc := range res.Due {
			if err := s.fire(ctx, sc, clock); err != nil {
				return s.opts.Interval, err
			}
		}
		if len(res.Due) == s.opts.Batch {
			continue // more are due
		}
		if len(res.Due) > 0 {
			return 0, nil // look again: the earliest next fire time moved
		}
		wait := s.opts.Interval
		if !res.Earliest.IsZero() {
			wait = min(wait, max(res.Earliest.Sub(res.Now), 0))
		}
		return wait, nil
	}
}

// fire handles one due schedule by the store's clock.
func (s *Schedules) fire(ctx context.Context, sc *queue.Schedule, clock func() time.Time) error {
	adv := store.ScheduleAdvanceParams{Name: sc.Name, From: sc.NextFireAt}
	spec, err := schedule.Parse(sc.Cron, sc.TimeZone)
	if err != nil { // stored by an older release whose parser accepted it: stop, say why
		adv.LastFireAt, adv.LastOutcome, adv.LastError = sc.NextFireAt, queue.FireFailed, err.Error()
		s.log.Error("schedule spec does not parse; schedule stopped", zap.String("schedule", sc.Name), zap.Error(err))
		_, err := s.opts.Store.ScheduleAdvance(ctx, adv)
		return err
	}
	plan := schedule.PlanFires(spec, sc.NextFireAt, clock(), s.opts.Grace, sc.Missed, sc.CatchUpMax)
	adv.Next = plan.Next
	if plan.Missed > 0 || plan.CaughtUp > 0 {
		if plan.Missed > 0 {
			s.opts.Observer.ScheduleMissed(sc.Name, plan.Missed)
		}
		s.log.Info("schedule fire times missed", zap.String("schedule", sc.Name), zap.String("policy", string(sc.Missed)),
			zap.Int("missed", plan.Missed+plan.CaughtUp), zap.Int("dropped", plan.Missed), zap.Int("caught_up", plan.CaughtUp),
			zap.Time("next_fire_at", plan.Next))
	}
	for _, at := range plan.Fires {
		res, err := s.e.Submit(ctx, jobOf(sc, schedule.IdempotencyKey(sc.Name, at), at))
		adv.LastFireAt, adv.LastError = at, ""
		switch {
		case err != nil && isCallerError(err):
			adv.LastJobID, adv.LastOutcome, adv.LastError = "", queue.FireFailed, err.Error()
			s.opts.Observer.ScheduleFireFailed(sc.Name)
			s.log.Warn("schedule fire refused", zap.String("schedule", sc.Name), zap.Time("fire_at", at), zap.Error(err))
		case err != nil:
			return fmt.Errorf("schedule %s: fire %s: %w", sc.Name, at.Format(time.RFC3339), err)
		case res.Existing:
			adv.LastJobID, adv.LastOutcome = res.Job.ID, queue.FireExisting
		default:
			adv.LastJobID, adv.LastOutcome = res.Job.ID, queue.FireSubmitted
			lag := clock().Sub(at)
			s.opts.Observer.ScheduleFired(sc.Name, lag)
			s.log.Debug("schedule fired", zap.String("schedule", sc.Name), zap.Time("fire_at", at),
				zap.String("job_id", res.Job.ID), zap.Duration("lag", lag))
		}
	}
	if _, err := s.opts.Store.ScheduleAdvance(ctx, adv); err != nil {
		return err
	}
	return nil
}

// jobOf is the job a schedule submits: its template, the schedule's label, the key, due at runAt
// (the fire time: the same spec on every replica, so the key's spec check holds).
func jobOf(sc *queue.Schedule, key string, runAt time.Time) store.JobInsertParams {
	p := store.JobParamsOf(sc.Template, key, runAt)
	labels := make(map[string]string, len(p.Labels)+1)
	maps.Copy(labels, p.Labels)
	labels[ScheduleLabel] = sc.Name
	p.Labels = labels
	return p
}
