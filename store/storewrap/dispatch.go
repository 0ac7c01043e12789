package storewrap

import (
	"context"
	"time"

	"github.com/jq-dev/jq/queue"
	"github.com/jq-dev/jq/store"
)

// Dispatch and its recovery: store.DispatchStore, store.RecoveryStore, store.OperatorStore,
// store.ProgressStore, store.ConstraintStore. The batches of leases (acks, reports, fails, progress)
// are checked item by item by the backend (store.LeaseBatch): a bad lease gets its own outcome.

// JobDue implements store.DispatchStore.
func (s *Store) JobDue(ctx context.Context, p store.JobDueParams) ([]store.DueJob, error) {
	return call(ctx, s, "JobDue", p.Validate, func(ctx context.Context) ([]store.DueJob, error) { return s.b.JobDue(ctx, p) })
}

// JobAssignMany implements store.DispatchStore. The ids go down in canonical form; malformed ones
// are dropped here, as the contract says (they are simply absent from the result).
func (s *Store) JobAssignMany(ctx context.Context, p store.JobAssignParams) ([]*queue.Job, error) {
	check := func() error {
		if err := p.Validate(); err != nil {
			return err
		}
		ids := make([]string, 0, len(p.IDs))
		for _, raw := range p.IDs {
			if id, err := store.ParseJobID(raw); err == nil {
				ids = append(ids, id)
			}
		}
		p.IDs = ids
		return nil
	}
	return call(ctx, s, "JobAssignMany", check, func(ctx context.Context) ([]*queue.Job, error) { return s.b.JobAssignMany(ctx, p) })
}

// JobClaim implements store.DispatchStore.
func (s *Store) JobClaim(ctx context.Context, p store.JobClaimParams) ([]*queue.Job, error) {
	return call(ctx, s, "JobClaim", p.Validate, func(ctx context.Context) ([]*queue.Job, error) { return s.b.JobClaim(ctx, p) })
}

// JobAckMany implements store.DispatchStore.
func (s *Store) JobAckMany(ctx context.Context, leases []store.JobLease) ([]store.LeaseOutcome, error) {
	return call(ctx, s, "JobAckMany", nil, func(ctx context.Context) ([]store.LeaseOutcome, error) { return s.b.JobAckMany(ctx, leases) })
}

// JobReportMany implements store.DispatchStore.
func (s *Store) JobReportMany(ctx context.Context, reports []store.JobReportParams) ([]store.LeaseOutcome, error) {
	return call(ctx, s, "JobReportMany", nil, func(ctx context.Context) ([]store.LeaseOutcome, error) {
		return s.b.JobReportMany(ctx, reports)
	})
}

// JobOverdue implements store.RecoveryStore.
func (s *Store) JobOverdue(ctx context.Context, p store.JobOverdueParams) ([]store.OverdueLease, error) {
	return call(ctx, s, "JobOverdue", nil, func(ctx context.Context) ([]store.OverdueLease, error) { return s.b.JobOverdue(ctx, p) })
}

// JobFailMany implements store.RecoveryStore.
func (s *Store) JobFailMany(ctx context.Context, fails []store.JobFailParams) ([]store.LeaseOutcome, error) {
	return call(ctx, s, "JobFailMany", nil, func(ctx context.Context) ([]store.LeaseOutcome, error) { return s.b.JobFailMany(ctx, fails) })
}

// JobSettleFailed implements store.RecoveryStore.
func (s *Store) JobSettleFailed(ctx context.Context, limit int, decide func(queue.FailedJob) queue.Decision) (store.RetrySweep, error) {
	return call(ctx, s, "JobSettleFailed", nil, func(ctx context.Context) (store.RetrySweep, error) {
		return s.b.JobSettleFailed(ctx, limit, decide)
	})
}

// JobExpireTTL implements store.RecoveryStore.
func (s *Store) JobExpireTTL(ctx context.Context, limit int) (map[string]int, error) {
	return call(ctx, s, "JobExpireTTL", nil, func(ctx context.Context) (map[string]int, error) { return s.b.JobExpireTTL(ctx, limit) })
}

// WorkerMarkLost implements store.RecoveryStore.
func (s *Store) WorkerMarkLost(ctx context.Context, timeout time.Duration) ([]string, error) {
	return call(ctx, s, "WorkerMarkLost", nil, func(ctx context.Context) ([]string, error) { return s.b.WorkerMarkLost(ctx, timeout) })
}

// JobLeasesToCancel implements store.RecoveryStore. Leases with a malformed id are skipped by the
// backend, as the contract says.
func (s *Store) JobLeasesToCancel(ctx context.Context, workerID string, leases []store.JobLease) ([]string, error) {
	return call(ctx, s, "JobLeasesToCancel", nil, func(ctx context.Context) ([]string, error) {
		return s.b.JobLeasesToCancel(ctx, workerID, leases)
	})
}

// JobHeldBy implements store.RecoveryStore.
func (s *Store) JobHeldBy(ctx context.Context, workerID string) ([]string, error) {
	return call(ctx, s, "JobHeldBy", nil, func(ctx context.Context) ([]string, error) { return s.b.JobHeldBy(ctx, workerID) })
}

// JobRequestCancel implements store.OperatorStore.
func (s *Store) JobRequestCancel(ctx context.Context, lease store.JobLease) (*queue.Job, error) {
	return call(ctx, s, "JobRequestCancel", jobID(&lease.ID), func(ctx context.Context) (*queue.Job, error) {
		return s.b.JobRequestCancel(ctx, lease)
	})
}

// JobConsumeResult implements store.OperatorStore.
func (s *Store) JobConsumeResult(ctx context.Context, id string) (*queue.Job, bool, error) {
	return call2(ctx, s, "JobConsumeResult", jobID(&id), func(ctx context.Context) (*queue.Job, bool, error) {
		return s.b.JobConsumeResult(ctx, id)
	})
}

// WorkerRequestShutdown implements store.OperatorStore.
func (s *Store) WorkerRequestShutdown(ctx context.Context, id string) (*queue.Worker, error) {
	return call(ctx, s, "WorkerRequestShutdown", nil, func(ctx context.Context) (*queue.Worker, error) {
		return s.b.WorkerRequestShutdown(ctx, id)
	})
}

// JobProgressSet implements store.ProgressStore. A malformed update gets its own outcome from the
// backend; the worker id and the batch's size are the call's.
func (s *Store) JobProgressSet(ctx context.Context, p store.JobProgressSetParams) ([]store.LeaseOutcome, error) {
	return call(ctx, s, "JobProgressSet", p.Validate, func(ctx context.Context) ([]store.LeaseOutcome, error) {
		return s.b.JobProgressSet(ctx, p)
	})
}

// JobProgressGet implements store.ProgressStore.
func (s *Store) JobProgressGet(ctx context.Context, id string) (*queue.JobProgress, error) {
	return call(ctx, s, "JobProgressGet", jobID(&id), func(ctx context.Context) (*queue.JobProgress, error) {
		return s.b.JobProgressGet(ctx, id)
	})
}

// JobProgressPrune implements store.ProgressStore.
func (s *Store) JobProgressPrune(ctx context.Context, limit int) (int64, error) {
	return call(ctx, s, "JobProgressPrune", nil, func(ctx context.Context) (int64, error) { return s.b.JobProgressPrune(ctx, limit) })
}

// ConstraintCreate implements store.ConstraintStore.
func (s *Store) ConstraintCreate(ctx context.Context, p store.ConstraintCreateParams) (*queue.Constraint, error) {
	return call(ctx, s, "ConstraintCreate", p.Constraint.Validate, func(ctx context.Context) (*queue.Constraint, error) {
		return s.b.ConstraintCreate(ctx, p)
	})
}

// ConstraintGet implements store.ConstraintStore.
func (s *Store) ConstraintGet(ctx context.Context, name string) (*queue.Constraint, error) {
	return call(ctx, s, "ConstraintGet", nil, func(ctx context.Context) (*queue.Constraint, error) { return s.b.ConstraintGet(ctx, name) })
}

// ConstraintSet implements store.ConstraintStore.
func (s *Store) ConstraintSet(ctx context.Context) (*queue.ConstraintSet, error) {
	return call(ctx, s, "ConstraintSet", nil, s.b.ConstraintSet)
}

// ConstraintDelete implements store.ConstraintStore.
func (s *Store) ConstraintDelete(ctx context.Context, name string) error {
	return call0(ctx, s, "ConstraintDelete", nil, func(ctx context.Context) error { return s.b.ConstraintDelete(ctx, name) })
}

// ConstraintUsage implements store.ConstraintStore.
func (s *Store) ConstraintUsage(ctx context.Context, p store.ConstraintUsageParams) (*queue.ConstraintUsage, error) {
	return call(ctx, s, "ConstraintUsage", p.Validate, func(ctx context.Context) (*queue.ConstraintUsage, error) {
		return s.b.ConstraintUsage(ctx, p)
	})
}

// JobClaimConstrained implements store.ConstraintStore.
func (s *Store) JobClaimConstrained(ctx context.Context, p store.JobClaimParams) (*store.ConstrainedClaim, error) {
	return call(ctx, s, "JobClaimConstrained", p.Validate, func(ctx context.Context) (*store.ConstrainedClaim, error) {
		return s.b.JobClaimConstrained(ctx, p)
	})
}

// ConstraintBucketsPrune implements store.ConstraintStore.
func (s *Store) ConstraintBucketsPrune(ctx context.Context, p store.ConstraintBucketsPruneParams) (int64, error) {
	return call(ctx, s, "ConstraintBucketsPrune", p.Validate, func(ctx context.Context) (int64, error) {
		return s.b.ConstraintBucketsPrune(ctx, p)
	})
}
