// Package schedule holds the rules of periodic jobs (docs/schedules.md): a schedule's spec — a cron
// expression read in an IANA time zone, parsed by github.com/robfig/cron/v3 — the fire times it
// yields, what becomes of the fire times missed while no server ran (Plan), and the idempotency key
// that makes every fire time submit one job however many server replicas fire it. They are pure
// functions of the spec and the times given, so every replica decides the same; the engine's fire
// loop (queue/engine) does the I/O.
//
// # Specs
//
// Five fields (minute hour day-of-month month day-of-week), or six with leading seconds; the
// descriptors @yearly (@annually), @monthly, @weekly, @daily (@midnight) and @hourly; and
// @every <duration> (whole seconds, at least 1s). Field syntax is robfig/cron's: *, lists, ranges,
// steps, month and weekday names, ? for * in the day fields. A spec is read in its schedule's time
// zone (UTC by default); @every counts absolute time and ignores the zone.
//
// @every D fires at the multiples of D since the Unix epoch (UTC), not D after some start: every
// replica, a restart and a resume agree on the same fire times (@every 30s fires at :00 and :30).
//
// # Daylight saving time
//
// The parser's rules, checked by the table tests in two zones: a wall-clock time that does not exist
// on the day clocks go forward (02:30 in Europe/Berlin on the last Sunday of March) is not fired that
// day; one that occurs twice when clocks go back (02:30 on the last Sunday of October) is fired at
// both instants, an hour apart. Specs whose times avoid the switch hours (most: 01:00–03:00 local)
// are unaffected; hourly and finer specs fire on real hours (23 on the spring day, 25 in autumn).
package schedule

import (
	"errors"
	"fmt"
	"strings"
	"time"
	_ "time/tzdata" // IANA zones inside the binary: the release image (FROM scratch) has no zoneinfo

	"github.com/robfig/cron/v3"

	"github.com/jq-dev/jq/queue"
)

// DefaultTimeZone is the zone of a spec that names none.
const DefaultTimeZone = "UTC"

// parser reads five fields or six with leading seconds, and the descriptors.
var parser = cron.NewParser(cron.SecondOptional | cron.Minute | cron.Hour | cron.Dom | cron.Month | cron.Dow | cron.Descriptor)

// Spec is a parsed cron expression in its time zone.
type Spec struct {
	expr  string
	zone  string
	loc   *time.Location
	every time.Duration // @every: fire at the multiples of every since the epoch
	sched cron.Schedule
}

// Parse parses expr in the IANA zone tz ("" is UTC). Errors wrap queue.ErrInvalidArgument.
func Parse(expr, tz string) (_ *Spec, err error) {
	expr = strings.TrimSpace(expr)
	if tz == "" {
		tz = DefaultTimeZone
	}
	if expr == "" || len(expr) > queue.MaxCronLen {
		return nil, fmt.Errorf("%w: cron spec: want 1..%d bytes", queue.ErrInvalidArgument, queue.MaxCronLen)
	}
	if strings.HasPrefix(expr, "TZ=") || strings.HasPrefix(expr, "CRON_TZ=") {
		return nil, fmt.Errorf("%w: cron spec %s: give the time zone separately (--tz, time_zone), not inside the spec",
			queue.ErrInvalidArgument, queue.Excerpt(expr))
	}
	if tz == "Local" || strings.ContainsAny(tz, " \t\n") {
		return nil, fmt.Errorf("%w: time zone %s: want an IANA name such as Europe/Berlin or UTC", queue.ErrInvalidArgument, queue.Excerpt(tz))
	}
	loc, err := time.LoadLocation(tz)
	if err != nil {
		return nil, fmt.Errorf("%w: time zone %s: want an IANA name such as Europe/Berlin or UTC", queue.ErrInvalidArgument, queue.Excerpt(tz))
	}
	s := &Spec{expr: expr, zone: tz, loc: loc}
	if d, ok := strings.CutPrefix(expr, "@every "); ok {
		every, err := time.ParseDuration(strings.TrimSpace(d))
		if err != nil || every < time.Second || every%time.Second != 0 {
			return nil, fmt.Errorf("%w: cron spec %s: @every wants whole seconds, at least 1s (e.g. @every 30s, @every 1h)",
				queue.ErrInvalidArgument, queue.Excerpt(expr))
		}
		s.every = every
		return s, nil
	}
	defer func() { // the parser is third-party code reading client input: a panic is a refusal
		if r := recover(); r != nil {
			err = fmt.Errorf("%w: cron spec %s: unparsable", queue.ErrInvalidArgument, queue.Excerpt(expr))
		}
	}()
	sched, err := parser.Parse(expr)
	if err != nil {
		return nil, fmt.Errorf("%w: cron spec %s: %s", queue.ErrInvalidArgument, queue.Excerpt(expr), err.Error())
	}
	spec, ok := sched.(*cron.SpecSchedule)
	if !ok {
		return nil, errors.New("schedule: unexpected schedule type from the cron parser")
	}
	spec.Location = loc
	s.sched = spec
	return s, nil
}

// String is the spec as given.
func (s *Spec) String() string { return s.expr }

// TimeZone is the spec's zone name.
func (s *Spec) TimeZone() string { return s.zone }

// Location is the spec's zone.
func (s *Spec) Location() *time.Location { return s.loc }

// Next returns the first fire time strictly after t, or the zero time when there is none within
// five years (a day that never comes, such as 0 0 30 2 *). Fire times are whole seconds.
func (s *Spec) Next(t time.Time) time.Time {
	if s.every > 0 {
		d := int64(s.every / time.Second)
		sec := t.Unix() // floor for t after the epoch; jq's times are
		n := sec - sec%d + d
		return time.Unix(n, 0).UTC()
	}
	n := s.sched.Next(t)
	if n.IsZero() {
		return n
	}
	return n.UTC()
}

// Upcoming returns the first n fire times at or after from.
func (s *Spec) Upcoming(from time.Time, n int) []time.Time {
	out := make([]time.Time, 0, n)
	t := s.Next(from.Add(-time.Nanosecond))
	for len(out) < n && !t.IsZero() {
		out = append(out, t)
		t = s.Next(t)
	}
	return out
}

// IdempotencyKey is the key the job of fire time at of schedule name is submitted with: every
// replica that fires the same time submits the same key, and the store keeps one job per key.
func IdempotencyKey(name string, at time.Time) string {
	return "schedule:" + name + ":" + at.UTC().Format(time.RFC3339)
}

// TriggerKey is the key of a job triggered by hand at the time at: a retried trigger request
// within the same instant collapses; two triggers make two jobs.
func TriggerKey(name string, at time.Time) string {
	return "schedule:" + name + ":trigger:" + at.UTC().Format(time.RFC3339Nano)
}
