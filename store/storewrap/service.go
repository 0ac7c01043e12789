package storewrap

import (
	"context"
	"time"

	"github.com/jq-dev/jq/queue"
	"github.com/jq-dev/jq/store"
)

// The operators' and the background's side: store.AdminStore, store.OutboxStore,
// store.RetentionStore, store.EventFeed, store.ScheduleStore, store.DepthStore.

// JobPeek implements store.AdminStore. The limit goes down resolved (0: store.DefaultPeekLimit).
func (s *Store) JobPeek(ctx context.Context, p store.JobPeekParams) (store.JobPeekResult, error) {
	check := func() (err error) {
		p.Limit, err = p.Validate()
		return err
	}
	return call(ctx, s, "JobPeek", check, func(ctx context.Context) (store.JobPeekResult, error) { return s.b.JobPeek(ctx, p) })
}

// JobPurgeDeadLetters implements store.AdminStore.
func (s *Store) JobPurgeDeadLetters(ctx context.Context, p store.JobPurgeDeadLettersParams) (int64, error) {
	return call(ctx, s, "JobPurgeDeadLetters", p.Validate, func(ctx context.Context) (int64, error) {
		return s.b.JobPurgeDeadLetters(ctx, p)
	})
}

// JobDelete implements store.AdminStore: the state first (ErrIllegalTransition), then the id.
func (s *Store) JobDelete(ctx context.Context, p store.JobDeleteParams) error {
	check := func() (err error) {
		p.ID, err = p.Validate()
		return err
	}
	return call0(ctx, s, "JobDelete", check, func(ctx context.Context) error { return s.b.JobDelete(ctx, p) })
}

// JobCountDeadLettered implements store.AdminStore.
func (s *Store) JobCountDeadLettered(ctx context.Context) (map[string]int64, error) {
	return call(ctx, s, "JobCountDeadLettered", nil, s.b.JobCountDeadLettered)
}

// JobCountReady implements store.AdminStore.
func (s *Store) JobCountReady(ctx context.Context, queues []string) (map[string]int64, error) {
	return call(ctx, s, "JobCountReady", nil, func(ctx context.Context) (map[string]int64, error) { return s.b.JobCountReady(ctx, queues) })
}

// JobDueTypeList implements store.AdminStore.
func (s *Store) JobDueTypeList(ctx context.Context, queueName string, except []string) ([]string, error) {
	return call(ctx, s, "JobDueTypeList", nil, func(ctx context.Context) ([]string, error) {
		return s.b.JobDueTypeList(ctx, queueName, except)
	})
}

// WorkerCountLive implements store.AdminStore.
func (s *Store) WorkerCountLive(ctx context.Context, heartbeatTimeout time.Duration) (int64, error) {
	return call(ctx, s, "WorkerCountLive", nil, func(ctx context.Context) (int64, error) {
		return s.b.WorkerCountLive(ctx, heartbeatTimeout)
	})
}

// EventsClaim implements store.OutboxStore.
func (s *Store) EventsClaim(ctx context.Context, p store.EventsClaimParams) (store.OutboxClaim, error) {
	return call(ctx, s, "EventsClaim", p.Validate, func(ctx context.Context) (store.OutboxClaim, error) { return s.b.EventsClaim(ctx, p) })
}

// EventsMarkPublished implements store.OutboxStore.
func (s *Store) EventsMarkPublished(ctx context.Context, c store.OutboxClaim) error {
	return call0(ctx, s, "EventsMarkPublished", nil, func(ctx context.Context) error { return s.b.EventsMarkPublished(ctx, c) })
}

// EventsRelease implements store.OutboxStore.
func (s *Store) EventsRelease(ctx context.Context, c store.OutboxClaim) error {
	return call0(ctx, s, "EventsRelease", nil, func(ctx context.Context) error { return s.b.EventsRelease(ctx, c) })
}

// OutboxBacklog implements store.OutboxStore.
func (s *Store) OutboxBacklog(ctx context.Context) (store.OutboxBacklog, error) {
	return call(ctx, s, "OutboxBacklog", nil, s.b.OutboxBacklog)
}

// EventsPrune implements store.RetentionStore.
func (s *Store) EventsPrune(ctx context.Context, p store.EventsPruneParams) (int64, error) {
	return call(ctx, s, "EventsPrune", p.Validate, func(ctx context.Context) (int64, error) { return s.b.EventsPrune(ctx, p) })
}

// JobResultsDrop implements store.RetentionStore.
func (s *Store) JobResultsDrop(ctx context.Context, limit int) (map[string]int, error) {
	return call(ctx, s, "JobResultsDrop", nil, func(ctx context.Context) (map[string]int, error) { return s.b.JobResultsDrop(ctx, limit) })
}

// EventsRead implements store.EventFeed.
func (s *Store) EventsRead(ctx context.Context, p store.EventsReadParams) (store.EventsReadResult, error) {
	return call(ctx, s, "EventsRead", p.Validate, func(ctx context.Context) (store.EventsReadResult, error) { return s.b.EventsRead(ctx, p) })
}

// ScheduleCreate implements store.ScheduleStore.
func (s *Store) ScheduleCreate(ctx context.Context, p store.ScheduleParams) (*queue.Schedule, error) {
	return call(ctx, s, "ScheduleCreate", p.Validate, func(ctx context.Context) (*queue.Schedule, error) { return s.b.ScheduleCreate(ctx, p) })
}

// ScheduleGet implements store.ScheduleStore.
func (s *Store) ScheduleGet(ctx context.Context, name string) (*queue.Schedule, error) {
	return call(ctx, s, "ScheduleGet", nil, func(ctx context.Context) (*queue.Schedule, error) { return s.b.ScheduleGet(ctx, name) })
}

// ScheduleList implements store.ScheduleStore.
func (s *Store) ScheduleList(ctx context.Context) ([]*queue.Schedule, error) {
	return call(ctx, s, "ScheduleList", nil, s.b.ScheduleList)
}

// ScheduleUpdate implements store.ScheduleStore.
func (s *Store) ScheduleUpdate(ctx context.Context, p store.ScheduleParams) (*queue.Schedule, error) {
	return call(ctx, s, "ScheduleUpdate", p.Validate, func(ctx context.Context) (*queue.Schedule, error) { return s.b.ScheduleUpdate(ctx, p) })
}

// ScheduleDelete implements store.ScheduleStore.
func (s *Store) ScheduleDelete(ctx context.Context, p store.ScheduleDeleteParams) error {
	return call0(ctx, s, "ScheduleDelete", nil, func(ctx context.Context) error { return s.b.ScheduleDelete(ctx, p) })
}

// ScheduleSetPaused implements store.ScheduleStore.
func (s *Store) ScheduleSetPaused(ctx context.Context, p store.ScheduleSetPausedParams) (*queue.Schedule, error) {
	return call(ctx, s, "ScheduleSetPaused", nil, func(ctx context.Context) (*queue.Schedule, error) {
		return s.b.ScheduleSetPaused(ctx, p)
	})
}

// ScheduleReconcile implements store.ScheduleStore.
func (s *Store) ScheduleReconcile(ctx context.Context, p store.ScheduleReconcileParams) (store.ScheduleReconcileResult, error) {
	check := func() error {
		_, err := p.Names()
		return err
	}
	return call(ctx, s, "ScheduleReconcile", check, func(ctx context.Context) (store.ScheduleReconcileResult, error) {
		return s.b.ScheduleReconcile(ctx, p)
	})
}

// ScheduleDue implements store.ScheduleStore.
func (s *Store) ScheduleDue(ctx context.Context, limit int) (store.ScheduleDueResult, error) {
	return call(ctx, s, "ScheduleDue", nil, func(ctx context.Context) (store.ScheduleDueResult, error) { return s.b.ScheduleDue(ctx, limit) })
}

// ScheduleAdvance implements store.ScheduleStore. The last job's id goes down in canonical form.
func (s *Store) ScheduleAdvance(ctx context.Context, p store.ScheduleAdvanceParams) (bool, error) {
	var check func() error
	if p.LastJobID != "" {
		check = jobID(&p.LastJobID)
	}
	return call(ctx, s, "ScheduleAdvance", check, func(ctx context.Context) (bool, error) { return s.b.ScheduleAdvance(ctx, p) })
}

// ScheduleFire implements store.ScheduleStore.
func (s *Store) ScheduleFire(ctx context.Context, ps []store.ScheduleFireParams) ([]store.ScheduleFireResult, error) {
	check := func() error {
		_, err := store.ValidateScheduleFire(ps)
		return err
	}
	return call(ctx, s, "ScheduleFire", check, func(ctx context.Context) ([]store.ScheduleFireResult, error) {
		return s.b.ScheduleFire(ctx, ps)
	})
}

// DepthSnapshot implements store.DepthStore.
func (s *Store) DepthSnapshot(ctx context.Context) (store.DepthSnapshot, error) {
	return call(ctx, s, "DepthSnapshot", nil, s.b.DepthSnapshot)
}
