package postgres

import (
	"context"
	"fmt"

	"github.com/jackc/pgx/v5"

	"github.com/jq-dev/jq/queue"
	"github.com/jq-dev/jq/store"
)

// Weighted dispatch (store.JobClaimParams.Levels and MaxWait): the claim runs in steps, one
// statement each, in one transaction — the aged jobs, then each level's quota, then the rest. A
// step sees the jobs the steps before it assigned as ASSIGNED, so no job is taken twice; the
// transaction makes the claim all or nothing, as the plain claim's single statement is. Each step is
// sqlJobClaim's shape (lock with SKIP LOCKED, update by ctid, events) with its own filter and order.
// Only queues with weights or max_wait take this path; sqlJobClaim stays the one statement of the
// others.
const sqlJobClaimStep = `
WITH locked AS MATERIALIZED (
    SELECT j.ctid AS l_ctid
    FROM jobs j
    WHERE j.queue = $1 AND j.state = 'PENDING' AND j.not_before <= now()
      AND (cardinality($4::text[]) = 0 OR j.type = ANY($4::text[]))
      AND NOT EXISTS (SELECT 1 FROM queues WHERE name = $1 AND paused)
      %s
    ORDER BY %s
    LIMIT $3
    FOR NO KEY UPDATE SKIP LOCKED
),
updated AS (
    UPDATE jobs SET
        state      = 'ASSIGNED',
        attempt    = attempt + 1,
        worker_id  = $2,
        event_seq  = event_seq + 1,
        updated_at = now()
    FROM locked
    WHERE jobs.ctid = l_ctid
    RETURNING event_seq, ` + jobColumns + `
),
events AS (
    INSERT INTO job_events (job_id, seq, queue, type, from_state, to_state, reason, worker_id, attempt,
                            created_at)
    SELECT id::uuid, event_seq, queue, type, 'PENDING', 'ASSIGNED', '` + store.ReasonAssigned + `',
           worker_id, attempt, updated_at
    FROM updated
)
SELECT ` + jobColumns + ` FROM updated ORDER BY %s`

var (
	// Aged: due at least $5 µs ago (both created_at and not_before that old), oldest due time first.
	// It reads every due job of the queue (no index orders by the due time); only queues with a
	// max_wait pay for it.
	sqlJobClaimAged = fmt.Sprintf("-- name: job_claim_aged"+sqlJobClaimStep,
		`AND j.created_at <= now() - $5::bigint * interval '1 microsecond'
      AND j.not_before <= now() - $5::bigint * interval '1 microsecond'`,
		"greatest(j.created_at, j.not_before), j.created_at, j.id",
		"greatest(created_at, not_before), created_at, id")
	// One level: jobs_dispatch_idx from (queue, priority) on, FIFO within the level.
	sqlJobClaimLevel = fmt.Sprintf("-- name: job_claim_level"+sqlJobClaimStep,
		"AND j.priority = $5::int", "j.priority DESC, j.created_at, j.id", "created_at, id")
	// The rest, in dispatch order, as sqlJobClaim.
	sqlJobClaimRest = fmt.Sprintf("-- name: job_claim_rest"+sqlJobClaimStep,
		"", "j.priority DESC, j.created_at, j.id", "priority DESC, created_at, id")
)

// jobClaimWeighted is JobClaim's weighted path (p validated).
func (s *Store) jobClaimWeighted(ctx context.Context, p store.JobClaimParams, types []string) ([]*queue.Job, error) {
	var out []*queue.Job
	err := pgx.BeginFunc(ctx, s.dispatch, func(tx pgx.Tx) error {
		out = out[:0]
		step := func(sql string, limit int, arg ...any) error {
			if limit <= 0 {
				return nil
			}
			rows, err := tx.Query(ctx, sql, append([]any{p.Queue, p.WorkerID, limit, types}, arg...)...)
			if err != nil {
				return err
			}
			jobs, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (*queue.Job, error) { return scanJob(r) })
			out = append(out, jobs...)
			return err
		}
		if p.MaxWait > 0 {
			if err := step(sqlJobClaimAged, p.Limit, p.MaxWait.Microseconds()); err != nil {
				return err
			}
		}
		budget := 0 // the quotas so far, less what their levels took
		for _, l := range p.Levels {
			budget += l.Max
			before := len(out)
			if err := step(sqlJobClaimLevel, min(budget, p.Limit-len(out)), l.Priority); err != nil {
				return err
			}
			budget -= len(out) - before
		}
		return step(sqlJobClaimRest, p.Limit-len(out))
	})
	if err != nil {
		return nil, fmt.Errorf("postgres: claim jobs: %w", err)
	}
	return out, nil
}
