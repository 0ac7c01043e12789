package roles

import (
	"context"
	"fmt"

	"github.com/jq-dev/jq/config"
	"github.com/jq-dev/jq/queue"
	"github.com/jq-dev/jq/queue/engine"
	"github.com/jq-dev/jq/roles/telemetry"
	"github.com/jq-dev/jq/store"
)

// serverSchedules builds the periodic jobs of the server (docs/schedules.md): the schedules the
// configuration declares are reconciled before the API serves, then the fire loop runs beside the
// engine on every replica.
func serverSchedules(ctx context.Context, p *process) (part, error) {
	sch, err := engine.NewSchedules(p.eng, engine.ScheduleOptions{
		Store:    p.st,
		Grace:    p.cfg.Server.ScheduleMisfireGrace(),
		Observer: telemetry.NewScheduleMetrics(p.reg),
	})
	if err != nil {
		return part{}, err
	}
	if _, err := sch.ScheduleReconcile(ctx, scheduleParams(p.cfg.Schedules)); err != nil {
		return part{}, fmt.Errorf("schedules: %w", err)
	}
	p.sched = sch
	return part{run: sch.Run}, nil
}

// scheduleParams turns the declared schedules into the store's params (owner config).
func scheduleParams(cs []config.Schedule) []store.ScheduleParams {
	out := make([]store.ScheduleParams, len(cs))
	for i, c := range cs {
		out[i] = store.ScheduleParams{
			Name: c.Name, Cron: c.Cron, TimeZone: c.TimeZone, Missed: queue.MissedPolicy(c.Missed), CatchUpMax: c.CatchUpMax,
			Owner: queue.OwnerConfig, Overlap: queue.OverlapPolicy(c.Overlap),
			Template: queue.JobTemplate{Queue: c.Queue, Type: c.Type, Payload: []byte(c.Payload), Priority: c.Priority,
				MaxRetries: c.MaxRetries, Timeout: c.Timeout(), TTL: c.TTL(), KeepResult: c.KeepResult, Labels: c.Labels},
		}
	}
	return out
}
