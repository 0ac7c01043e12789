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
// clock; for each, decide its fires with queue/schedule's rules (PlanFires: at most one on-time
// fire and catch_up_max caught-up ones per pass, never a fire time later than now); then write the
// fires of many schedules in one transaction (store ScheduleFire): each schedule's jobs, with the
// idempotency key schedule:<name>:<fire time>, are inserted and its next_fire_at advanced only if
// it is still due as read — not deleted, paused or advanced by another replica — under a lock held
// to the commit. So exactly one job per fire time, and a DeleteSchedule or pause that returned
// stops every later fire. The jobs then wake the sessions as a submit's do. An infrastructure
// failure leaves the schedules unadvanced for the next pass; a refused job (its queue deleted,
// say) is recorded as the fire's outcome and the schedule moves on.
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
	// Batch is the most due schedules one read of a pass returns (500).
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
		o.Batch = 500
	}
	if o.Observer == nil {
		o.Observer = NopScheduleObserver{}
	}
	return &Schedules{e: e, opts: o, log: e.log.Named("schedules"), wake: make(chan struct{}, 1)}, nil
}

// checkSpec checks a schedule as create and update do — policies, spec, labels — fills the
// defaults and sets its first fire time after now. A spec that never fires (30 February) is
// refused. The errors do not repeat the schedule's name: the request names it.
func (s *Schedules) checkSpec(p *store.ScheduleParams) error {
	if p.TimeZone == "" {
		p.TimeZone = schedule.DefaultTimeZone
	}
	if p.Missed == "" {
		p.Missed = queue.MissedSkip
	}
	n, err := queue.ValidateMissed(p.Missed, p.CatchUpMax)
	if err != nil {
		return err
	}
	p.CatchUpMax = n
	if p.Overlap, err = queue.ValidateOverlap(p.Overlap); err != nil {
		return err
	}
	spec, err := schedule.Parse(p.Cron, p.TimeZone)
	if err != nil {
		return err
	}
	if len(p.Template.Labels) >= store.MaxLabels {
		return fmt.Errorf("%w: at most %d labels (the job also gets %s)", queue.ErrInvalidArgument, store.MaxLabels-1, ScheduleLabel)
	}
	if _, ok := p.Template.Labels[ScheduleLabel]; ok {
		return fmt.Errorf("%w: label %s is set by the schedule: remove it from the template", queue.ErrInvalidArgument, ScheduleLabel)
	}
	p.Cron = spec.String()
	p.NextFireAt = spec.Next(s.e.now())
	if p.NextFireAt.IsZero() {
		return fmt.Errorf("%w: cron spec %s never fires: give a date that exists, e.g. '0 0 28 2 *' (28 February)",
			queue.ErrInvalidArgument, queue.Excerpt(p.Cron))
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

// ScheduleUpdate replaces the settings of an API-owned schedule, checked exactly as
// ScheduleCreate checks them. The next fire time stays unless the spec or time zone changes or
// the schedule is resumed (then it is the spec's first time after now). Every replica's fire loop
// reads the schedule from the store at each pass, so the change holds everywhere from the next
// pass. Errors: ErrInvalidArgument, ErrScheduleNotFound, ErrScheduleOwnedByConfig.
func (s *Schedules) ScheduleUpdate(ctx context.Context, p store.ScheduleParams) (*queue.Schedule, error) {
	p.Owner = queue.OwnerAPI
	if err := s.checkSpec(&p); err != nil {
		return nil, err
	}
	sc, err := s.opts.Store.ScheduleUpdate(ctx, p)
	if err != nil {
		return nil, err
	}
	s.log.Info("schedule updated", zap.String("schedule", sc.Name), zap.String("cron", sc.Cron),
		zap.String("time_zone", sc.TimeZone), zap.String("queue", sc.Template.Queue), zap.String("overlap", string(sc.Overlap)),
		zap.Bool("paused", sc.Paused), zap.Time("next_fire_at", sc.NextFireAt))
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
			return nil, err
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
			errs = append(errs, fmt.Errorf("schedule %s: %w", ps[i].Name, err))
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

// fireChunkJobs bounds the jobs of one ScheduleFire call: a pass writes its fires in transactions
// of about this many jobs (at least one schedule each).
const fireChunkJobs = 1000

// fire is one due schedule's share of a pass.
type fire struct {
	sc   *queue.Schedule
	plan schedule.Plan
	p    store.ScheduleFireParams
}

// Pass fires every schedule due now and returns how long to wait before the next pass. Each due
// schedule is handled once per pass, earliest first, with at most 1 + its catch_up_max jobs
// (PlanFires); the fires of many schedules are written together (ScheduleFire, about
// fireChunkJobs jobs a transaction), each conditional on its schedule still being due as read.
func (s *Schedules) Pass(ctx context.Context) (time.Duration, error) {
	for {
		start := time.Now()
		res, err := s.opts.Store.ScheduleDue(ctx, s.opts.Batch)
		if err != nil {
			return s.opts.Interval, err
		}
		// The store's clock, moved on by what this pass spent so far.
		clock := func() time.Time { return res.Now.Add(time.Since(start)) }
		var chunk []fire
		jobs := 0
		for _, sc := range res.Due {
			f, err := s.plan(ctx, sc, clock())
			if err != nil {
				return s.opts.Interval, err
			}
			if len(chunk) > 0 && jobs+len(f.p.Jobs) > fireChunkJobs {
				if err := s.fireChunk(ctx, chunk, clock); err != nil {
					return s.opts.Interval, err
				}
				chunk, jobs = chunk[:0], 0
			}
			chunk, jobs = append(chunk, f), jobs+len(f.p.Jobs)
		}
		if err := s.fireChunk(ctx, chunk, clock); err != nil {
			return s.opts.Interval, err
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

// plan decides one due schedule's fires at now (the store's clock), keeps those its overlap
// policy allows, and builds their jobs.
func (s *Schedules) plan(ctx context.Context, sc *queue.Schedule, now time.Time) (fire, error) {
	f := fire{sc: sc, p: store.ScheduleFireParams{ScheduleAdvanceParams: store.ScheduleAdvanceParams{Name: sc.Name, From: sc.NextFireAt}}}
	spec, err := schedule.Parse(sc.Cron, sc.TimeZone)
	if err != nil { // stored by an older release whose parser accepted it: stop, say why
		f.p.LastFireAt, f.p.LastOutcome, f.p.LastError = sc.NextFireAt, queue.FireFailed, err.Error()
		s.log.Error("schedule spec does not parse; schedule stopped", zap.String("schedule", sc.Name), zap.Error(err))
		return f, nil
	}
	f.plan = schedule.PlanFires(spec, sc.NextFireAt, now, s.opts.Grace, sc.Missed, sc.CatchUpMax)
	f.p.Next = f.plan.Next
	n := len(f.plan.Fires)
	if n == 0 {
		return f, nil
	}
	f.p.LastFireAt = f.plan.Fires[n-1]
	prev, err := s.previousState(ctx, sc)
	if err != nil {
		return f, err
	}
	if allowed := queue.FiresAllowed(sc.Overlap, prev, n); allowed < n {
		s.log.Debug("schedule fires skipped: the previous fire's job has not ended", zap.String("schedule", sc.Name),
			zap.String("overlap", string(sc.Overlap)), zap.String("previous_job_id", sc.LastJobID),
			zap.String("previous_state", string(prev)), zap.Int("skipped", n-allowed))
		f.plan.Fires = f.plan.Fires[n-allowed:]
		if allowed == 0 {
			f.p.LastJobID, f.p.LastOutcome = sc.LastJobID, queue.FireSkipped
			return f, nil
		}
	}
	f.p.Jobs = make([]store.JobInsertParams, len(f.plan.Fires))
	for i, at := range f.plan.Fires {
		f.p.Jobs[i] = jobOf(sc, schedule.IdempotencyKey(sc.Name, at), at)
		s.e.keyJob(ctx, &f.p.Jobs[i])
	}
	return f, nil
}

// previousState is the state of the job of sc's last fire: "" when there is none, it is gone, or
// the overlap policy does not look at it.
func (s *Schedules) previousState(ctx context.Context, sc *queue.Schedule) (queue.State, error) {
	if sc.LastJobID == "" || sc.Overlap == queue.OverlapAllowAll {
		return "", nil
	}
	j, err := s.e.opts.Store.JobGet(ctx, sc.LastJobID)
	switch {
	case errors.Is(err, queue.ErrJobNotFound):
		return "", nil
	case err != nil:
		return "", fmt.Errorf("schedule %s: previous job: %w", sc.Name, err)
	}
	return j.State, nil
}

// fireChunk writes the fires of many schedules in one transaction. When a job of one of them is
// refused (its queue deleted, say), the chunk is written again one schedule at a time, so only that
// schedule's fire is recorded as failed.
func (s *Schedules) fireChunk(ctx context.Context, chunk []fire, clock func() time.Time) error {
	if len(chunk) == 0 {
		return nil
	}
	ps := make([]store.ScheduleFireParams, len(chunk))
	for i, f := range chunk {
		ps[i] = f.p
	}
	res, err := s.opts.Store.ScheduleFire(ctx, ps)
	switch {
	case err != nil && isCallerError(err) && len(chunk) > 1:
		for _, f := range chunk {
			if err := s.fireChunk(ctx, []fire{f}, clock); err != nil {
				return err
			}
		}
		return nil
	case err != nil && isCallerError(err):
		f := chunk[0]
		f.p.Jobs, f.p.LastJobID, f.p.LastOutcome, f.p.LastError = nil, "", queue.FireFailed, err.Error()
		res, err2 := s.opts.Store.ScheduleFire(ctx, []store.ScheduleFireParams{f.p})
		if err2 != nil {
			return fmt.Errorf("schedule %s: record refused fire: %w", f.sc.Name, err2)
		}
		if res[0].Fired {
			s.opts.Observer.ScheduleFireFailed(f.sc.Name)
			s.log.Warn("schedule fire refused", zap.String("schedule", f.sc.Name), zap.Time("fire_at", f.p.LastFireAt), zap.Error(err))
			s.observeMissed(f)
		}
		return nil
	case err != nil:
		return fmt.Errorf("schedules: fire %d: %w", len(chunk), err)
	}
	var inserted []store.JobInsertResult
	for i, f := range chunk {
		if i >= len(res) || !res[i].Fired {
			continue // deleted, paused or advanced by another replica since it was read
		}
		r := res[i]
		s.observeMissed(f)
		for j, jr := range r.Jobs {
			if jr.Existing {
				continue
			}
			at := f.plan.Fires[j]
			lag := clock().Sub(at)
			s.opts.Observer.ScheduleFired(f.sc.Name, lag)
			s.log.Debug("schedule fired", zap.String("schedule", f.sc.Name), zap.Time("fire_at", at),
				zap.String("job_id", jr.Job.ID), zap.Duration("lag", lag))
		}
		inserted = append(inserted, r.Jobs...)
	}
	if len(inserted) > 0 {
		s.e.afterInsert(ctx, inserted)
	}
	return nil
}

// observeMissed counts and logs the fire times a recorded fire dropped or caught up.
func (s *Schedules) observeMissed(f fire) {
	pl := f.plan
	if pl.Missed == 0 && pl.CaughtUp == 0 {
		return
	}
	if pl.Missed > 0 {
		s.opts.Observer.ScheduleMissed(f.sc.Name, pl.Missed)
	}
	s.log.Info("schedule fire times missed", zap.String("schedule", f.sc.Name), zap.String("policy", string(f.sc.Missed)),
		zap.Int("missed", pl.Missed+pl.CaughtUp), zap.Int("dropped", pl.Missed), zap.Int("caught_up", pl.CaughtUp),
		zap.Time("next_fire_at", pl.Next))
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
