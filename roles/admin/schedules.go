package admin

import (
	"errors"
	"fmt"
	"io"
	"maps"
	"slices"
	"strings"
	"time"

	"connectrpc.com/connect"
	"google.golang.org/protobuf/types/known/durationpb"

	jqv1 "github.com/jq-dev/jq/api/gen/jq/v1"
	"github.com/jq-dev/jq/api/gen/jq/v1/jqv1connect"
	"github.com/jq-dev/jq/queue"
)

// ScheduleCmd groups the schedule commands (docs/schedules.md).
type ScheduleCmd struct {
	Create  ScheduleCreateCmd  `cmd:"" help:"Create a schedule: a job template submitted at the times of a cron spec in a time zone."`
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
	Queue      string            `help:"Queue of the jobs." default:"default" predictor:"queue"`
	Type       string            `help:"Job type: the handler that runs the jobs." default:"noop"`
	Payload    string            `help:"Payload: JSON text, or @file to read it from a file (@- for stdin)." default:"{}"`
	Priority   int               `help:"0-9, 9 runs first." default:"0"`
	MaxRetries *int              `help:"Retries after a failure (default: the queue's)."`
	JobTimeout time.Duration     `help:"Execution limit of one attempt (default 30s)."`
	Label      map[string]string `help:"Label k=v of every job (repeatable); jq.schedule=<name> is added." mapsep:"none"`
	Paused     bool              `help:"Create it paused."`
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
	if c.Priority < 0 || c.Priority > 9 {
		return usagef("--priority %d: want 0 to 9", c.Priority)
	}
	if c.CatchUpMax != 0 && c.Missed != "catch_up" {
		return usagef("--catch-up-max applies to --missed catch_up only")
	}
	tmpl := &jqv1.JobTemplate{Queue: c.Queue, Type: c.Type, Payload: payload, Priority: int32(c.Priority), Labels: c.Label}
	if c.MaxRetries != nil {
		if *c.MaxRetries < 0 || *c.MaxRetries > 100 {
			return usagef("--max-retries %d: want 0 to 100", *c.MaxRetries)
		}
		n := int32(*c.MaxRetries)
		tmpl.MaxRetries = &n
	}
	if c.JobTimeout < 0 {
		return usagef("--job-timeout %s: must be positive", c.JobTimeout)
	}
	if c.JobTimeout > 0 {
		tmpl.Timeout = durationpb.New(c.JobTimeout)
	}
	missed := jqv1.MissedFirePolicy_MISSED_FIRE_POLICY_SKIP
	if c.Missed == "catch_up" {
		missed = jqv1.MissedFirePolicy_MISSED_FIRE_POLICY_CATCH_UP
	}
	if c.CatchUpMax < 0 || c.CatchUpMax > 1000 {
		return usagef("--catch-up-max %d: want 1 to 1000", c.CatchUpMax)
	}
	resp, err := call(re, jqv1connect.ScheduleServiceClient.CreateSchedule, &jqv1.CreateScheduleRequest{
		Name: c.Name, Template: tmpl, Cron: c.Cron, TimeZone: c.TZ, Missed: missed,
		CatchUpMax: int32(c.CatchUpMax), Paused: c.Paused,
	})
	if err != nil {
		if connect.CodeOf(err) == connect.CodeAlreadyExists {
			return fmt.Errorf("schedule %q already exists", c.Name)
		}
		return failed(scheduleRefusal(err, c.Name), "cannot create schedule %q", c.Name)
	}
	return re.printMessage(resp, func(w io.Writer) error {
		s := resp.GetSchedule()
		_, err := fmt.Fprintf(w, "schedule %s created: %s in %s, next fire %s\n", cell(s.GetName()), s.GetCron(), s.GetTimeZone(),
			re.when(s.GetNextFireAt()))
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
		if connect.CodeOf(err) == connect.CodeFailedPrecondition {
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

// scheduleRefusal words the server's INVALID_ARGUMENT for a schedule the command names already: the
// name and the error class once, not again in the server's text, and an example after a bad cron spec.
func scheduleRefusal(err error, name string) error {
	if connect.CodeOf(err) != connect.CodeInvalidArgument {
		return err
	}
	msg := serverMessage(err)
	msg = strings.TrimPrefix(msg, "schedule "+name+": ")
	msg = strings.TrimPrefix(msg, queue.ErrInvalidArgument.Error()+": ")
	if strings.HasPrefix(msg, "cron spec") && !strings.Contains(msg, "e.g.") {
		msg += cronExamples
	}
	return connect.NewError(connect.CodeInvalidArgument, errors.New(msg))
}
