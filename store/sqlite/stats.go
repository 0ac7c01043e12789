package sqlite

import (
	"context"

	"github.com/jq-dev/jq/queue"
	"github.com/jq-dev/jq/store/internal/sqlstore"
)

// sqlQueueStats computes one queue's statistics as the Postgres store's queue_stats does: the live
// states exactly through their partial indexes, DONE one by one up to ?2 (+1) rows, the recent
// figures from the newest ?3 events within the last ?4 µs and the run time of the latest ?5
// successes. ?6 is now. SQLite keeps no planner statistics to estimate from: past ?2 the DONE
// figure counts the queue's entries of jobs_queue_created_idx (an index-only count) less the live
// states, and is reported as estimated like Postgres's.
const sqlQueueStats = `
WITH pending AS (
    SELECT count(*) AS n,
           min(max(created_at, not_before)) FILTER (WHERE not_before <= ?6) AS oldest_due
    FROM jobs WHERE queue = ?1 AND state = 'PENDING'
),
active AS (
    SELECT count(*) FILTER (WHERE state = 'ASSIGNED') AS assigned,
           count(*) FILTER (WHERE state = 'RUNNING') AS running
    FROM jobs WHERE state IN ('ASSIGNED', 'RUNNING') AND queue = ?1
),
failed AS (SELECT count(*) AS n FROM jobs WHERE state = 'FAILED' AND queue = ?1),
dead AS (SELECT count(*) AS n FROM jobs WHERE state = 'DEAD_LETTERED' AND queue = ?1),
done AS (
    SELECT count(*) AS n FROM (
        SELECT 1 FROM jobs WHERE queue = ?1 AND state = 'DONE' ORDER BY created_at, id LIMIT ?2 + 1)
),
sample AS (
    SELECT queue, from_state, to_state, job_id, created_at FROM job_events ORDER BY id DESC LIMIT ?3
),
bounds AS (
    SELECT CASE WHEN count(*) >= ?3 THEN max(min(created_at), ?6 - ?4) ELSE ?6 - ?4 END AS since
    FROM sample
),
recent AS (
    SELECT s.to_state, s.job_id, s.created_at
    FROM sample s
    WHERE s.queue = ?1 AND s.created_at >= (SELECT since FROM bounds)
      AND s.from_state IN ('ASSIGNED', 'RUNNING') AND s.to_state IN ('DONE', 'FAILED', 'DEAD_LETTERED')
),
run AS (
    SELECT avg(j.completed_at - j.started_at) AS micros
    FROM (SELECT job_id FROM recent WHERE to_state = 'DONE' ORDER BY created_at DESC LIMIT ?5) r
    JOIN jobs j ON j.id = r.job_id
    WHERE j.state = 'DONE' AND j.started_at IS NOT NULL
),
counted AS (
    SELECT count(*) AS finished,
           count(*) FILTER (WHERE to_state <> 'DONE') AS failed,
           count(*) FILTER (WHERE created_at >= ?6 - 60000000) AS finished_minute,
           count(*) FILTER (WHERE created_at >= ?6 - 60000000 AND to_state <> 'DONE') AS failed_minute
    FROM recent
)
SELECT p.n, a.assigned, a.running, d.n, f.n, dl.n,
       r.finished, r.failed, r.finished_minute, r.failed_minute,
       ?6 - b.since,
       CAST(coalesce((SELECT micros FROM run), 0) AS INTEGER),
       coalesce(?6 - p.oldest_due, 0)
FROM queues q, pending p, active a, done d, failed f, dead dl, counted r, bounds b
WHERE q.name = ?1`

const sqlQueueCountAll = `SELECT count(*) FROM jobs WHERE queue = ?1`

// QueueStats implements store.QueueStore.
func (s *Store) QueueStats(ctx context.Context, name string) (*queue.QueueStats, error) {
	st := queue.QueueStats{Queue: name}
	var windowMicros, avgMicros, oldMicros int64
	err := s.queryRow(ctx, sqlQueueStats, name, queue.ExactDoneLimit, queue.RecentEventsLimit,
		queue.RecentWindow.Microseconds(), queue.RecentRunTimesLimit, us(s.now())).Scan(
		&st.Pending, &st.Assigned, &st.Running, &st.Done, &st.Failed, &st.DeadLettered,
		&st.Finished, &st.FailedAttempts, &st.FinishedLastMinute, &st.FailedLastMinute,
		&windowMicros, &avgMicros, &oldMicros)
	if err != nil {
		return nil, errs.Row("queue stats", err, queue.ErrQueueNotFound, name)
	}
	if st.Done > queue.ExactDoneLimit {
		var all int64
		if err := s.queryRow(ctx, sqlQueueCountAll, name).Scan(&all); err != nil {
			return nil, errs.Wrap("queue stats", err)
		}
		st.Done = max(all-st.Pending-st.Assigned-st.Running-st.Failed-st.DeadLettered, queue.ExactDoneLimit+1)
		st.DoneEstimated = true
	}
	sqlstore.FinishQueueStats(&st, windowMicros, avgMicros, oldMicros)
	return &st, nil
}
