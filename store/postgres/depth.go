package postgres

import (
	"context"

	"github.com/jackc/pgx/v5"

	"github.com/jq-dev/jq/queue"
	"github.com/jq-dev/jq/store"
	"github.com/jq-dev/jq/store/internal/sqlstore"
)

// sqlDepthSnapshot measures everything the depth gauges show in one round trip, reading only the
// partial indexes of the live states, never the history (DONE jobs, the bulk of the table): PENDING
// per queue through jobs_dispatch_idx (a lateral count per queue, so the planner cannot prefer a
// scan of the table for a big backlog), ASSIGNED/RUNNING through jobs_worker_active_idx, FAILED
// through jobs_failed_idx, DEAD_LETTERED through jobs_dead_lettered_idx (TestDispatchPlans checks
// it). Its cost follows the live jobs, not the table. The kind column says which part a row
// belongs to. The queues come as an array: the planner estimates an unnest at 10 rows, where it
// takes a never-analysed queues table (autovacuum does not analyse a table of a few rows) for 560
// — 560 lateral index walks priced over JIT's threshold, which then compiled the statement on every
// run (~280 ms at 1M jobs, against ~40 ms of work).
const sqlDepthSnapshot = `-- name: depth_snapshot
SELECT 'queue', name, '', 0::bigint FROM queues
UNION ALL
SELECT 'jobs', q.name, 'PENDING', p.n FROM unnest(ARRAY(SELECT name FROM queues)) AS q(name)
CROSS JOIN LATERAL (SELECT count(*) AS n FROM jobs j WHERE j.queue = q.name AND j.state = 'PENDING') p
WHERE p.n > 0
UNION ALL
SELECT 'jobs', queue, state, count(*) FROM jobs WHERE state IN ('ASSIGNED', 'RUNNING') GROUP BY queue, state
UNION ALL
SELECT 'jobs', queue, 'FAILED', count(*) FROM jobs WHERE state = 'FAILED' GROUP BY queue
UNION ALL
SELECT 'jobs', queue, 'DEAD_LETTERED', count(*) FROM jobs WHERE state = 'DEAD_LETTERED' GROUP BY queue
UNION ALL
SELECT 'workers', '', '', count(*) FROM workers WHERE status IN ('ONLINE', 'DRAINING')`

// DepthSnapshot counts the jobs of every queue by state (store.DepthStates) and the active
// workers, with one statement.
func (s *Store) DepthSnapshot(ctx context.Context) (store.DepthSnapshot, error) {
	snap := store.DepthSnapshot{Jobs: map[string]map[queue.State]int64{}}
	rows, err := s.pool.Query(ctx, sqlDepthSnapshot)
	if err != nil {
		return snap, errs.Wrap("depth snapshot", err)
	}
	var (
		kind, name, state string
		n                 int64
	)
	_, err = pgx.ForEachRow(rows, []any{&kind, &name, &state, &n}, func() error {
		sqlstore.DepthRow(&snap, kind, name, state, n)
		return nil
	})
	if err != nil {
		return snap, errs.Wrap("depth snapshot", err)
	}
	return snap, nil
}
