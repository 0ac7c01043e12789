package sqlite

import (
	"context"

	"github.com/jq-dev/jq/queue"
	"github.com/jq-dev/jq/store"
	"github.com/jq-dev/jq/store/internal/sqlstore"
)

// Weighted dispatch (store.JobClaimParams.Levels and MaxWait), as in Postgres: in one write, the aged
// jobs, then each level's quota, then the rest, each step reading the due ids and assigning them
// before the next reads (so no job is taken twice). Only queues with weights or max_wait take this
// path; JobClaim's plain walk stays the others'.
const sqlClaimTypes = `
  AND (?4 = '[]' OR type IN (SELECT value FROM json_each(?4)))`

var (
	// Aged: due at or before ?5 (now − max_wait, µs), oldest due time first. It reads every due job
	// of the queue (no index orders by the due time); only queues with a max_wait pay for it.
	sqlJobClaimAged = `SELECT id` + sqlDueFrom + sqlClaimTypes + `
  AND created_at <= ?5 AND not_before <= ?5
ORDER BY max(created_at, not_before), created_at, id
LIMIT ?3`
	// One level: jobs_dispatch_idx from (queue, priority) on, FIFO within the level.
	sqlJobClaimLevel = `SELECT id` + sqlDueFrom + sqlClaimTypes + `
  AND priority = ?5` + sqlDueOrder
	// The rest, in dispatch order.
	sqlJobClaimRest = `SELECT id` + sqlDueFrom + sqlClaimTypes + sqlDueOrder
)

// jobClaimWeighted is JobClaim's weighted path (p validated): sqlstore.WeightedSteps,
// each step's due ids read and assigned in the same write.
func (s *Store) jobClaimWeighted(ctx context.Context, p store.JobClaimParams) ([]*queue.Job, error) {
	var jobs []*queue.Job
	err := s.write(ctx, func(tx *wtx) (err error) {
		jobs, err = claimWeighted(tx, p)
		return err
	})
	if err != nil {
		return nil, errs.Wrap("claim jobs", err)
	}
	return jobs, nil
}

// claimWeighted is the weighted claim (p validated) inside a write.
func claimWeighted(tx *wtx, p store.JobClaimParams) ([]*queue.Job, error) {
	var jobs []*queue.Job
	now := us(tx.now)
	err := sqlstore.WeightedSteps(p, func(st sqlstore.ClaimStep) (int, error) {
		args := []any{p.Queue, now, st.Limit, listText(p.Types)}
		q := sqlJobClaimRest
		switch st.Kind {
		case sqlstore.ClaimAged:
			q, args = sqlJobClaimAged, append(args, us(tx.now.Add(-p.MaxWait)))
		case sqlstore.ClaimLevel:
			q, args = sqlJobClaimLevel, append(args, st.Priority)
		}
		rows, err := tx.query(q, args...)
		if err != nil {
			return 0, err
		}
		ids, err := scanIDs(rows)
		if err != nil {
			return 0, err
		}
		before := len(jobs)
		for _, id := range ids {
			j, err := assignJob(tx, id, p.WorkerID, now)
			if err != nil {
				return 0, err
			}
			if j != nil {
				jobs = append(jobs, j)
			}
		}
		return len(jobs) - before, nil
	})
	return jobs, err
}
