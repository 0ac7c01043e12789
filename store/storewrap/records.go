package storewrap

import (
	"context"

	"github.com/jq-dev/jq/queue"
	"github.com/jq-dev/jq/store"
)

// The system of record: store.QueueStore, store.JobStore, store.WorkerStore.

// QueueCreate implements store.QueueStore.
func (s *Store) QueueCreate(ctx context.Context, p store.QueueCreateParams) (*queue.Queue, error) {
	return call(ctx, s, "QueueCreate", func() error { _, err := p.Queue(); return err },
		func(ctx context.Context) (*queue.Queue, error) { return s.b.QueueCreate(ctx, p) })
}

// QueueEnsure implements store.QueueStore.
func (s *Store) QueueEnsure(ctx context.Context, p store.QueueCreateParams) (*queue.Queue, bool, error) {
	return call2(ctx, s, "QueueEnsure", func() error { _, err := p.Queue(); return err },
		func(ctx context.Context) (*queue.Queue, bool, error) { return s.b.QueueEnsure(ctx, p) })
}

// QueueGet implements store.QueueStore.
func (s *Store) QueueGet(ctx context.Context, name string) (*queue.Queue, error) {
	return call(ctx, s, "QueueGet", nil, func(ctx context.Context) (*queue.Queue, error) { return s.b.QueueGet(ctx, name) })
}

// QueueList implements store.QueueStore.
func (s *Store) QueueList(ctx context.Context) ([]*queue.Queue, error) {
	return call(ctx, s, "QueueList", nil, s.b.QueueList)
}

// QueueDelete implements store.QueueStore.
func (s *Store) QueueDelete(ctx context.Context, p store.QueueDeleteParams) (int64, error) {
	return call(ctx, s, "QueueDelete", nil, func(ctx context.Context) (int64, error) { return s.b.QueueDelete(ctx, p) })
}

// QueueSetPaused implements store.QueueStore.
func (s *Store) QueueSetPaused(ctx context.Context, p store.QueueSetPausedParams) (*queue.Queue, error) {
	return call(ctx, s, "QueueSetPaused", nil, func(ctx context.Context) (*queue.Queue, error) { return s.b.QueueSetPaused(ctx, p) })
}

// QueueUpdate implements store.QueueStore. The settings are checked against the stored queue, inside
// the backend's transaction (QueueUpdateParams.Apply).
func (s *Store) QueueUpdate(ctx context.Context, p store.QueueUpdateParams) (*queue.Queue, error) {
	return call(ctx, s, "QueueUpdate", nil, func(ctx context.Context) (*queue.Queue, error) { return s.b.QueueUpdate(ctx, p) })
}

// QueueStats implements store.QueueStore.
func (s *Store) QueueStats(ctx context.Context, name string) (*queue.QueueStats, error) {
	return call(ctx, s, "QueueStats", nil, func(ctx context.Context) (*queue.QueueStats, error) { return s.b.QueueStats(ctx, name) })
}

// JobInsertMany implements store.JobStore. Every job of the batch is checked, and all the bad ones
// reported together.
func (s *Store) JobInsertMany(ctx context.Context, ps []store.JobInsertParams) ([]store.JobInsertResult, error) {
	return call(ctx, s, "JobInsertMany", func() error { return store.ValidateInserts(ps) },
		func(ctx context.Context) ([]store.JobInsertResult, error) { return s.b.JobInsertMany(ctx, ps) })
}

// JobGet implements store.JobStore.
func (s *Store) JobGet(ctx context.Context, id string) (*queue.Job, error) {
	return call(ctx, s, "JobGet", jobID(&id), func(ctx context.Context) (*queue.Job, error) { return s.b.JobGet(ctx, id) })
}

// JobPrefixList implements store.JobStore.
func (s *Store) JobPrefixList(ctx context.Context, prefix string, limit int) ([]string, error) {
	check := func() error { return store.ValidateJobPrefixList(prefix, limit) }
	return call(ctx, s, "JobPrefixList", check, func(ctx context.Context) ([]string, error) { return s.b.JobPrefixList(ctx, prefix, limit) })
}

// JobList implements store.JobStore.
func (s *Store) JobList(ctx context.Context, p store.JobListParams) (store.JobListResult, error) {
	check := func() error {
		_, _, err := p.Validate()
		return err
	}
	return call(ctx, s, "JobList", check, func(ctx context.Context) (store.JobListResult, error) { return s.b.JobList(ctx, p) })
}

// JobTransition implements store.JobStore: the transition table first (ErrIllegalTransition), then
// the arguments.
func (s *Store) JobTransition(ctx context.Context, p store.JobTransitionParams) (*queue.Job, error) {
	check := func() (err error) {
		p.ID, err = p.Validate()
		return err
	}
	return call(ctx, s, "JobTransition", check, func(ctx context.Context) (*queue.Job, error) { return s.b.JobTransition(ctx, p) })
}

// JobEvents implements store.JobStore.
func (s *Store) JobEvents(ctx context.Context, id string) ([]queue.Event, error) {
	return call(ctx, s, "JobEvents", jobID(&id), func(ctx context.Context) ([]queue.Event, error) { return s.b.JobEvents(ctx, id) })
}

// WorkerRegister implements store.WorkerStore.
func (s *Store) WorkerRegister(ctx context.Context, p store.WorkerRegisterParams) (*queue.Worker, error) {
	return call(ctx, s, "WorkerRegister", p.Validate, func(ctx context.Context) (*queue.Worker, error) { return s.b.WorkerRegister(ctx, p) })
}

// WorkerHeartbeat implements store.WorkerStore.
func (s *Store) WorkerHeartbeat(ctx context.Context, p store.WorkerHeartbeatParams) (*queue.Worker, error) {
	return call(ctx, s, "WorkerHeartbeat", p.Validate, func(ctx context.Context) (*queue.Worker, error) { return s.b.WorkerHeartbeat(ctx, p) })
}

// WorkerGet implements store.WorkerStore.
func (s *Store) WorkerGet(ctx context.Context, id string) (*queue.Worker, error) {
	return call(ctx, s, "WorkerGet", nil, func(ctx context.Context) (*queue.Worker, error) { return s.b.WorkerGet(ctx, id) })
}

// WorkerList implements store.WorkerStore.
func (s *Store) WorkerList(ctx context.Context) ([]*queue.Worker, error) {
	return call(ctx, s, "WorkerList", nil, s.b.WorkerList)
}

// WorkerListPage implements store.WorkerStore.
func (s *Store) WorkerListPage(ctx context.Context, after string, limit int) ([]*queue.Worker, error) {
	return call(ctx, s, "WorkerListPage", nil, func(ctx context.Context) ([]*queue.Worker, error) {
		return s.b.WorkerListPage(ctx, after, limit)
	})
}

// WorkerSetStatus implements store.WorkerStore.
func (s *Store) WorkerSetStatus(ctx context.Context, p store.WorkerSetStatusParams) (*queue.Worker, error) {
	return call(ctx, s, "WorkerSetStatus", p.Validate, func(ctx context.Context) (*queue.Worker, error) { return s.b.WorkerSetStatus(ctx, p) })
}

// WorkerDeregister implements store.WorkerStore.
func (s *Store) WorkerDeregister(ctx context.Context, id string) error {
	return call0(ctx, s, "WorkerDeregister", nil, func(ctx context.Context) error { return s.b.WorkerDeregister(ctx, id) })
}

// WorkerCounts implements store.WorkerStore.
func (s *Store) WorkerCounts(ctx context.Context, principal, except string) (store.WorkerCounts, error) {
	return call(ctx, s, "WorkerCounts", nil, func(ctx context.Context) (store.WorkerCounts, error) {
		return s.b.WorkerCounts(ctx, principal, except)
	})
}
