package postgres

import (
	"context"
	"strings"

	"github.com/jackc/pgx/v5"

	"github.com/jq-dev/jq/queue"
	"github.com/jq-dev/jq/store"
	"github.com/jq-dev/jq/store/internal/sqlstore"
)

// Weighted dispatch (store.JobClaimParams.Levels and MaxWait): the claim runs in steps, one
// statement each, in one transaction — the aged jobs, then each level's quota, then the rest
// (sqlJobClaim itself). A step sees the jobs the steps before it assigned as ASSIGNED, so no job is
// taken twice; the transaction makes the claim all or nothing, as the plain claim's single statement
// is. Each step is sqlJobClaim with a filter of its own and its own order (claimVariant). Only
// queues with weights or max_wait take this path; sqlJobClaim stays the one statement of the others.
var (
	// Aged: due at least $5 µs ago (both created_at and not_before that old), oldest due time first.
	// It reads every due job of the queue (no index orders by the due time); only queues with a
	// max_wait pay for it.
	sqlJobClaimAged = claimVariant("job_claim_aged",
		`AND j.created_at <= now() - $5::bigint * interval '1 microsecond'
      AND j.not_before <= now() - $5::bigint * interval '1 microsecond'`,
		"greatest(j.created_at, j.not_before), j.created_at, j.id",
		"greatest(created_at, not_before), created_at, id")
	// One level: jobs_dispatch_idx from (queue, priority) on, FIFO within the level.
	sqlJobClaimLevel = claimVariant("job_claim_level",
		"AND j.priority = $5::int", "j.priority DESC, j.created_at, j.id", "created_at, id")
)

// claimVariant is sqlJobClaim named name, its walk narrowed by filter and ordered by walkOrder, its
// result ordered by resultOrder.
func claimVariant(name, filter, walkOrder, resultOrder string) string {
	_, body, _ := strings.Cut(sqlJobClaim, "\n") // drops sqlJobClaim's name line
	for _, r := range [][2]string{
		{"AND paused)\n", "AND paused)\n      " + filter + "\n"},
		{"    ORDER BY j.priority DESC, j.created_at, j.id\n", "    ORDER BY " + walkOrder + "\n"},
		{"FROM updated ORDER BY priority DESC, created_at, id", "FROM updated ORDER BY " + resultOrder},
	} {
		if !strings.Contains(body, r[0]) {
			panic("postgres: sqlJobClaim lost " + r[0])
		}
		body = strings.Replace(body, r[0], r[1], 1)
	}
	return "-- name: " + name + "\n" + body
}

// jobClaimWeighted is JobClaim's weighted path (p validated): sqlstore.WeightedSteps,
// one statement per step in one transaction.
func (s *Store) jobClaimWeighted(ctx context.Context, p store.JobClaimParams, types []string) ([]*queue.Job, error) {
	var out []*queue.Job
	err := pgx.BeginFunc(ctx, s.dispatch, func(tx pgx.Tx) error {
		out = out[:0]
		return sqlstore.WeightedSteps(p, func(st sqlstore.ClaimStep) (int, error) {
			args := []any{p.Queue, p.WorkerID, st.Limit, types}
			q := sqlJobClaim
			switch st.Kind {
			case sqlstore.ClaimAged:
				q, args = sqlJobClaimAged, append(args, p.MaxWait.Microseconds())
			case sqlstore.ClaimLevel:
				q, args = sqlJobClaimLevel, append(args, st.Priority)
			}
			rows, err := tx.Query(ctx, q, args...)
			if err != nil {
				return 0, err
			}
			jobs, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (*queue.Job, error) { return scanJob(r) })
			out = append(out, jobs...)
			return len(jobs), err
		})
	})
	if err != nil {
		return nil, errs.Wrap("claim jobs", err)
	}
	return out, nil
}
