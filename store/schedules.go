package store

import (
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/jq-dev/jq/queue"
)

// ScheduleStore holds the schedules of periodic jobs (docs/schedules.md). The store computes no
// rule: next fire times are decided in Go (queue/schedule) and written as given. Every
// implementation passes storetest.RunScheduleStore.
type ScheduleStore interface {
	// ScheduleCreate creates a schedule. Errors: ErrInvalidArgument, ErrScheduleExists.
	ScheduleCreate(ctx context.Context, p ScheduleParams) (*queue.Schedule, error)
	// ScheduleGet returns one schedule. Errors: ErrScheduleNotFound.
	ScheduleGet(ctx context.Context, name string) (*queue.Schedule, error)
	// ScheduleList returns every schedule ordered by name.
	ScheduleList(ctx context.Context) ([]*queue.Schedule, error)
	// ScheduleUpdate replaces the settings of a schedule owned by p.Owner — template, cron spec,
	// time zone, policies, paused flag — keeping its last_* fields and created_at. next_fire_at
	// becomes p.NextFireAt when the cron spec or time zone changes or the schedule is resumed
	// (paused before, not now), and stays otherwise, so an edit of the template loses no fire.
	// Errors: ErrInvalidArgument, ErrScheduleNotFound, ErrScheduleOwnedByConfig (the schedule has
	// another owner; nothing is changed).
	ScheduleUpdate(ctx context.Context, p ScheduleParams) (*queue.Schedule, error)
	// ScheduleDelete deletes a schedule owned by p.Owner. Errors: ErrScheduleNotFound,
	// ErrScheduleOwnedByConfig (the schedule has another owner; nothing is deleted).
	ScheduleDelete(ctx context.Context, p ScheduleDeleteParams) error
	// ScheduleSetPaused pauses or resumes a schedule; resuming sets next_fire_at to p.NextFireAt.
	// Errors: ErrScheduleNotFound.
	ScheduleSetPaused(ctx context.Context, p ScheduleSetPausedParams) (*queue.Schedule, error)
	// ScheduleReconcile makes the config-owned schedules exactly p.Schedules, in one transaction:
	// each is created, or updated in place (an API-owned one of the same name is taken over). An
	// updated schedule keeps its next_fire_at and paused flag unless its cron spec or time zone
	// changed or it was taken over (then next_fire_at becomes the given one); config-owned
	// schedules not in the list are deleted. Errors: ErrInvalidArgument.
	ScheduleReconcile(ctx context.Context, p ScheduleReconcileParams) (ScheduleReconcileResult, error)
	// ScheduleDue returns the store's clock, the earliest next_fire_at of the unpaused schedules
	// (zero: none), and up to limit unpaused schedules due by that clock, earliest first.
	ScheduleDue(ctx context.Context, limit int) (ScheduleDueResult, error)
	// ScheduleAdvance records a handled fire: it sets next_fire_at to p.Next (zero: never again) and
	// the last_* fields, on the condition that next_fire_at still is p.From. It reports whether it
	// did: false means another replica advanced the schedule first (or it was changed or deleted).
	ScheduleAdvance(ctx context.Context, p ScheduleAdvanceParams) (bool, error)
	// ScheduleFire records the handled fires of many schedules in one transaction. For each p whose
	// schedule still exists, unpaused, with next_fire_at = p.From (read under a lock held to the
	// commit), it inserts p.Jobs as JobInsertMany does and advances the schedule as ScheduleAdvance
	// does; when p.Jobs is not empty the last_* fields describe the last job (its id, and
	// FireSubmitted or FireExisting), whatever p says. A schedule deleted, paused or advanced
	// meanwhile gets nothing (Fired false, no job): a delete or pause that returned stops every later
	// fire, and of two replicas firing the same time one inserts. The batch is all or nothing: a job
	// refused (ErrQueueNotFound, ErrInvalidArgument, ErrIdempotencyConflict) fails the call, and
	// nothing is written. Results are in the order of ps.
	ScheduleFire(ctx context.Context, ps []ScheduleFireParams) ([]ScheduleFireResult, error)
}

// MaxScheduleFireJobs bounds the jobs of one ScheduleFire call.
const MaxScheduleFireJobs = 10_000

// ScheduleFireParams are one schedule's fires of a pass.
type ScheduleFireParams struct {
	ScheduleAdvanceParams
	// Jobs are the fires' jobs, oldest first (none: only the advance, e.g. a refused fire).
	Jobs []JobInsertParams
}

// ScheduleFireResult is what ScheduleFire did for one schedule.
type ScheduleFireResult struct {
	// Fired: the schedule was still due as read, its jobs are inserted and it is advanced.
	Fired bool
	// Jobs are the results of p.Jobs, in order (nil unless Fired).
	Jobs []JobInsertResult
}

// ValidateScheduleFire checks a ScheduleFire batch before any I/O and returns its jobs in order.
func ValidateScheduleFire(ps []ScheduleFireParams) ([]JobInsertParams, error) {
	var jobs []JobInsertParams
	seen := make(map[string]bool, len(ps))
	for _, p := range ps {
		if err := queue.ValidateScheduleName(p.Name); err != nil {
			return nil, err
		}
		if seen[p.Name] {
			return nil, invalid("schedule %s fired twice in one batch", p.Name)
		}
		seen[p.Name] = true
		if p.LastJobID != "" {
			if _, err := ParseJobID(p.LastJobID); err != nil {
				return nil, err
			}
		}
		for i, j := range p.Jobs {
			if err := j.Validate(); err != nil {
				return nil, fmt.Errorf("schedule %s: job %d: %w", p.Name, i, err)
			}
		}
		jobs = append(jobs, p.Jobs...)
	}
	if len(jobs) > MaxScheduleFireJobs {
		return nil, invalid("%d jobs in one schedule fire batch, at most %d", len(jobs), MaxScheduleFireJobs)
	}
	return jobs, nil
}

// Advanced returns p's advance as recorded after its jobs' results: the last job's id and outcome
// when there are jobs.
func (p ScheduleFireParams) Advanced(res []JobInsertResult) ScheduleAdvanceParams {
	a := p.ScheduleAdvanceParams
	if n := len(res); n > 0 && res[n-1].Job != nil {
		a.LastJobID, a.LastOutcome, a.LastError = res[n-1].Job.ID, queue.FireSubmitted, ""
		if res[n-1].Existing {
			a.LastOutcome = queue.FireExisting
		}
	}
	return a
}

// ScheduleParams describes a schedule to create or reconcile.
type ScheduleParams struct {
	Name       string
	Template   queue.JobTemplate
	Cron       string
	TimeZone   string
	Missed     queue.MissedPolicy
	CatchUpMax int
	Overlap    queue.OverlapPolicy // "": queue.DefaultOverlap
	Paused     bool
	Owner      queue.ScheduleOwner
	// NextFireAt is the first fire time, decided by the caller (zero: the spec never fires).
	NextFireAt time.Time
}

// Validate checks what a store can check without the cron parser: the name, the template (as a
// job's fields are checked), the policy, the owner.
func (p ScheduleParams) Validate() error {
	if err := queue.ValidateScheduleName(p.Name); err != nil {
		return err
	}
	if n, err := queue.ValidateMissed(p.Missed, p.CatchUpMax); err != nil || n != p.CatchUpMax {
		return invalid("schedule %s: missed %s with catch_up_max %d: want skip with 0, or catch_up with 1..%d",
			p.Name, queue.Excerpt(string(p.Missed)), p.CatchUpMax, queue.MaxCatchUp)
	}
	if _, err := queue.ValidateOverlap(p.Overlap); err != nil {
		return err
	}
	if p.Owner != queue.OwnerAPI && p.Owner != queue.OwnerConfig {
		return invalid("schedule %s: owner %s: want api or config", p.Name, queue.Excerpt(string(p.Owner)))
	}
	if p.Cron == "" || len(p.Cron) > queue.MaxCronLen {
		return invalid("schedule %s: cron: want 1..%d bytes", p.Name, queue.MaxCronLen)
	}
	if err := JobParamsOf(p.Template, "", time.Time{}).Validate(); err != nil {
		return fmt.Errorf("schedule %s: %w", p.Name, err)
	}
	return nil
}

// OverlapOrDefault is p.Overlap, or queue.DefaultOverlap when unset: what a store writes.
func (p ScheduleParams) OverlapOrDefault() queue.OverlapPolicy {
	if p.Overlap == "" {
		return queue.DefaultOverlap
	}
	return p.Overlap
}

// ScheduleDeleteParams names the schedule to delete and who asks.
type ScheduleDeleteParams struct {
	Name  string
	Owner queue.ScheduleOwner
}

// ScheduleSetPausedParams pauses (Paused) or resumes a schedule.
type ScheduleSetPausedParams struct {
	Name   string
	Paused bool
	// NextFireAt is the first fire time after a resume (ignored when pausing).
	NextFireAt time.Time
}

// ScheduleReconcileParams are the schedules the configuration file declares (Owner config).
type ScheduleReconcileParams struct {
	Schedules []ScheduleParams
}

// Names validates a reconcile's schedules — each config-owned, valid and declared once — and returns
// their names in order. Errors: ErrInvalidArgument.
func (p ScheduleReconcileParams) Names() ([]string, error) {
	names := make([]string, len(p.Schedules))
	for i, sp := range p.Schedules {
		if sp.Owner != queue.OwnerConfig {
			return nil, fmt.Errorf("%w: schedule %s: reconcile writes config-owned schedules only", queue.ErrInvalidArgument, sp.Name)
		}
		if err := sp.Validate(); err != nil {
			return nil, err
		}
		if slices.Contains(names[:i], sp.Name) {
			return nil, fmt.Errorf("%w: schedule %s declared twice", queue.ErrInvalidArgument, sp.Name)
		}
		names[i] = sp.Name
	}
	return names, nil
}

// ScheduleReconcileResult names what a reconcile changed.
type ScheduleReconcileResult struct {
	Created, Updated, Deleted []string
	// TakenOver lists the API-owned schedules the configuration now owns (also in Updated).
	TakenOver []string
}

// ScheduleDueResult is what ScheduleDue found.
type ScheduleDueResult struct {
	Now      time.Time // the store's clock
	Earliest time.Time // the earliest next_fire_at of an unpaused schedule; zero: none
	Due      []*queue.Schedule
}

// ScheduleAdvanceParams records one handled fire.
type ScheduleAdvanceParams struct {
	Name       string
	From, Next time.Time
	// LastFireAt, LastJobID, LastOutcome and LastError describe the fire; a zero LastFireAt
	// leaves the last_* fields as they are (a spec that only skipped missed fire times).
	LastFireAt  time.Time
	LastJobID   string
	LastOutcome string
	LastError   string
}

// JobParamsOf returns the insert params of the job a template submits with the idempotency key key,
// due at runAt.
func JobParamsOf(t queue.JobTemplate, key string, runAt time.Time) JobInsertParams {
	return JobInsertParams{
		Queue: t.Queue, Type: t.Type, Payload: t.Payload, Priority: t.Priority, MaxRetries: t.MaxRetries,
		Timeout: t.Timeout, TTL: t.TTL, KeepResult: t.KeepResult, Labels: t.Labels, IdempotencyKey: key, RunAt: runAt,
	}
}
