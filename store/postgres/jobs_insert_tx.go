package postgres

import (
	"context"

	"github.com/jackc/pgx/v5"

	"github.com/jq-dev/jq/store"
)

// InsertTx inserts jobs inside the caller's transaction on jq's database (River's InsertTx): they
// exist, and are dispatched, if and only if that transaction commits. It writes what JobInsertMany
// writes — each job row and its submission event, through the same statement, with the same
// validation, the queue's defaults and the same idempotency-key semantics (a key held by a job of
// the same spec returns that job as Existing; a different spec is queue.ErrIdempotencyConflict) —
// and then a NOTIFY on the servers' wake-up channel, which Postgres delivers at commit, so a
// server's scheduler dispatches the jobs at once instead of at its next tick.
//
// The insert runs in a savepoint: when it fails (an unknown queue, an idempotency conflict) the
// caller's transaction is left as it was and stays usable. A key held by a job that another
// transaction inserted but has not committed makes this insert wait for that transaction, as two
// concurrent submits of the same key do.
func InsertTx(ctx context.Context, tx pgx.Tx, ps []store.JobInsertParams) ([]store.JobInsertResult, error) {
	if len(ps) == 0 {
		return nil, nil
	}
	if err := store.ValidateInserts(ps); err != nil { // not through store/storewrap: an application's transaction
		return nil, err
	}
	var results []store.JobInsertResult
	err := pgx.BeginFunc(ctx, tx, func(sp pgx.Tx) error {
		var err error
		if results, err = insertJobs(ctx, sp, ps); err != nil {
			return err
		}
		var queues []string
		seen := map[string]bool{}
		for _, r := range results {
			if !r.Existing && !seen[r.Job.Queue] {
				seen[r.Job.Queue] = true
				queues = append(queues, r.Job.Queue)
			}
		}
		if len(queues) == 0 {
			return nil
		}
		if _, err := sp.Exec(ctx, sqlNotify, queues); err != nil {
			return errs.Wrap("insert jobs: notify", err)
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return results, nil
}
