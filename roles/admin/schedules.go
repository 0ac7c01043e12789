package admin

import (
	"errors"
	"fmt"
	"io"
	"maps"
	"slices"
	"strings"
	"time"

	"google.golang.org/protobuf/types/known/durationpb"

	jqv1 "github.com/jq-dev/jq/api/gen/jq/v1"
	"github.com/jq-dev/jq/api/gen/jq/v1/jqv1connect"
	"github.com/jq-dev/jq/queue"
)

// ScheduleCmd groups the schedule commands (docs/schedules.md).
type ScheduleCmd struct {
	Create  ScheduleCreateCmd  `cmd:"" help:"Create a schedule: a job template submitted at the times of a cron spec in a time zone."`
	Update  ScheduleUpdateCmd  `cmd:"" help:"Change a schedule's settings (only the flags given); every replica fires by them from its next pass."`
	List    ScheduleListCmd    `cmd:"" help:"List schedules with their next fire time and last fire."`
	Show    ScheduleShowCmd    `cmd:"" help:"Show a schedule: spec, template, the next 5 fire times, the last fire's job and outcome."`
	Pause   SchedulePauseCmd   `cmd:"" help:"Stop a schedule's fires."`
	Resume  ScheduleResumeCmd  `cmd:"" help:"Resume a paused schedule from its next fire time after now (what passed meanwhile is not fired)."`
	Trigger ScheduleTriggerCmd `cmd:"" help:"Submit the schedule's job now; its next fire time does not change. Prints the job id."`
	Delete  ScheduleDeleteCmd  `cmd:"" help:"Delete a schedule (not one declared in the servers' configuration file); its jobs are kept."`
}

// ScheduleCreateCmd is `schedule create`.
type ScheduleCreateCmd struct {
	Name       string            `arg:"" help:"Schedule name: lower-case letters, digits, '_', '.', '-'."`
	Cron       string            `required:"" help:"Cron spec: 5 fields (minute hour day-of-month month day-of-week), 6 with leading seconds, @hourly/@daily/@weekly/@monthly/@yearly, or '@every 30s'."`
	TZ         string            `name:"tz" help:"IANA time zone the spec is read in, e.g. Europe/Berlin." default:"UTC"`
	Missed     string            `help:"Fire times missed while no server ran: skip, or catch_up (the most recent --catch-up-max)." enum:"skip,catch_up" default:"skip"`
	CatchUpMax int               `help:"With --missed catch_up: how many missed fire times are fired at most, 1-1000 (default 10)."`
	Overlap    string            `help:"What a fire does while the previous fire's job has not ended: skip (the default: a slow job or a stopped worker never piles up copies), buffer_one (submit while that job runs, so at most one fire waits) or allow_all." enum:"skip,buffer_one,allow_all" default:"skip"`
	Queue      string            `help:"Queue of the jobs." default:"default" predictor:"queue"`
	Type       string            `help:"Job type: the handler that runs the jobs." default:"noop"`
	Payload    string            `help:"Payload: JSON text, or @file to read it from a file (@- for stdin)." default:"{}"`
	Priority   int               `help:"0-9, 9 runs first." default:"0"`
	MaxRetries *int              `help:"Retries after a failure (default: the queue's)."`
	JobTimeout time.Duration     `help:"Execution limit of one attempt (default 30s)."`
	TTL        time.Duration     `name:"ttl" help:"Dead-letter each job if it has not started within this time (default: the queue's)."`
	KeepResult bool              `help:"Keep each job's result until fetched."`
	Label      map[string]string `help:"Label k=v of every job (repeatable); jq.schedule=<name> is added." mapsep:"none"`
	Paused     bool              `help:"Create it paused."`
}

// ScheduleUpdateCmd is `schedule update`: create's settings, each optional.
type ScheduleUpdateCmd struct {
	Name       string            `arg:"" help:"Schedule name." predictor:"schedule"`
	Cron       *string           `help:"Cron spec (see schedule create); a new spec or time zone moves the next fire time."`
	TZ         *string           `name:"tz" help:"IANA time zone the spec is read in, e.g. Europe/Berlin."`
	Missed     *string           `help:"Fire times missed while no server ran: skip or catch_up."`
	CatchUpMax *int              `help:"With --missed catch_up: how many missed fire times are fired at most, 1-1000."`
	Overlap    *string           `help:"What a fire does while the previous fire's job has not ended: skip (the default: a slow job or a stopped worker never piles up copies), buffer_one (submit while that job runs, so at most one fire waits) or allow_all."`
	Queue      *string           `help:"Queue of the jobs." predictor:"queue"`
	Type       *string           `help:"Job type: the handler that runs the jobs."`
	Payload    *string           `help:"Payload: JSON text, or @file to read it from a file (@- for stdin)."`
	Priority   *int              `help:"0-9, 9 runs first."`
	MaxRetries *int              `help:"Retries after a failure; -1: the queue's."`
	JobTimeout *time.Duration    `help:"Execution limit of one attempt; 0: the default (30s)."`
	TTL        *time.Duration    `name:"ttl" help:"Dead-letter each job if it has not started within this time; 0: the queue's."`
	KeepResult *bool             `help:"Keep each job's result until fetched (--keep-result=false to stop)."`
	Label      map[string]string `help:"Label k=v of every job (repeatable); replaces the labels. --label '' removes them all." mapsep:"none"`
	Paused     *bool             `help:"Pause (--paused) or resume (--paused=false) the schedule."`
}

// scheduleSettings are the settings create and update send, checked in one place (check).
type scheduleSettings struct {
	cron, tz, missed, overlap string
	catchUpMax                int
	queue, jobType            string
	payload                   []byte
	priority                  int
	maxRetries                *int
	jobTimeout, ttl           time.Duration
	keepResult, paused        bool
	labels                    map[string]string
}

// check refuses what the server would refuse of the settings without asking it, and builds the
// template and policies to send.
func (s scheduleSettings) check() (*jqv1.JobTemplate, jqv1.MissedFirePolicy, jqv1.OverlapPolicy, error) {
	var (
		missed  jqv1.MissedFirePolicy
		overlap jqv1.OverlapPolicy
	)
	if s.priority < 0 || s.priority > 9 {
		return nil, missed, overlap, usagef("--priority %d: want 0 to 9", s.priority)
	}
	switch s.missed {
	case "skip":
		missed = jqv1.MissedFirePolicy_MISSED_FIRE_POLICY_SKIP
		if s.catchUpMax != 0 {
			return nil, missed, overlap, usagef("--catch-up-max applies to --missed catch_up only")
		}
	case "catch_up":
		missed = jqv1.MissedFirePolicy_MISSED_FIRE_POLICY_CATCH_UP
	default:
		return nil, missed, overlap, usagef("--missed %q: want skip or catch_up", s.missed)
	}
	if s.catchUpMax < 0 || s.catchUpMax > 1000 {
		return nil, missed, overlap, usagef("--catch-up-max %d: want 1 to 1000", s.catchUpMax)
	}
	switch s.overlap {
	case "skip":
		overlap = jqv1.OverlapPolicy_OVERLAP_POLICY_SKIP
	case "buffer_one":
		overlap = jqv1.OverlapPolicy_OVERLAP_POLICY_BUFFER_ONE
	case "allow_all":
		overlap = jqv1.OverlapPolicy_OVERLAP_POLICY_ALLOW_ALL
	default:
		return nil, missed, overlap, usagef("--overlap %q: want skip, buffer_one or allow_all", s.overlap)
	}
	tmpl := &jqv1.JobTemplate{Queue: s.queue, Type: s.jobType, Payload: s.payload, Priority: int32(s.priority),
		Labels: s.labels, KeepResult: s.keepResult}
	n, err := maxRetriesArg(s.maxRetries)
	if err != nil {
		return nil, missed, overlap, err
	}
	tmpl.MaxRetries = n
	for _, d := range []struct {
		flag string
		v    time.Duration
		dst  **durationpb.Duration
	}{{"--job-timeout", s.jobTimeout, &tmpl.Timeout}, {"--ttl", s.ttl, &tmpl.Ttl}} {
		if d.v < 0 {
			return nil, missed, overlap, usagef("%s %s: must be positive", d.flag, d.v)
		}
		if d.v > 0 {
			*d.dst = durationpb.New(d.v)
		}
	}
	return tmpl, missed, overlap, nil
}

// settingsOf returns a schedule's settings as stored, for an update to change.
func settingsOf(s *jqv1.Schedule) scheduleSettings {
	t := s.GetTemplate()
	out := scheduleSettings{cron: s.GetCron(), tz: s.GetTimeZone(), missed: "skip", overlap: overlapName(s.GetOverlap()),
		queue: t.GetQueue(), jobType: t.GetType(), payload: t.GetPayload(), priority: int(t.GetPriority()),
		jobTimeout: t.GetTimeout().AsDuration(), ttl: t.GetTtl().AsDuration(), keepResult: t.GetKeepResult(),
		paused: s.GetPaused(), labels: t.GetLabels()}
	if s.GetMissed() == jqv1.MissedFirePolicy_MISSED_FIRE_POLICY_CATCH_UP {
		out.missed, out.catchUpMax = "catch_up", int(s.GetCatchUpMax())
	}
	if t.MaxRetries != nil {
		n := int(t.GetMaxRetries())
		out.maxRetries = &n
	}
	return out
}

func overlapName(o jqv1.OverlapPolicy) string {
	switch o {
	case jqv1.OverlapPolicy_OVERLAP_POLICY_BUFFER_ONE:
		return "buffer_one"
	case jqv1.OverlapPolicy_OVERLAP_POLICY_ALLOW_ALL:
		return "allow_all"
	}
	return "skip"
}

// ScheduleListCmd is `schedule list`.
type ScheduleListCmd struct{}

// ScheduleShowCmd is `schedule show`.
type ScheduleShowCmd struct {
	Name string `arg:"" help:"Schedule name." predictor:"schedule"`
}

// SchedulePauseCmd is `schedule pause`.
type SchedulePauseCmd struct {
	Name string `arg:"" help:"Schedule name." predictor:"schedule"`
}

// ScheduleResumeCmd is `schedule resume`.
type ScheduleResumeCmd struct {
	Name string `arg:"" help:"Schedule name." predictor:"schedule"`
}

// ScheduleTriggerCmd is `schedule trigger`.
type ScheduleTriggerCmd struct {
	Name string `arg:"" help:"Schedule name." predictor:"schedule"`
}

// ScheduleDeleteCmd is `schedule delete`.
type ScheduleDeleteCmd struct {
	Name string `arg:"" help:"Schedule name." predictor:"schedule"`
}

// Run creates a schedule.
func (c *ScheduleCreateCmd) Run(re *runEnv) error {
	payload, err := readPayload(c.Payload, re.Stdin)
	if err != nil {
		return err
	}
	tmpl, missed, overlap, err := scheduleSettings{cron: c.Cron, tz: c.TZ, missed: c.Missed, overlap: c.Overlap,
		catchUpMax: c.CatchUpMax, queue: c.Queue, jobType: c.Type, payload: payload, priority: c.Priority,
		maxRetries: c.MaxRetries, jobTimeout: c.JobTimeout, ttl: c.TTL, keepResult: c.KeepResult, paused: c.Paused,
		labels: c.Label}.check()
	if err != nil {
		return err
	}
	resp, err := call(re, jqv1connect.ScheduleServiceClient.CreateSchedule, &jqv1.CreateScheduleRequest{
		Name: c.Name, Template: tmpl, Cron: c.Cron, TimeZone: c.TZ, Missed: missed,
		CatchUpMax: int32(c.CatchUpMax), Paused: c.Paused, Overlap: overlap, //nolint:gosec // checked: 0..1000
	})
	if err != nil {
		if errors.Is(err, queue.ErrScheduleExists) {
			return fmt.Errorf("schedule %q already exists (jq schedule update %s changes it)", c.Name, shellWord(c.Name))
		}
		return failed(scheduleRefusal(err), "cannot create schedule %q", c.Name)
	}
	return re.printMessage(resp, func(w io.Writer) error {
		s := resp.GetSchedule()
		_, err := fmt.Fprintf(w, "schedule %s created: %s in %s, overlap %s, next fire %s\n", cell(s.GetName()), s.GetCron(),
			s.GetTimeZone(), overlapName(s.GetOverlap()), re.when(s.GetNextFireAt()))
		return err
	})
}

// Run changes a schedule: its settings as stored, with the flags given applied, checked as create
// checks them, sent whole.
func (c *ScheduleUpdateCmd) Run(re *runEnv) error {
	if c.Cron == nil && c.TZ == nil && c.Missed == nil && c.CatchUpMax == nil && c.Overlap == nil && c.Queue == nil &&
		c.Type == nil && c.Payload == nil && c.Priority == nil && c.MaxRetries == nil && c.JobTimeout == nil && c.TTL == nil &&
		c.KeepResult == nil && c.Label == nil && c.Paused == nil {
		return usagef("nothing to change: give at least one of the flags schedule create takes (jq help schedule update)")
	}
	cur, err := call(re, jqv1connect.ScheduleServiceClient.GetSchedule, &jqv1.GetScheduleRequest{Name: c.Name})
	if err != nil {
		return failed(named(err, "schedule", c.Name), "cannot update schedule %q", c.Name)
	}
	s := settingsOf(cur.GetSchedule())
	set := func(dst *string, v *string) {
		if v != nil {
			*dst = *v
		}
	}
	set(&s.cron, c.Cron)
	set(&s.tz, c.TZ)
	set(&s.overlap, c.Overlap)
	set(&s.queue, c.Queue)
	set(&s.jobType, c.Type)
	if c.Missed != nil {
		s.missed = *c.Missed
		if *c.Missed != "catch_up" && c.CatchUpMax == nil {
			s.catchUpMax = 0
		}
	}
	if c.CatchUpMax != nil {
		s.catchUpMax = *c.CatchUpMax
	}
	if c.Payload != nil {
		if s.payload, err = readPayload(*c.Payload, re.Stdin); err != nil {
			return err
		}
	}
	if c.Priority != nil {
		s.priority = *c.Priority
	}
	if c.MaxRetries != nil {
		s.maxRetries = c.MaxRetries
		if *c.MaxRetries == -1 {
			s.maxRetries = nil
		}
	}
	if c.JobTimeout != nil {
		s.jobTimeout = *c.JobTimeout
	}
	if c.TTL != nil {
		s.ttl = *c.TTL
	}
	if c.KeepResult != nil {
		s.keepResult = *c.KeepResult
	}
	if c.Label != nil {
		s.labels = c.Label
		delete(s.labels, "")
	}
	if c.Paused != nil {
		s.paused = *c.Paused
	}
	tmpl, missed, overlap, err := s.check()
	if err != nil {
		return err
	}
	resp, err := call(re, jqv1connect.ScheduleServiceClient.UpdateSchedule, &jqv1.UpdateScheduleRequest{
		Name: c.Name, Template: tmpl, Cron: s.cron, TimeZone: s.tz, Missed: missed,
		CatchUpMax: int32(s.catchUpMax), Paused: s.paused, Overlap: overlap, //nolint:gosec // checked: 0..1000
	})
	if err != nil {
		if errors.Is(err, queue.ErrScheduleOwnedByConfig) {
			return fmt.Errorf("schedule %q is declared in the servers' configuration file: change it there", c.Name)
		}
		return failed(scheduleRefusal(named(err, "schedule", c.Name)), "cannot update schedule %q", c.Name)
	}
	return re.printMessage(resp, func(w io.Writer) error {
		s := resp.GetSchedule()
		next := "next fire " + re.when(s.GetNextFireAt())
		if s.GetPaused() {
			next = "paused"
		}
		_, err := fmt.Fprintf(w, "schedule %s updated: %s in %s, overlap %s, %s\n", cell(s.GetName()), s.GetCron(), s.GetTimeZone(),
			overlapName(s.GetOverlap()), next)
		return err
	})
}

// Run lists the schedules.
func (c *ScheduleListCmd) Run(re *runEnv) error {
	resp, err := call(re, jqv1connect.ScheduleServiceClient.ListSchedules, &jqv1.ListSchedulesRequest{})
	if err != nil {
		return err
	}
	return re.printMessage(resp, func(w io.Writer) error {
		tw := newTable(w)
		fmt.Fprintf(tw, "NAME\t%s\tCRON\tTIME ZONE\tQUEUE\tTYPE\tNEXT FIRE\tLAST FIRE\tOUTCOME\tOWNER\n", re.header("STATE"))
		for _, s := range resp.GetSchedules() {
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n", cell(s.GetName()), re.scheduleState(s), cell(s.GetCron()),
				cell(s.GetTimeZone()), cell(s.GetTemplate().GetQueue()), cell(s.GetTemplate().GetType()), re.when(s.GetNextFireAt()),
				re.when(s.GetLastFireAt()), orDash(s.GetLastOutcome()), ownerName(s.GetOwner()))
		}
		return tw.Flush()
	})
}

// Run shows one schedule.
func (c *ScheduleShowCmd) Run(re *runEnv) error {
	resp, err := call(re, jqv1connect.ScheduleServiceClient.GetSchedule, &jqv1.GetScheduleRequest{Name: c.Name})
	if err != nil {
		return named(err, "schedule", c.Name)
	}
	return re.printMessage(resp, func(w io.Writer) error {
		s, t := resp.GetSchedule(), resp.GetSchedule().GetTemplate()
		tw := newTable(w)
		row := func(k string, v any) { fmt.Fprintf(tw, "%s\t%v\n", k, v) }
		row("NAME", cell(s.GetName()))
		row("STATE", re.scheduleState(s))
		row("OWNER", ownerName(s.GetOwner()))
		row("CRON", cell(s.GetCron()))
		row("TIME ZONE", cell(s.GetTimeZone()))
		missed := "skip"
		if s.GetMissed() == jqv1.MissedFirePolicy_MISSED_FIRE_POLICY_CATCH_UP {
			missed = fmt.Sprintf("catch_up (at most %d)", s.GetCatchUpMax())
		}
		row("MISSED FIRES", missed)
		row("OVERLAP", overlapName(s.GetOverlap()))
		row("QUEUE", cell(t.GetQueue()))
		row("TYPE", cell(t.GetType()))
		row("PAYLOAD", cell(string(t.GetPayload())))
		row("PRIORITY", t.GetPriority())
		if t.MaxRetries != nil {
			row("MAX RETRIES", t.GetMaxRetries())
		} else {
			row("MAX RETRIES", "the queue's")
		}
		row("JOB TIMEOUT", duration(t.GetTimeout()))
		if t.GetTtl() != nil {
			row("TTL", duration(t.GetTtl()))
		} else {
			row("TTL", "the queue's")
		}
		row("KEEP RESULT", t.GetKeepResult())
		if len(t.GetLabels()) > 0 {
			var ls []string
			for _, k := range slices.Sorted(maps.Keys(t.GetLabels())) {
				ls = append(ls, k+"="+t.GetLabels()[k])
			}
			row("LABELS", cell(strings.Join(ls, ",")))
		}
		for i, at := range resp.GetNextFireTimes() {
			k := ""
			if i == 0 {
				k = "NEXT FIRES"
			}
			row(k, re.when(at))
		}
		if len(resp.GetNextFireTimes()) == 0 {
			row("NEXT FIRES", "none: the spec never fires again")
		}
		row("LAST FIRE", re.when(s.GetLastFireAt()))
		row("LAST JOB", orDash(s.GetLastJobId()))
		if resp.GetLastJobState() != jqv1.JobState_JOB_STATE_UNSPECIFIED {
			row("LAST JOB STATE", strings.TrimPrefix(resp.GetLastJobState().String(), "JOB_STATE_"))
		}
		row("LAST OUTCOME", orDash(s.GetLastOutcome()))
		if s.GetLastError() != "" {
			row("LAST ERROR", re.paint(colRed, cell(s.GetLastError())))
		}
		row("CREATED", re.when(s.GetCreatedAt()))
		return tw.Flush()
	})
}

// Run pauses a schedule.
func (c *SchedulePauseCmd) Run(re *runEnv) error {
	resp, err := call(re, jqv1connect.ScheduleServiceClient.PauseSchedule, &jqv1.PauseScheduleRequest{Name: c.Name})
	if err != nil {
		return failed(named(err, "schedule", c.Name), "cannot pause schedule %q", c.Name)
	}
	return re.printMessage(resp, scheduleLine(re, resp.GetSchedule()))
}

// Run resumes a paused schedule.
func (c *ScheduleResumeCmd) Run(re *runEnv) error {
	resp, err := call(re, jqv1connect.ScheduleServiceClient.ResumeSchedule, &jqv1.ResumeScheduleRequest{Name: c.Name})
	if err != nil {
		return failed(named(err, "schedule", c.Name), "cannot resume schedule %q", c.Name)
	}
	return re.printMessage(resp, scheduleLine(re, resp.GetSchedule()))
}

// scheduleLine is the table output of pause and resume.
func scheduleLine(re *runEnv, s *jqv1.Schedule) func(io.Writer) error {
	return func(w io.Writer) error {
		word := "resumed: next fire " + re.when(s.GetNextFireAt())
		if s.GetPaused() {
			word = "paused: it fires nothing until it is resumed"
		}
		_, err := fmt.Fprintf(w, "schedule %s %s\n", cell(s.GetName()), word)
		return err
	}
}

// Run submits the schedule's job now and prints its id.
func (c *ScheduleTriggerCmd) Run(re *runEnv) error {
	resp, err := call(re, jqv1connect.ScheduleServiceClient.TriggerSchedule, &jqv1.TriggerScheduleRequest{Name: c.Name})
	if err != nil {
		return failed(named(err, "schedule", c.Name), "cannot trigger schedule %q", c.Name)
	}
	return re.printMessage(resp, func(w io.Writer) error {
		_, err := fmt.Fprintln(w, resp.GetJob().GetId())
		return err
	})
}

// Run deletes a schedule.
func (c *ScheduleDeleteCmd) Run(re *runEnv) error {
	resp, err := call(re, jqv1connect.ScheduleServiceClient.DeleteSchedule, &jqv1.DeleteScheduleRequest{Name: c.Name})
	if err != nil {
		if errors.Is(err, queue.ErrScheduleOwnedByConfig) {
			return fmt.Errorf("schedule %q is declared in the servers' configuration file: remove it there", c.Name)
		}
		return failed(named(err, "schedule", c.Name), "cannot delete schedule %q", c.Name)
	}
	return re.printMessage(resp, func(w io.Writer) error {
		_, err := fmt.Fprintf(w, "schedule %s deleted\n", cell(c.Name))
		return err
	})
}

func (re *runEnv) scheduleState(s *jqv1.Schedule) string {
	if s.GetPaused() {
		return re.paint(colYellow, "paused")
	}
	if s.GetLastOutcome() == "failed" {
		return re.paint(colRed, "failing")
	}
	return re.paint(colGreen, "active")
}

func ownerName(o jqv1.ScheduleOwner) string {
	if o == jqv1.ScheduleOwner_SCHEDULE_OWNER_CONFIG {
		return "config"
	}
	return "api"
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return cell(s)
}

// cronExamples follows a refused cron spec: what a valid one looks like.
const cronExamples = "; e.g. --cron '*/5 * * * *' (every 5 minutes), '0 9 * * MON-FRI' (9:00 on weekdays), '@every 30s', '@daily' (docs/schedules.md)"

// scheduleRefusal is refusal, with examples after a bad cron spec.
func scheduleRefusal(err error) error {
	err = refusal(err)
	if !errors.Is(err, queue.ErrInvalidArgument) {
		return err
	}
	msg := serverMessage(err)
	if strings.HasPrefix(msg, "cron spec") && !strings.Contains(msg, "e.g.") {
		msg += cronExamples
	}
	return reworded(err, msg)
}
