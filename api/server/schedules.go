package apiserver

import (
	"context"
	"errors"
	"fmt"
	"time"

	"connectrpc.com/connect"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/jq-dev/jq/api"
	"github.com/jq-dev/jq/api/apierr"
	jqv1 "github.com/jq-dev/jq/api/gen/jq/v1"
	"github.com/jq-dev/jq/queue"
	"github.com/jq-dev/jq/queue/engine"
	"github.com/jq-dev/jq/queue/schedule"
	"github.com/jq-dev/jq/store"
)

// upcomingFires is how many next fire times GetSchedule shows.
const upcomingFires = 5

// scheduleService serves jq.v1.ScheduleService: reads from the store, changes through the engine's
// schedule commands. Without schedules (Options.Schedules nil) every RPC is UNAVAILABLE.
type scheduleService struct {
	store     Reader
	schedules *engine.Schedules
	limits    Limits
	now       func() time.Time
}

var errNoSchedules = apierr.New(apierr.ErrNotConfigured, "this server runs no schedules")

func (s *scheduleService) CreateSchedule(ctx context.Context, req *connect.Request[jqv1.CreateScheduleRequest]) (*connect.Response[jqv1.CreateScheduleResponse], error) {
	if s.schedules == nil {
		return nil, errNoSchedules
	}
	m := req.Msg
	p, err := s.scheduleParams(scheduleSettings{name: m.GetName(), template: m.GetTemplate(), cron: m.GetCron(),
		timeZone: m.GetTimeZone(), missed: m.GetMissed(), catchUpMax: m.GetCatchUpMax(), paused: m.GetPaused(), overlap: m.GetOverlap()})
	if err != nil {
		return nil, err
	}
	sc, err := s.schedules.ScheduleCreate(ctx, p)
	if err != nil {
		return nil, err
	}
	return connect.NewResponse(&jqv1.CreateScheduleResponse{Schedule: scheduleToProto(sc)}), nil
}

func (s *scheduleService) UpdateSchedule(ctx context.Context, req *connect.Request[jqv1.UpdateScheduleRequest]) (*connect.Response[jqv1.UpdateScheduleResponse], error) {
	if s.schedules == nil {
		return nil, errNoSchedules
	}
	m := req.Msg
	p, err := s.scheduleParams(scheduleSettings{name: m.GetName(), template: m.GetTemplate(), cron: m.GetCron(),
		timeZone: m.GetTimeZone(), missed: m.GetMissed(), catchUpMax: m.GetCatchUpMax(), paused: m.GetPaused(), overlap: m.GetOverlap()})
	if err != nil {
		return nil, err
	}
	sc, err := s.schedules.ScheduleUpdate(ctx, p)
	if err != nil {
		return nil, err
	}
	return connect.NewResponse(&jqv1.UpdateScheduleResponse{Schedule: scheduleToProto(sc)}), nil
}

// scheduleSettings are what CreateScheduleRequest and UpdateScheduleRequest both carry.
type scheduleSettings struct {
	name       string
	template   *jqv1.JobTemplate
	cron       string
	timeZone   string
	missed     jqv1.MissedFirePolicy
	catchUpMax int32
	paused     bool
	overlap    jqv1.OverlapPolicy
}

// scheduleParams converts the settings of a create or an update, checked the same way; the
// engine's checks (spec, policies, labels) follow.
func (s *scheduleService) scheduleParams(m scheduleSettings) (store.ScheduleParams, error) {
	if err := queue.ValidateScheduleName(m.name); err != nil {
		return store.ScheduleParams{}, err
	}
	tmpl, err := templateFromProto(m.template, s.limits.MaxPayloadBytes)
	if err != nil {
		return store.ScheduleParams{}, err
	}
	missed, err := missedFromProto(m.missed)
	if err != nil {
		return store.ScheduleParams{}, err
	}
	overlap, err := overlapFromProto(m.overlap)
	if err != nil {
		return store.ScheduleParams{}, err
	}
	return store.ScheduleParams{
		Name: m.name, Template: tmpl, Cron: m.cron, TimeZone: m.timeZone,
		Missed: missed, CatchUpMax: int(m.catchUpMax), Paused: m.paused, Overlap: overlap,
	}, nil
}

func (s *scheduleService) ListSchedules(ctx context.Context, _ *connect.Request[jqv1.ListSchedulesRequest]) (*connect.Response[jqv1.ListSchedulesResponse], error) {
	list, err := s.store.ScheduleList(ctx)
	if err != nil {
		return nil, err
	}
	out := make([]*jqv1.Schedule, len(list))
	for i, sc := range list {
		out[i] = scheduleToProto(sc)
	}
	return connect.NewResponse(&jqv1.ListSchedulesResponse{Schedules: out}), nil
}

func (s *scheduleService) GetSchedule(ctx context.Context, req *connect.Request[jqv1.GetScheduleRequest]) (*connect.Response[jqv1.GetScheduleResponse], error) {
	if err := queue.ValidateScheduleName(req.Msg.GetName()); err != nil {
		return nil, err
	}
	sc, err := s.store.ScheduleGet(ctx, req.Msg.GetName())
	if err != nil {
		return nil, err
	}
	out := &jqv1.GetScheduleResponse{Schedule: scheduleToProto(sc)}
	if spec, err := schedule.Parse(sc.Cron, sc.TimeZone); err == nil {
		from := sc.NextFireAt
		if sc.Paused || from.IsZero() {
			from = spec.Next(s.now())
		}
		for _, t := range spec.Upcoming(from, upcomingFires) {
			out.NextFireTimes = append(out.NextFireTimes, timestamppb.New(t))
		}
	}
	if sc.LastJobID != "" {
		j, err := s.store.JobGet(ctx, sc.LastJobID)
		switch {
		case err == nil:
			out.LastJobState = api.StateProto(j.State)
		case !errors.Is(err, queue.ErrJobNotFound):
			return nil, err
		}
	}
	return connect.NewResponse(out), nil
}

func (s *scheduleService) PauseSchedule(ctx context.Context, req *connect.Request[jqv1.PauseScheduleRequest]) (*connect.Response[jqv1.PauseScheduleResponse], error) {
	if s.schedules == nil {
		return nil, errNoSchedules
	}
	sc, err := s.schedules.ScheduleSetPaused(ctx, req.Msg.GetName(), true)
	if err != nil {
		return nil, err
	}
	return connect.NewResponse(&jqv1.PauseScheduleResponse{Schedule: scheduleToProto(sc)}), nil
}

func (s *scheduleService) ResumeSchedule(ctx context.Context, req *connect.Request[jqv1.ResumeScheduleRequest]) (*connect.Response[jqv1.ResumeScheduleResponse], error) {
	if s.schedules == nil {
		return nil, errNoSchedules
	}
	sc, err := s.schedules.ScheduleSetPaused(ctx, req.Msg.GetName(), false)
	if err != nil {
		return nil, err
	}
	return connect.NewResponse(&jqv1.ResumeScheduleResponse{Schedule: scheduleToProto(sc)}), nil
}

func (s *scheduleService) TriggerSchedule(ctx context.Context, req *connect.Request[jqv1.TriggerScheduleRequest]) (*connect.Response[jqv1.TriggerScheduleResponse], error) {
	if s.schedules == nil {
		return nil, errNoSchedules
	}
	res, err := s.schedules.ScheduleTrigger(ctx, req.Msg.GetName())
	if err != nil {
		return nil, err
	}
	return connect.NewResponse(&jqv1.TriggerScheduleResponse{Job: api.JobProto(res.Job)}), nil
}

func (s *scheduleService) DeleteSchedule(ctx context.Context, req *connect.Request[jqv1.DeleteScheduleRequest]) (*connect.Response[jqv1.DeleteScheduleResponse], error) {
	if s.schedules == nil {
		return nil, errNoSchedules
	}
	if err := s.schedules.ScheduleDelete(ctx, req.Msg.GetName()); err != nil {
		return nil, err
	}
	return connect.NewResponse(&jqv1.DeleteScheduleResponse{}), nil
}

// templateFromProto checks a template as a job spec is checked (payload limit, durations).
func templateFromProto(t *jqv1.JobTemplate, maxPayload int) (queue.JobTemplate, error) {
	if t == nil {
		return queue.JobTemplate{}, invalid("template: required")
	}
	p, err := specToParams(&jqv1.JobSpec{Queue: t.GetQueue(), Type: t.GetType(), Payload: t.GetPayload(),
		Priority: t.GetPriority(), MaxRetries: t.MaxRetries, Timeout: t.GetTimeout(), Ttl: t.GetTtl(), KeepResult: t.GetKeepResult(),
		Labels: t.GetLabels()}, maxPayload, time.Now())
	if err != nil {
		return queue.JobTemplate{}, fmt.Errorf("template: %w", err)
	}
	return queue.JobTemplate{Queue: p.Queue, Type: p.Type, Payload: p.Payload, Priority: p.Priority,
		MaxRetries: p.MaxRetries, Timeout: p.Timeout, TTL: p.TTL, KeepResult: p.KeepResult, Labels: p.Labels}, nil
}

// overlapFromProto maps the API's overlap policy; unset is the default.
func overlapFromProto(o jqv1.OverlapPolicy) (queue.OverlapPolicy, error) {
	switch o {
	case jqv1.OverlapPolicy_OVERLAP_POLICY_UNSPECIFIED:
		return queue.DefaultOverlap, nil
	case jqv1.OverlapPolicy_OVERLAP_POLICY_SKIP:
		return queue.OverlapSkip, nil
	case jqv1.OverlapPolicy_OVERLAP_POLICY_BUFFER_ONE:
		return queue.OverlapBufferOne, nil
	case jqv1.OverlapPolicy_OVERLAP_POLICY_ALLOW_ALL:
		return queue.OverlapAllowAll, nil
	}
	return "", invalid(fmt.Sprintf("overlap: unknown policy %d", o))
}

// overlapToProto is overlapFromProto's inverse.
func overlapToProto(o queue.OverlapPolicy) jqv1.OverlapPolicy {
	switch o {
	case queue.OverlapBufferOne:
		return jqv1.OverlapPolicy_OVERLAP_POLICY_BUFFER_ONE
	case queue.OverlapAllowAll:
		return jqv1.OverlapPolicy_OVERLAP_POLICY_ALLOW_ALL
	}
	return jqv1.OverlapPolicy_OVERLAP_POLICY_SKIP
}

func missedFromProto(m jqv1.MissedFirePolicy) (queue.MissedPolicy, error) {
	switch m {
	case jqv1.MissedFirePolicy_MISSED_FIRE_POLICY_UNSPECIFIED, jqv1.MissedFirePolicy_MISSED_FIRE_POLICY_SKIP:
		return queue.MissedSkip, nil
	case jqv1.MissedFirePolicy_MISSED_FIRE_POLICY_CATCH_UP:
		return queue.MissedCatchUp, nil
	}
	return "", invalid(fmt.Sprintf("missed: unknown policy %d", m))
}

func scheduleToProto(sc *queue.Schedule) *jqv1.Schedule {
	t := sc.Template
	var maxRetries *int32
	if t.MaxRetries != nil {
		n := int32(*t.MaxRetries) //nolint:gosec // 0..100, validated on create
		maxRetries = &n
	}
	missed := jqv1.MissedFirePolicy_MISSED_FIRE_POLICY_SKIP
	if sc.Missed == queue.MissedCatchUp {
		missed = jqv1.MissedFirePolicy_MISSED_FIRE_POLICY_CATCH_UP
	}
	owner := jqv1.ScheduleOwner_SCHEDULE_OWNER_API
	if sc.Owner == queue.OwnerConfig {
		owner = jqv1.ScheduleOwner_SCHEDULE_OWNER_CONFIG
	}
	return &jqv1.Schedule{
		Name: sc.Name,
		Template: &jqv1.JobTemplate{Queue: t.Queue, Type: t.Type, Payload: t.Payload,
			Priority: int32(t.Priority), MaxRetries: maxRetries, Timeout: dur(t.Timeout), Labels: t.Labels, //nolint:gosec // 0..9
			Ttl: dur(t.TTL), KeepResult: t.KeepResult},
		Cron: sc.Cron, TimeZone: sc.TimeZone, Missed: missed, CatchUpMax: int32(sc.CatchUpMax), //nolint:gosec // ≤ 1000
		Paused: sc.Paused, Owner: owner, NextFireAt: ts(sc.NextFireAt), LastFireAt: ts(sc.LastFireAt),
		LastJobId: sc.LastJobID, LastOutcome: sc.LastOutcome, LastError: sc.LastError,
		CreatedAt: ts(sc.CreatedAt), UpdatedAt: ts(sc.UpdatedAt), Overlap: overlapToProto(sc.Overlap),
	}
}
