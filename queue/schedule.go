package queue

import (
	"errors"
	"fmt"
	"regexp"
	"time"
)

// Schedules (periodic jobs): a named job template fired at the times of a cron spec in a time zone.
// The fire rules (next fire time, missed fires, the idempotency key of a fire) need a cron parser and
// live in queue/schedule; this file holds what every layer shares.

// Schedule errors; the API maps them like their queue counterparts.
var (
	// ErrScheduleNotFound: no schedule has the given name.
	ErrScheduleNotFound = errors.New("schedule not found")
	// ErrScheduleExists: a schedule with that name already exists.
	ErrScheduleExists = errors.New("schedule already exists")
	// ErrScheduleOwnedByConfig: the schedule is declared in the servers' configuration file and is
	// changed there, not over the API.
	ErrScheduleOwnedByConfig = errors.New("schedule is declared in the configuration file")
)

// MissedPolicy says what becomes of the fire times that passed while no server was running.
type MissedPolicy string

// Missed-fire policies.
const (
	// MissedSkip drops missed fire times (the default): the schedule continues with its next one.
	MissedSkip MissedPolicy = "skip"
	// MissedCatchUp fires the most recent missed fire times, at most Schedule.CatchUpMax of them.
	MissedCatchUp MissedPolicy = "catch_up"
)

// OverlapPolicy says what a fire does when the job of the schedule's previous fire has not ended
// (is not DONE or DEAD_LETTERED).
type OverlapPolicy string

// Overlap policies.
const (
	// OverlapSkip drops the fire (the default): a job slower than its period, or a fire while no
	// worker takes the queue, never piles up copies of the same job.
	OverlapSkip OverlapPolicy = "skip"
	// OverlapBufferOne keeps at most one fire waiting: the fire is submitted while the previous job
	// is in progress (ASSIGNED or RUNNING) and dropped while it still waits (PENDING, or FAILED
	// awaiting its retry).
	OverlapBufferOne OverlapPolicy = "buffer_one"
	// OverlapAllowAll submits every fire, whatever the previous job's state.
	OverlapAllowAll OverlapPolicy = "allow_all"
)

// DefaultOverlap is the policy of a schedule created without one.
const DefaultOverlap = OverlapSkip

// ValidateOverlap checks an overlap policy; "" is DefaultOverlap.
func ValidateOverlap(p OverlapPolicy) (OverlapPolicy, error) {
	switch p {
	case "":
		return DefaultOverlap, nil
	case OverlapSkip, OverlapBufferOne, OverlapAllowAll:
		return p, nil
	}
	return "", fmt.Errorf("%w: overlap policy %s: want %q, %q or %q", ErrInvalidArgument, Excerpt(string(p)),
		OverlapSkip, OverlapBufferOne, OverlapAllowAll)
}

// FiresAllowed is how many of a pass's fires a schedule under policy p submits when the job of its
// previous fire is in state prev ("" when there is none, or it no longer exists): every one when
// the previous job has ended; otherwise none (skip, or buffer_one while that job still waits), at
// most one (buffer_one while it runs) or every one (allow_all).
func FiresAllowed(p OverlapPolicy, prev State, fires int) int {
	if prev == "" || prev.Terminal() || p == OverlapAllowAll {
		return fires
	}
	if p == OverlapBufferOne && (prev == StateAssigned || prev == StateRunning) {
		return min(fires, 1)
	}
	return 0
}

// ScheduleOwner says where a schedule is managed.
type ScheduleOwner string

// Schedule owners.
const (
	OwnerAPI    ScheduleOwner = "api"    // created over the API (or the admin CLI)
	OwnerConfig ScheduleOwner = "config" // declared in the configuration file, reconciled at start
)

// Schedule bounds.
const (
	// MaxCatchUp bounds Schedule.CatchUpMax.
	MaxCatchUp = 1000
	// DefaultCatchUp is CatchUpMax when the catch_up policy is chosen without a bound.
	DefaultCatchUp = 10
	// MaxCronLen bounds a cron spec's length.
	MaxCronLen = 200
)

// Outcomes of a fire, recorded as Schedule.LastOutcome.
const (
	FireSubmitted = "submitted" // the fire created its job
	FireExisting  = "existing"  // another replica (or an earlier try) had created the job already
	FireFailed    = "failed"    // the job was refused (e.g. its queue does not exist); see LastError
	// FireSkipped: the overlap policy dropped the fire; LastJobID stays the previous fire's job.
	FireSkipped = "skipped"
)

// JobTemplate is the job a schedule submits at every fire time.
type JobTemplate struct {
	Queue      string
	Type       string
	Payload    []byte
	Priority   int
	MaxRetries *int          // nil: the queue's
	Timeout    time.Duration // 0: DefaultJobTimeout
	TTL        time.Duration // 0: the queue's TTL (which may be none)
	KeepResult bool          // keep each job's result for a fetch, as a submit's keep_result
	Labels     map[string]string
}

// Schedule is a named job template and when to submit it.
type Schedule struct {
	Name     string
	Template JobTemplate
	// Cron is the spec: 5 fields (minute hour day-of-month month day-of-week), 6 with leading
	// seconds, or a descriptor (@hourly, @daily, @every 30s, ...).
	Cron string
	// TimeZone is the IANA zone the spec's wall-clock times are read in ("UTC" by default).
	TimeZone   string
	Missed     MissedPolicy
	CatchUpMax int // with MissedCatchUp: how many missed fire times are fired at most
	// Overlap says what a fire does while the previous fire's job has not ended.
	Overlap OverlapPolicy
	Paused  bool
	Owner   ScheduleOwner

	// NextFireAt is the next fire time not yet handled; the fire loop advances it with a
	// compare-and-set after submitting the fire's job.
	NextFireAt time.Time
	// LastFireAt, LastJobID, LastOutcome and LastError describe the last fire handled (zero
	// before the first); after a fire the overlap policy skipped, LastJobID is still the job of
	// the fire before, whose state the next fire looks at.
	LastFireAt  time.Time
	LastJobID   string
	LastOutcome string
	LastError   string
	CreatedAt   time.Time
	UpdatedAt   time.Time
}

var scheduleNameRE = regexp.MustCompile(`^[a-z0-9][a-z0-9_.-]{0,63}$`)

// ValidateScheduleName accepts the names a queue may have: 1–64 characters of lower-case letters,
// digits, '_', '.' and '-', starting with a letter or digit (the name is a metric label and part of
// every fire's idempotency key).
func ValidateScheduleName(name string) error {
	if !scheduleNameRE.MatchString(name) {
		return fmt.Errorf("%w: schedule name %s must match %s", ErrInvalidArgument, Excerpt(name), scheduleNameRE)
	}
	return nil
}

// ValidateMissed checks a missed-fire policy and its bound, and returns the bound to store: 0 for
// skip, DefaultCatchUp for catch_up without one.
func ValidateMissed(p MissedPolicy, catchUpMax int) (int, error) {
	switch p {
	case MissedSkip:
		if catchUpMax != 0 {
			return 0, fmt.Errorf("%w: catch_up_max applies to the catch_up policy only", ErrInvalidArgument)
		}
		return 0, nil
	case MissedCatchUp:
		if catchUpMax == 0 {
			return DefaultCatchUp, nil
		}
		if catchUpMax < 1 || catchUpMax > MaxCatchUp {
			return 0, fmt.Errorf("%w: catch_up_max %d: want 1 to %d", ErrInvalidArgument, catchUpMax, MaxCatchUp)
		}
		return catchUpMax, nil
	}
	return 0, fmt.Errorf("%w: missed-fire policy %s: want %q or %q", ErrInvalidArgument, Excerpt(string(p)), MissedSkip, MissedCatchUp)
}
