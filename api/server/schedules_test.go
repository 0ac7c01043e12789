package apiserver_test

import (
	"context"
	"testing"
	"time"

	"connectrpc.com/connect"
	"github.com/stretchr/testify/require"
	"go.uber.org/zap/zaptest"
	"google.golang.org/protobuf/types/known/durationpb"

	jqv1 "github.com/jq-dev/jq/api/gen/jq/v1"
	"github.com/jq-dev/jq/api/rpcclient"
	"github.com/jq-dev/jq/api/server"
	"github.com/jq-dev/jq/queue"
	"github.com/jq-dev/jq/queue/engine"
	"github.com/jq-dev/jq/store"
)

func TestScheduleService(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	st, eng := runEngine(ctx, t, engine.Options{})
	sch, err := engine.NewSchedules(eng, engine.ScheduleOptions{Store: st})
	require.NoError(t, err)
	addr := serveAddr(t, apiserver.Options{Store: st, Engine: eng, Schedules: sch, Log: zaptest.NewLogger(t),
		Limits: apiserver.Limits{MaxPayloadBytes: 1 << 10}})
	cl, err := rpcclient.New(rpcclient.Options{Addr: addr})
	require.NoError(t, err)
	defer cl.Close()
	s := cl.Schedules
	_, err = st.QueueCreate(ctx, store.QueueCreateParams{Name: "default"})
	require.NoError(t, err)

	tmpl := &jqv1.JobTemplate{Queue: "default", Type: "noop", Payload: []byte(`{"a":1}`), Priority: 5, Labels: map[string]string{"team": "ops"}}
	created, err := s.CreateSchedule(ctx, connect.NewRequest(&jqv1.CreateScheduleRequest{
		Name: "nightly", Cron: "0 3 * * *", TimeZone: "Europe/Berlin", Template: tmpl,
		Missed: jqv1.MissedFirePolicy_MISSED_FIRE_POLICY_CATCH_UP, CatchUpMax: 3}))
	require.NoError(t, err)
	sc := created.Msg.GetSchedule()
	require.Equal(t, jqv1.ScheduleOwner_SCHEDULE_OWNER_API, sc.GetOwner())
	require.Equal(t, jqv1.MissedFirePolicy_MISSED_FIRE_POLICY_CATCH_UP, sc.GetMissed())
	require.EqualValues(t, 3, sc.GetCatchUpMax())
	require.EqualValues(t, 5, sc.GetTemplate().GetPriority())

	for name, req := range map[string]*jqv1.CreateScheduleRequest{
		"cron":     {Name: "a", Cron: "every day", Template: tmpl},
		"zone":     {Name: "a", Cron: "@daily", TimeZone: "Berlin", Template: tmpl},
		"template": {Name: "a", Cron: "@daily"},
		"payload":  {Name: "a", Cron: "@daily", Template: &jqv1.JobTemplate{Queue: "default", Type: "noop", Payload: make([]byte, 2<<10)}},
		"name":     {Name: "A b", Cron: "@daily", Template: tmpl},
		"policy":   {Name: "a", Cron: "@daily", Template: tmpl, Missed: 7},
		"overlap":  {Name: "a", Cron: "@daily", Template: tmpl, Overlap: 9},
		"ttl":      {Name: "a", Cron: "@daily", Template: &jqv1.JobTemplate{Queue: "default", Type: "noop", Ttl: durationpb.New(-time.Second)}},
	} {
		_, err := s.CreateSchedule(ctx, connect.NewRequest(req))
		requireCode(t, connect.CodeInvalidArgument, err, name)
		// An update is checked as a create is.
		upd := &jqv1.UpdateScheduleRequest{Name: req.GetName(), Cron: req.GetCron(), TimeZone: req.GetTimeZone(),
			Template: req.GetTemplate(), Missed: req.GetMissed(), Overlap: req.GetOverlap()}
		if upd.Name == "a" {
			upd.Name = "nightly"
		}
		_, err = s.UpdateSchedule(ctx, connect.NewRequest(upd))
		requireCode(t, connect.CodeInvalidArgument, err, "update: "+name)
	}
	require.Equal(t, jqv1.OverlapPolicy_OVERLAP_POLICY_SKIP, sc.GetOverlap(), "the default")

	// Update: every setting; the same spec keeps the next fire time.
	upd, err := s.UpdateSchedule(ctx, connect.NewRequest(&jqv1.UpdateScheduleRequest{
		Name: "nightly", Cron: "0 3 * * *", TimeZone: "Europe/Berlin", Overlap: jqv1.OverlapPolicy_OVERLAP_POLICY_BUFFER_ONE,
		Template: &jqv1.JobTemplate{Queue: "default", Type: "digest", Payload: []byte(`{"a":1}`), Ttl: durationpb.New(time.Hour),
			KeepResult: true}}))
	require.NoError(t, err)
	u := upd.Msg.GetSchedule()
	require.Equal(t, jqv1.OverlapPolicy_OVERLAP_POLICY_BUFFER_ONE, u.GetOverlap())
	require.Equal(t, "digest", u.GetTemplate().GetType())
	require.Equal(t, time.Hour, u.GetTemplate().GetTtl().AsDuration())
	require.True(t, u.GetTemplate().GetKeepResult())
	require.Equal(t, jqv1.MissedFirePolicy_MISSED_FIRE_POLICY_SKIP, u.GetMissed(), "unset: the default, as on create")
	require.True(t, sc.GetNextFireAt().AsTime().Equal(u.GetNextFireAt().AsTime()))
	_, err = s.UpdateSchedule(ctx, connect.NewRequest(&jqv1.UpdateScheduleRequest{Name: "none", Cron: "@daily", Template: tmpl}))
	requireCode(t, connect.CodeNotFound, err)
	_, err = s.UpdateSchedule(ctx, connect.NewRequest(&jqv1.UpdateScheduleRequest{Name: "nightly", Cron: "0 3 * * *",
		TimeZone: "Europe/Berlin", Template: tmpl}))
	require.NoError(t, err)
	_, err = s.CreateSchedule(ctx, connect.NewRequest(&jqv1.CreateScheduleRequest{Name: "nightly", Cron: "@daily", Template: tmpl}))
	requireCode(t, connect.CodeAlreadyExists, err)

	// Show: the next 5 fire times, each 03:00 in Berlin.
	got, err := s.GetSchedule(ctx, connect.NewRequest(&jqv1.GetScheduleRequest{Name: "nightly"}))
	require.NoError(t, err)
	berlin, err := time.LoadLocation("Europe/Berlin")
	require.NoError(t, err)
	require.Len(t, got.Msg.GetNextFireTimes(), 5)
	for i, ts := range got.Msg.GetNextFireTimes() {
		at := ts.AsTime().In(berlin)
		require.Equal(t, 3, at.Hour())
		if i == 0 {
			require.True(t, at.Equal(sc.GetNextFireAt().AsTime()))
		}
	}
	require.Equal(t, jqv1.JobState_JOB_STATE_UNSPECIFIED, got.Msg.GetLastJobState())

	// Trigger: a job now, labelled with the schedule.
	trig, err := s.TriggerSchedule(ctx, connect.NewRequest(&jqv1.TriggerScheduleRequest{Name: "nightly"}))
	require.NoError(t, err)
	require.Equal(t, "nightly", trig.Msg.GetJob().GetLabels()[engine.ScheduleLabel])
	require.Equal(t, []byte(`{"a":1}`), trig.Msg.GetJob().GetPayload())

	paused, err := s.PauseSchedule(ctx, connect.NewRequest(&jqv1.PauseScheduleRequest{Name: "nightly"}))
	require.NoError(t, err)
	require.True(t, paused.Msg.GetSchedule().GetPaused())
	list, err := s.ListSchedules(ctx, connect.NewRequest(&jqv1.ListSchedulesRequest{}))
	require.NoError(t, err)
	require.Len(t, list.Msg.GetSchedules(), 1)
	resumed, err := s.ResumeSchedule(ctx, connect.NewRequest(&jqv1.ResumeScheduleRequest{Name: "nightly"}))
	require.NoError(t, err)
	require.False(t, resumed.Msg.GetSchedule().GetPaused())

	// A config-owned schedule is not deleted over the API.
	_, err = sch.ScheduleReconcile(ctx, []store.ScheduleParams{{Name: "from-file", Cron: "@hourly",
		Template: queue.JobTemplate{Queue: "default", Type: "noop"}}})
	require.NoError(t, err)
	_, err = s.DeleteSchedule(ctx, connect.NewRequest(&jqv1.DeleteScheduleRequest{Name: "from-file"}))
	requireCode(t, connect.CodeFailedPrecondition, err)
	_, err = s.UpdateSchedule(ctx, connect.NewRequest(&jqv1.UpdateScheduleRequest{Name: "from-file", Cron: "@daily", Template: tmpl}))
	requireCode(t, connect.CodeFailedPrecondition, err)

	_, err = s.DeleteSchedule(ctx, connect.NewRequest(&jqv1.DeleteScheduleRequest{Name: "nightly"}))
	require.NoError(t, err)
	for _, err := range []error{
		func() error {
			_, err := s.GetSchedule(ctx, connect.NewRequest(&jqv1.GetScheduleRequest{Name: "nightly"}))
			return err
		}(),
		func() error {
			_, err := s.TriggerSchedule(ctx, connect.NewRequest(&jqv1.TriggerScheduleRequest{Name: "nightly"}))
			return err
		}(),
		func() error {
			_, err := s.DeleteSchedule(ctx, connect.NewRequest(&jqv1.DeleteScheduleRequest{Name: "nightly"}))
			return err
		}(),
	} {
		requireCode(t, connect.CodeNotFound, err)
	}
}
