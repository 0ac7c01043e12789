package sqlite

import (
	"context"

	"github.com/jq-dev/jq/queue"
	"github.com/jq-dev/jq/store"
	"github.com/jq-dev/jq/store/internal/sqlstore"
)

var _ store.DepthStore = (*Store)(nil)

// sqlDepthSnapshot measures everything the depth gauges show in one statement, reading only the
// partial indexes of the live states, never the history (DONE jobs, the bulk of the table): PENDING
// through jobs_dispatch_idx, ASSIGNED/RUNNING through jobs_worker_active_idx, FAILED through
// jobs_failed_idx, DEAD_LETTERED through jobs_dead_lettered_idx. The kind column says which part a
// row belongs to. INDEXED BY: without statistics the planner prefers jobs_queue_created_idx for the
// GROUP BY, a walk of every job.
const sqlDepthSnapshot = `-- name: depth_snapshot
SELECT 'queue', name, '', 0 FROM queues
UNION ALL
SELECT 'jobs', queue, 'PENDING', count(*) FROM jobs INDEXED BY jobs_dispatch_idx WHERE state = 'PENDING' GROUP BY queue
UNION ALL
SELECT 'jobs', queue, state, count(*) FROM jobs INDEXED BY jobs_worker_active_idx WHERE state IN ('ASSIGNED', 'RUNNING') GROUP BY queue, state
UNION ALL
SELECT 'jobs', queue, 'FAILED', count(*) FROM jobs INDEXED BY jobs_failed_idx WHERE state = 'FAILED' GROUP BY queue
UNION ALL
SELECT 'jobs', queue, 'DEAD_LETTERED', count(*) FROM jobs INDEXED BY jobs_dead_lettered_idx WHERE state = 'DEAD_LETTERED' GROUP BY queue
UNION ALL
SELECT 'workers', '', '', count(*) FROM workers WHERE status IN ('ONLINE', 'DRAINING')`

// DepthSnapshot implements store.DepthStore.
func (s *Store) DepthSnapshot(ctx context.Context) (store.DepthSnapshot, error) {
	snap := store.DepthSnapshot{Jobs: map[string]map[queue.State]int64{}}
	rows, err := s.query(ctx, sqlDepthSnapshot)
	if err != nil {
		return snap, errs.Wrap("depth snapshot", err)
	}
	defer rows.Close()
	for rows.Next() {
		var (
			kind, name, state string
			n                 int64
		)
		if err := rows.Scan(&kind, &name, &state, &n); err != nil {
			return snap, errs.Wrap("depth snapshot", err)
		}
		sqlstore.DepthRow(&snap, kind, name, state, n)
	}
	if err := rows.Err(); err != nil {
		return snap, errs.Wrap("depth snapshot", err)
	}
	return snap, nil
}
