package server

import (
	"context"
	"errors"
	"fmt"
	"time"

	"connectrpc.com/connect"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/jq-dev/jq/api"
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

var errNoSchedules = connect.NewError(connect.CodeUnavailable, errors.New("this server runs no schedules"))

func (s *scheduleService) CreateSchedule(ctx context.Context, req *connect.Request[jqv1.CreateScheduleRequest]) (*connect.Response[jqv1.CreateScheduleResponse], error) {
	if s.schedules == nil {
		return nil, errNoSchedules
	}
	m := req.Msg
	if err := queue.ValidateScheduleName(m.GetName()); err != nil {
		return nil, err
	}
	tmpl, err := templateFromProto(m.GetTemplate(), s.limits.MaxPayloadBytes)
	if err != nil {
		return nil, err
	}
	missed, err := missedFromProto(m.GetMissed())
	if err != nil {
		return nil, err
	}
	sc, err := s.schedules.ScheduleCreate(ctx, store.ScheduleParams{
		Name: m.GetName(), Template: tmpl, Cron: m.GetCron(), TimeZone: m.GetTimeZone(),
		Missed: missed, CatchUpMax: int(m.GetCatchUpMax()), Paused: m.GetPaused(),
	})
	if err != nil {
		return nil, err
	}
	return connect.NewResponse(&jqv1.CreateScheduleResponse{Schedule: scheduleToProto(sc)}), nil
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
		Priority: t.GetPriority(), MaxRetries: t.MaxRetries, Timeout: t.GetTimeout(), Labels: t.GetLabels()}, maxPayload, time.Now())
	if err != nil {
		return queue.JobTemplate{}, fmt.Errorf("template: %w", err)
	}
	return queue.JobTemplate{Queue: p.Queue, Type: p.Type, Payload: p.Payload, Priority: p.Priority,
		MaxRetries: p.MaxRetries, Timeout: p.Timeout, Labels: p.Labels}, nil
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
			Priority: int32(t.Priority), MaxRetries: maxRetries, Timeout: dur(t.Timeout), Labels: t.Labels}, //nolint:gosec // 0..9
		Cron: sc.Cron, TimeZone: sc.TimeZone, Missed: missed, CatchUpMax: int32(sc.CatchUpMax), //nolint:gosec // ≤ 1000
		Paused: sc.Paused, Owner: owner, NextFireAt: ts(sc.NextFireAt), LastFireAt: ts(sc.LastFireAt),
		LastJobId: sc.LastJobID, LastOutcome: sc.LastOutcome, LastError: sc.LastError,
		CreatedAt: ts(sc.CreatedAt), UpdatedAt: ts(sc.UpdatedAt),
	}
}
