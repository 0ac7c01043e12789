package postgres

import (
	"context"

	"github.com/jq-dev/jq/queue"
	"github.com/jq-dev/jq/store/internal/sqlstore"
)

// sqlQueueStats computes one queue's statistics from what stays small however long the
// history grows, never by counting the history:
//
//   - the live states exactly, through the partial indexes dispatch and the reaper keep anyway:
//     PENDING (and the oldest due job) index-only through jobs_dispatch_idx (created_at is a key
//     column, not_before INCLUDEd), ASSIGNED/RUNNING through jobs_worker_active_idx, FAILED
//     through jobs_failed_idx, DEAD_LETTERED through jobs_dead_lettered_idx — as DepthSnapshot;
//   - DONE, the bulk of the table, one by one only up to $2 rows (LIMIT $2+1), oldest first
//     (jobs_queue_created_idx or jobs_created_idx backwards: the history is the oldest part, so
//     the walk finds its rows at once and never scans the table); a queue with more
//     gets an estimate: the planner's row count of the table (reltuples scaled to the table's
//     current size, as the planner does) times the queue's share in pg_stats (its most-common-value
//     frequency, or the rest spread over the other distinct values), less the exact live counts;
//   - the recent figures from the newest $3 events (job_events_pkey and event_batches_pkey walked
//     backwards, only the batches that hold them unnested; one statement of every queue), within the last $4 µs: attempts finished (RUNNING/ASSIGNED → DONE, FAILED,
//     DEAD_LETTERED), failed, and in the last minute; the run time of the latest $5 successes
//     through jobs_pkey.
//
// A queue that does not exist yields no row.
var sqlQueueStats = `-- name: queue_stats
WITH pending AS (
    SELECT count(*) AS n,
           min(greatest(created_at, not_before)) FILTER (WHERE not_before <= now()) AS oldest_due
    FROM jobs WHERE queue = $1 AND state = 'PENDING'
),
active AS (
    SELECT count(*) FILTER (WHERE state = 'ASSIGNED') AS assigned,
           count(*) FILTER (WHERE state = 'RUNNING') AS running
    FROM jobs WHERE state IN ('ASSIGNED', 'RUNNING') AND queue = $1
),
failed AS (SELECT count(*) AS n FROM jobs WHERE state = 'FAILED' AND queue = $1),
dead AS (SELECT count(*) AS n FROM jobs WHERE state = 'DEAD_LETTERED' AND queue = $1),
done AS (
    SELECT count(*) AS n FROM (
        SELECT 1 FROM jobs WHERE queue = $1 AND state = 'DONE' ORDER BY created_at, id LIMIT $2 + 1) d
),
est AS (
    SELECT CASE WHEN c.relpages > 0
                THEN c.reltuples / c.relpages * (pg_relation_size(c.oid) / current_setting('block_size')::float8)
                ELSE 0 END
           * coalesce(
               (SELECT m.f FROM unnest(s.most_common_vals::text::text[], s.most_common_freqs) AS m(v, f)
                WHERE m.v = $1),
               (1 - s.null_frac - coalesce((SELECT sum(f) FROM unnest(s.most_common_freqs) AS f), 0))
                 / greatest(CASE WHEN s.n_distinct < 0 THEN -s.n_distinct * c.reltuples ELSE s.n_distinct END
                            - coalesce(cardinality(s.most_common_freqs), 0), 1),
               0) AS total
    FROM pg_class c
    JOIN pg_namespace ns ON ns.oid = c.relnamespace
    LEFT JOIN pg_stats s ON s.schemaname = ns.nspname AND s.tablename = c.relname AND s.attname = 'queue'
    WHERE c.oid = 'jobs'::regclass
),
sample AS (
    SELECT queue, from_state, to_state, job_id, created_at FROM (
        (SELECT id, 0::bigint AS ord, queue, from_state, to_state, job_id, created_at
         FROM job_events ORDER BY id DESC LIMIT $3)
        UNION ALL
        SELECT b.id, t.ord, t.queue, t.from_state, t.to_state, t.job_id, t.at
        FROM (SELECT id FROM (SELECT id, sum(n) OVER (ORDER BY id DESC) - n AS before
                              FROM (SELECT id, n FROM event_batches ORDER BY id DESC LIMIT $3) nb) w
              WHERE before < $3) newest
        JOIN event_batches b ON b.id = newest.id
        CROSS JOIN LATERAL ` + batchUnnest + `
    ) s
    ORDER BY id DESC, ord DESC
    LIMIT $3
),
bounds AS (
    SELECT CASE WHEN count(*) >= $3 THEN greatest(min(created_at), now() - $4 * interval '1 microsecond')
                ELSE now() - $4 * interval '1 microsecond' END AS since
    FROM sample
),
recent AS (
    SELECT s.to_state, s.job_id, s.created_at
    FROM sample s
    WHERE s.queue = $1 AND s.created_at >= (SELECT since FROM bounds)
      AND s.from_state IN ('ASSIGNED', 'RUNNING') AND s.to_state IN ('DONE', 'FAILED', 'DEAD_LETTERED')
),
run AS (
    SELECT avg(extract(epoch FROM j.completed_at - j.started_at) * 1000000) AS micros
    FROM (SELECT job_id FROM recent WHERE to_state = 'DONE' ORDER BY created_at DESC LIMIT $5) r
    JOIN jobs j ON j.id = r.job_id
    WHERE j.state = 'DONE' AND j.started_at IS NOT NULL
),
counted AS (
    SELECT count(*) AS finished,
           count(*) FILTER (WHERE to_state <> 'DONE') AS failed,
           count(*) FILTER (WHERE created_at >= now() - interval '1 minute') AS finished_minute,
           count(*) FILTER (WHERE created_at >= now() - interval '1 minute' AND to_state <> 'DONE') AS failed_minute
    FROM recent
)
SELECT p.n, a.assigned, a.running, d.n, f.n, dl.n,
       d.n > $2,
       greatest(round(e.total) - p.n - a.assigned - a.running - f.n - dl.n, $2 + 1)::bigint,
       r.finished, r.failed, r.finished_minute, r.failed_minute,
       (extract(epoch FROM now() - b.since) * 1000000)::bigint,
       coalesce((SELECT micros FROM run), 0)::bigint,
       coalesce(extract(epoch FROM now() - p.oldest_due) * 1000000, 0)::bigint
FROM queues q, pending p, active a, done d, failed f, dead dl, est e, counted r, bounds b
WHERE q.name = $1`

// QueueStats implements store.QueueStore.
func (s *Store) QueueStats(ctx context.Context, name string) (*queue.QueueStats, error) {
	st := queue.QueueStats{Queue: name}
	var (
		estimated                      bool
		doneEstimate                   int64
		windowMicros, avgMicros, oldMs int64
	)
	err := s.pool.QueryRow(ctx, sqlQueueStats, name, queue.ExactDoneLimit, queue.RecentEventsLimit,
		queue.RecentWindow.Microseconds(), queue.RecentRunTimesLimit).Scan(
		&st.Pending, &st.Assigned, &st.Running, &st.Done, &st.Failed, &st.DeadLettered,
		&estimated, &doneEstimate,
		&st.Finished, &st.FailedAttempts, &st.FinishedLastMinute, &st.FailedLastMinute,
		&windowMicros, &avgMicros, &oldMs)
	if err != nil {
		return nil, errs.Row("queue stats", err, queue.ErrQueueNotFound, name)
	}
	if estimated {
		st.Done, st.DoneEstimated = doneEstimate, true
	}
	sqlstore.FinishQueueStats(&st, windowMicros, avgMicros, oldMs)
	return &st, nil
}
