package console

import (
	"maps"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"

	"connectrpc.com/connect"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/timestamppb"

	jqv1 "github.com/jq-dev/jq/api/gen/jq/v1"
	"github.com/jq-dev/jq/queue"
)

// schedulesData is the schedules page: every schedule with its next fire and last result.
type schedulesData struct {
	Schedules []*jqv1.Schedule
}

func (c *Console) schedulesPage(w http.ResponseWriter, r *http.Request, u *user) {
	ctx, cancel := u.ctx(r)
	defer cancel()
	resp, err := c.api.schedules.ListSchedules(ctx, connect.NewRequest(&jqv1.ListSchedulesRequest{}))
	if err != nil {
		c.fail(w, r, u, "Schedules", err)
		return
	}
	d := schedulesData{Schedules: resp.Msg.GetSchedules()}
	c.render(w, r, u, http.StatusOK, "schedules", view{Title: "Schedules", Nav: "schedules", Live: true, Data: &d})
}

// scheduleData is one schedule's page: its settings, its next fire times, the state of its last
// fire's job, and the edit form.
type scheduleData struct {
	Schedule  *jqv1.Schedule
	Next      []*timestamppb.Timestamp
	LastState jqv1.JobState
	Form      scheduleForm
}

func (c *Console) schedulePage(w http.ResponseWriter, r *http.Request, u *user) {
	ctx, cancel := u.ctx(r)
	defer cancel()
	resp, err := c.api.schedules.GetSchedule(ctx, connect.NewRequest(&jqv1.GetScheduleRequest{Name: r.PathValue("name")}))
	if err != nil {
		c.fail(w, r, u, "Schedule", err)
		return
	}
	sc := resp.Msg.GetSchedule()
	d := scheduleData{Schedule: sc, Next: resp.Msg.GetNextFireTimes(), LastState: resp.Msg.GetLastJobState(), Form: scheduleFormOf(sc)}
	c.render(w, r, u, http.StatusOK, "schedule", view{Title: "Schedule " + sc.GetName(), Nav: "schedules", Live: true, Data: &d})
}

// scheduleForm is a schedule's settings as its edit form shows them.
type scheduleForm struct {
	Cron, TimeZone, Missed, CatchUpMax, Overlap, Queue, Type, Payload, Priority, MaxRetries string
	Timeout, TTL, Labels                                                                    string
	KeepResult, Paused                                                                      bool
}

func scheduleFormOf(sc *jqv1.Schedule) scheduleForm {
	t := sc.GetTemplate()
	d := func(v *durationpb.Duration) string {
		if v == nil || v.AsDuration() == 0 {
			return ""
		}
		return v.AsDuration().String()
	}
	f := scheduleForm{Cron: sc.GetCron(), TimeZone: sc.GetTimeZone(), Missed: "skip", Overlap: overlapWord(sc.GetOverlap()),
		Queue: t.GetQueue(), Type: t.GetType(), Payload: string(t.GetPayload()), Priority: strconv.Itoa(int(t.GetPriority())),
		Timeout: d(t.GetTimeout()), TTL: d(t.GetTtl()), KeepResult: t.GetKeepResult(), Paused: sc.GetPaused()}
	if sc.GetMissed() == jqv1.MissedFirePolicy_MISSED_FIRE_POLICY_CATCH_UP {
		f.Missed, f.CatchUpMax = "catch_up", strconv.Itoa(int(sc.GetCatchUpMax()))
	}
	if t.MaxRetries != nil {
		f.MaxRetries = strconv.Itoa(int(t.GetMaxRetries()))
	}
	for _, k := range slices.Sorted(maps.Keys(t.GetLabels())) {
		f.Labels += k + "=" + t.GetLabels()[k] + "\n"
	}
	return f
}

// overlapWord is an overlap policy as the docs and the CLI write it.
func overlapWord(o jqv1.OverlapPolicy) string {
	switch o {
	case jqv1.OverlapPolicy_OVERLAP_POLICY_BUFFER_ONE:
		return "buffer_one"
	case jqv1.OverlapPolicy_OVERLAP_POLICY_ALLOW_ALL:
		return "allow_all"
	}
	return "skip"
}

// scheduleUpdateRequest reads the edit form. Every setting is sent, as UpdateSchedule wants: the
// form shows the current ones. Only what the form must parse is checked here; every rule of a
// schedule is the API's, the same for an update as for a create.
func scheduleUpdateRequest(form url.Values) (*jqv1.UpdateScheduleRequest, error) {
	get := func(k string) string { return strings.TrimSpace(form.Get(k)) }
	req := &jqv1.UpdateScheduleRequest{Name: get("name"), Cron: get("cron"), TimeZone: get("time_zone"),
		Paused: form.Get("paused") == "yes",
		Template: &jqv1.JobTemplate{Queue: get("queue"), Type: get("type"), Payload: []byte(get("payload")),
			KeepResult: form.Get("keep_result") == "yes"}}
	switch get("missed") {
	case "", "skip":
		req.Missed = jqv1.MissedFirePolicy_MISSED_FIRE_POLICY_SKIP
	case "catch_up":
		req.Missed = jqv1.MissedFirePolicy_MISSED_FIRE_POLICY_CATCH_UP
	default:
		return nil, invalid("missed fires %q: want skip or catch_up", oneLine(get("missed"), 20))
	}
	switch get("overlap") {
	case "", "skip":
		req.Overlap = jqv1.OverlapPolicy_OVERLAP_POLICY_SKIP
	case "buffer_one":
		req.Overlap = jqv1.OverlapPolicy_OVERLAP_POLICY_BUFFER_ONE
	case "allow_all":
		req.Overlap = jqv1.OverlapPolicy_OVERLAP_POLICY_ALLOW_ALL
	default:
		return nil, invalid("overlap %q: want skip, buffer_one or allow_all", oneLine(get("overlap"), 20))
	}
	for _, n := range []struct {
		key, label string
		set        func(int32)
	}{
		{"catch_up_max", "catch-up bound", func(v int32) { req.CatchUpMax = v }},
		{"priority", "priority", func(v int32) { req.Template.Priority = v }},
		{"max_retries", "max retries", func(v int32) { req.Template.MaxRetries = &v }},
	} {
		if s := get(n.key); s != "" {
			v, err := strconv.ParseInt(s, 10, 32)
			if err != nil {
				return nil, invalid("%s %q: want a whole number", n.label, oneLine(s, 20))
			}
			n.set(int32(v))
		}
	}
	for _, f := range []struct {
		key, label string
		dst        **durationpb.Duration
	}{{"timeout", "job timeout", &req.Template.Timeout}, {"ttl", "TTL", &req.Template.Ttl}} {
		if s := get(f.key); s != "" {
			v, err := time.ParseDuration(s)
			if err != nil {
				return nil, invalid("%s %q: want a duration such as 90s, 5m or 1h30m", f.label, oneLine(s, 20))
			}
			*f.dst = durationpb.New(v)
		}
	}
	labels, err := labelLines(form.Get("labels"))
	if err != nil {
		return nil, err
	}
	req.Template.Labels = labels
	return req, nil
}

// scheduleUpdate changes a schedule from its page's edit form.
func (c *Console) scheduleUpdate(w http.ResponseWriter, r *http.Request, u *user) {
	name := r.PostFormValue("name")
	to := back(r, "/schedules/"+pathSeg(name))
	if !confirmed(r) {
		c.done(w, r, to, errNotConfirmed, "")
		return
	}
	req, err := scheduleUpdateRequest(r.PostForm)
	if err == nil {
		ctx, cancel := u.ctx(r)
		defer cancel()
		_, err = c.api.schedules.UpdateSchedule(ctx, connect.NewRequest(req))
	}
	c.logAction(u, "schedule_update", name, err)
	c.done(w, r, to, err, "schedule "+name+" updated")
}

// scheduleAction pauses, resumes, triggers or deletes a schedule.
func (c *Console) scheduleAction(op string) actionFunc {
	return func(w http.ResponseWriter, r *http.Request, u *user) {
		name := r.PostFormValue("name")
		to := back(r, "/schedules/"+pathSeg(name))
		if !confirmed(r) {
			c.done(w, r, to, errNotConfirmed, "")
			return
		}
		ctx, cancel := u.ctx(r)
		defer cancel()
		var err error
		msg := ""
		switch op {
		case "pause":
			_, err = c.api.schedules.PauseSchedule(ctx, connect.NewRequest(&jqv1.PauseScheduleRequest{Name: name}))
			msg = "schedule " + name + " paused"
		case "resume":
			_, err = c.api.schedules.ResumeSchedule(ctx, connect.NewRequest(&jqv1.ResumeScheduleRequest{Name: name}))
			msg = "schedule " + name + " resumed"
		case "trigger":
			var resp *connect.Response[jqv1.TriggerScheduleResponse]
			resp, err = c.api.schedules.TriggerSchedule(ctx, connect.NewRequest(&jqv1.TriggerScheduleRequest{Name: name}))
			if err == nil {
				msg = "schedule " + name + " triggered: job " + resp.Msg.GetJob().GetId()
			}
		case "delete":
			_, err = c.api.schedules.DeleteSchedule(ctx, connect.NewRequest(&jqv1.DeleteScheduleRequest{Name: name}))
			msg = "schedule " + name + " deleted"
			if err == nil {
				to = "/schedules"
			}
		}
		c.logAction(u, "schedule_"+op, name, err)
		c.done(w, r, to, err, msg)
	}
}

// scheduleOutcome is the last fire's outcome as the pages show it.
func scheduleOutcome(s string) string {
	switch s {
	case "":
		return "—"
	case queue.FireSkipped:
		return "skipped (overlap)"
	}
	return s
}
