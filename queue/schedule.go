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
)

// JobTemplate is the job a schedule submits at every fire time.
type JobTemplate struct {
	Queue      string
	Type       string
	Payload    []byte
	Priority   int
	MaxRetries *int          // nil: the queue's
	Timeout    time.Duration // 0: DefaultJobTimeout
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
	Paused     bool
	Owner      ScheduleOwner

	// NextFireAt is the next fire time not yet handled; the fire loop advances it with a
	// compare-and-set after submitting the fire's job.
	NextFireAt time.Time
	// LastFireAt, LastJobID, LastOutcome and LastError describe the last fire handled (zero
	// before the first).
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
