package postgres

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/jq-dev/jq/queue"
	"github.com/jq-dev/jq/store"
	"github.com/jq-dev/jq/store/internal/sqlstore"
)

// Schedules of periodic jobs (store.ScheduleStore, migration 000013).

const (
	scheduleColumns = `name, queue, type, payload, priority, max_retries, timeout_ms, labels, cron, time_zone,
		missed, catch_up_max, paused, owner, next_fire_at, last_fire_at, coalesce(last_job_id::text, ''),
		last_outcome, last_error, created_at, updated_at, overlap, ttl_ms, keep_result`

	sqlScheduleCreate = `-- name: schedule_create
INSERT INTO schedules (name, queue, type, payload, priority, max_retries, timeout_ms, labels, cron, time_zone,
                       missed, catch_up_max, paused, owner, next_fire_at, overlap, ttl_ms, keep_result)
VALUES ($1, $2, $3, $4, $5, $6, $7, $8::jsonb, $9, $10, $11, $12, $13, $14, $15, $16, $17, $18)
RETURNING ` + scheduleColumns

	// An API edit: every setting; the next fire time only when the spec changed or the schedule is
	// resumed, so an edit of the template loses no fire. Only the owner's row ($14) is changed.
	sqlScheduleUpdate = `-- name: schedule_update
UPDATE schedules SET
    queue = $2, type = $3, payload = $4, priority = $5, max_retries = $6, timeout_ms = $7, labels = $8::jsonb,
    missed = $11, catch_up_max = $12, overlap = $16, ttl_ms = $17, keep_result = $18,
    next_fire_at = CASE WHEN cron <> $9 OR time_zone <> $10 OR (paused AND NOT $13) THEN $15 ELSE next_fire_at END,
    cron = $9, time_zone = $10, paused = $13, updated_at = now()
WHERE name = $1 AND owner = $14
RETURNING ` + scheduleColumns

	// The reconcile's write of one config-owned schedule: the template and policy always; the
	// next fire time only when the spec changed or an API-owned row is taken over ($19), so a
	// restart with an unchanged file loses no fire.
	sqlScheduleUpsert = `-- name: schedule_upsert
INSERT INTO schedules (name, queue, type, payload, priority, max_retries, timeout_ms, labels, cron, time_zone,
                       missed, catch_up_max, paused, owner, next_fire_at, overlap, ttl_ms, keep_result)
VALUES ($1, $2, $3, $4, $5, $6, $7, $8::jsonb, $9, $10, $11, $12, $13, $14, $15, $16, $17, $18)
ON CONFLICT (name) DO UPDATE SET
    queue = EXCLUDED.queue, type = EXCLUDED.type, payload = EXCLUDED.payload, priority = EXCLUDED.priority,
    max_retries = EXCLUDED.max_retries, timeout_ms = EXCLUDED.timeout_ms, labels = EXCLUDED.labels,
    missed = EXCLUDED.missed, catch_up_max = EXCLUDED.catch_up_max, owner = EXCLUDED.owner,
    overlap = EXCLUDED.overlap, ttl_ms = EXCLUDED.ttl_ms, keep_result = EXCLUDED.keep_result,
    next_fire_at = CASE WHEN $19 OR schedules.cron <> EXCLUDED.cron OR schedules.time_zone <> EXCLUDED.time_zone
                        THEN EXCLUDED.next_fire_at ELSE schedules.next_fire_at END,
    cron = EXCLUDED.cron, time_zone = EXCLUDED.time_zone, updated_at = now()`

	sqlScheduleGet = `-- name: schedule_get
SELECT ` + scheduleColumns + ` FROM schedules WHERE name = $1`

	sqlScheduleList = `-- name: schedule_list
SELECT ` + scheduleColumns + ` FROM schedules ORDER BY name`

	sqlScheduleOwners = `-- name: schedule_owners
SELECT name, owner FROM schedules WHERE owner = 'config' OR name = ANY($1::text[]) ORDER BY name FOR UPDATE`

	sqlScheduleDeleteOwned = `-- name: schedule_delete
DELETE FROM schedules WHERE name = $1 AND owner = $2`

	sqlScheduleOwner = `-- name: schedule_owner
SELECT owner FROM schedules WHERE name = $1`

	sqlScheduleSetPaused = `-- name: schedule_set_paused
UPDATE schedules SET paused = $2,
    next_fire_at = CASE WHEN $2 THEN next_fire_at ELSE $3 END, updated_at = now()
WHERE name = $1 RETURNING ` + scheduleColumns

	sqlScheduleClock = `-- name: schedule_clock
SELECT now(), (SELECT min(next_fire_at) FROM schedules WHERE NOT paused)`

	sqlScheduleDue = `-- name: schedule_due
SELECT ` + scheduleColumns + ` FROM schedules
WHERE NOT paused AND next_fire_at <= $1
ORDER BY next_fire_at, name
LIMIT $2`

	// The compare-and-set on next_fire_at: of the replicas that handled the same fire time, one
	// records it; the others find the row moved on and change nothing.
	sqlScheduleAdvance = `-- name: schedule_advance
UPDATE schedules SET next_fire_at = $3,
    last_fire_at = coalesce($4, last_fire_at),
    last_job_id  = CASE WHEN $4::timestamptz IS NULL THEN last_job_id ELSE $5::uuid END,
    last_outcome = CASE WHEN $4::timestamptz IS NULL THEN last_outcome ELSE $6 END,
    last_error   = CASE WHEN $4::timestamptz IS NULL THEN last_error ELSE $7 END,
    updated_at = now()
WHERE name = $1 AND next_fire_at = $2`
)

func scheduleArgs(p store.ScheduleParams) []any {
	t := p.Template
	payload := t.Payload
	if payload == nil {
		payload = []byte{}
	}
	return []any{p.Name, t.Queue, t.Type, payload, t.Priority, t.MaxRetries, toMillis(t.Timeout), jsonText(t.Labels),
		p.Cron, p.TimeZone, string(p.Missed), p.CatchUpMax, p.Paused, string(p.Owner), timePtr(p.NextFireAt),
		string(p.OverlapOrDefault()), toMillis(t.TTL), t.KeepResult}
}

func scanSchedule(row pgx.Row) (*queue.Schedule, error) {
	var (
		s                  queue.Schedule
		r                  sqlstore.ScheduleRow
		nextFire, lastFire *time.Time
	)
	err := row.Scan(&s.Name, &s.Template.Queue, &s.Template.Type, &s.Template.Payload, &s.Template.Priority,
		&s.Template.MaxRetries, &r.TimeoutMS, &r.Labels, &s.Cron, &s.TimeZone, &r.Missed, &s.CatchUpMax, &s.Paused,
		&r.Owner, &nextFire, &lastFire, &s.LastJobID, &s.LastOutcome, &s.LastError, &s.CreatedAt, &s.UpdatedAt,
		&r.Overlap, &r.TTLMS, &s.Template.KeepResult)
	if err != nil {
		return nil, err
	}
	r.Into(&s)
	s.NextFireAt, s.LastFireAt = deref(nextFire), deref(lastFire)
	s.CreatedAt, s.UpdatedAt = s.CreatedAt.UTC(), s.UpdatedAt.UTC()
	return &s, nil
}

// ScheduleCreate implements store.ScheduleStore.
func (s *Store) ScheduleCreate(ctx context.Context, p store.ScheduleParams) (*queue.Schedule, error) {
	sc, err := scanSchedule(s.pool.QueryRow(ctx, sqlScheduleCreate, scheduleArgs(p)...))
	if isCode(err, codeUniqueViolation) {
		return nil, fmt.Errorf("%w: %q", queue.ErrScheduleExists, p.Name)
	}
	return sc, errs.Wrap("create schedule", err)
}

// ScheduleGet implements store.ScheduleStore.
func (s *Store) ScheduleGet(ctx context.Context, name string) (*queue.Schedule, error) {
	sc, err := scanSchedule(s.pool.QueryRow(ctx, sqlScheduleGet, name))
	if err != nil {
		return nil, errs.Row("get schedule", err, queue.ErrScheduleNotFound, name)
	}
	return sc, nil
}

// ScheduleList implements store.ScheduleStore.
func (s *Store) ScheduleList(ctx context.Context) ([]*queue.Schedule, error) {
	out, err := s.schedules(ctx, sqlScheduleList)
	return out, errs.Wrap("list schedules", err)
}

// ScheduleUpdate implements store.ScheduleStore.
func (s *Store) ScheduleUpdate(ctx context.Context, p store.ScheduleParams) (*queue.Schedule, error) {
	sc, err := scanSchedule(s.pool.QueryRow(ctx, sqlScheduleUpdate, scheduleArgs(p)...))
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, s.notOwned(ctx, p.Name)
	}
	return sc, errs.Wrap("update schedule", err)
}

// notOwned says why a write of the owner's row changed nothing: no such schedule, or another owner.
func (s *Store) notOwned(ctx context.Context, name string) error {
	return errs.ScheduleNotOwned("schedule owner", name, s.pool.QueryRow(ctx, sqlScheduleOwner, name).Scan)
}

// ScheduleDelete implements store.ScheduleStore.
func (s *Store) ScheduleDelete(ctx context.Context, p store.ScheduleDeleteParams) error {
	tag, err := s.pool.Exec(ctx, sqlScheduleDeleteOwned, p.Name, string(p.Owner))
	if err != nil {
		return errs.Wrap("delete schedule", err)
	}
	if tag.RowsAffected() == 1 {
		return nil
	}
	return s.notOwned(ctx, p.Name)
}

// ScheduleSetPaused implements store.ScheduleStore.
func (s *Store) ScheduleSetPaused(ctx context.Context, p store.ScheduleSetPausedParams) (*queue.Schedule, error) {
	sc, err := scanSchedule(s.pool.QueryRow(ctx, sqlScheduleSetPaused, p.Name, p.Paused, timePtr(p.NextFireAt)))
	if err != nil {
		return nil, errs.Row("pause schedule", err, queue.ErrScheduleNotFound, p.Name)
	}
	return sc, nil
}

// ScheduleReconcile implements store.ScheduleStore.
func (s *Store) ScheduleReconcile(ctx context.Context, p store.ScheduleReconcileParams) (store.ScheduleReconcileResult, error) {
	var res store.ScheduleReconcileResult
	names, err := p.Names()
	if err != nil {
		return res, err
	}
	err = pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		rows, err := tx.Query(ctx, sqlScheduleOwners, names)
		if err != nil {
			return err
		}
		owners := map[string]string{}
		var name, owner string
		if _, err := pgx.ForEachRow(rows, []any{&name, &owner}, func() error { owners[name] = owner; return nil }); err != nil {
			return err
		}
		res, err = sqlstore.ReconcileSchedules(p, names, owners, func(sp store.ScheduleParams, takeOver bool) error {
			_, err := tx.Exec(ctx, sqlScheduleUpsert, append(scheduleArgs(sp), takeOver)...)
			return err
		}, func(name, owner string) error {
			_, err := tx.Exec(ctx, sqlScheduleDeleteOwned, name, owner)
			return err
		})
		return err
	})
	if err != nil {
		return store.ScheduleReconcileResult{}, errs.Wrap("reconcile schedules", err)
	}
	return res, nil
}

// ScheduleDue implements store.ScheduleStore.
func (s *Store) ScheduleDue(ctx context.Context, limit int) (store.ScheduleDueResult, error) {
	var res store.ScheduleDueResult
	if err := sqlstore.CheckScheduleDueLimit(limit); err != nil {
		return res, err
	}
	var earliest *time.Time
	if err := s.pool.QueryRow(ctx, sqlScheduleClock).Scan(&res.Now, &earliest); err != nil {
		return res, errs.Wrap("schedule clock", err)
	}
	res.Now, res.Earliest = res.Now.UTC(), deref(earliest)
	if res.Earliest.IsZero() || res.Earliest.After(res.Now) {
		return res, nil
	}
	var err error
	res.Due, err = s.schedules(ctx, sqlScheduleDue, res.Now, limit)
	return res, errs.Wrap("due schedules", err)
}

// schedules reads the schedules a statement returns.
func (s *Store) schedules(ctx context.Context, sql string, args ...any) ([]*queue.Schedule, error) {
	rows, err := s.pool.Query(ctx, sql, args...)
	if err != nil {
		return nil, err
	}
	return pgx.CollectRows(rows, func(r pgx.CollectableRow) (*queue.Schedule, error) { return scanSchedule(r) })
}

// ScheduleAdvance implements store.ScheduleStore.
func (s *Store) ScheduleAdvance(ctx context.Context, p store.ScheduleAdvanceParams) (bool, error) {
	var jobID *string
	if p.LastJobID != "" {
		jobID = &p.LastJobID
	}
	tag, err := s.pool.Exec(ctx, sqlScheduleAdvance, p.Name, p.From, timePtr(p.Next), timePtr(p.LastFireAt), jobID,
		p.LastOutcome, p.LastError)
	if err != nil {
		return false, errs.Wrap("advance schedule", err)
	}
	return tag.RowsAffected() == 1, nil
}

const (
	// The schedules of a fire batch still due as read ($1 names, $2 their next_fire_at), locked to
	// the commit in name order (two replicas' batches cannot deadlock). A schedule deleted, paused
	// or advanced meanwhile is not returned: its fires are not inserted. A delete or pause that
	// comes later waits for this transaction, so once it returns no fire of the batch is pending.
	sqlScheduleFireLock = `-- name: schedule_fire_lock
SELECT name FROM schedules
WHERE (name, next_fire_at) IN (SELECT * FROM unnest($1::text[], $2::timestamptz[])) AND NOT paused
ORDER BY name
FOR NO KEY UPDATE`

	// The advances of the locked schedules of a fire batch, one statement (sqlScheduleAdvance's
	// columns from parallel arrays).
	sqlScheduleFireAdvance = `-- name: schedule_fire_advance
UPDATE schedules AS s SET next_fire_at = u.next,
    last_fire_at = coalesce(u.last_fire_at, s.last_fire_at),
    last_job_id  = CASE WHEN u.last_fire_at IS NULL THEN s.last_job_id ELSE u.last_job_id END,
    last_outcome = CASE WHEN u.last_fire_at IS NULL THEN s.last_outcome ELSE u.last_outcome END,
    last_error   = CASE WHEN u.last_fire_at IS NULL THEN s.last_error ELSE u.last_error END,
    updated_at = now()
FROM unnest($1::text[], $2::timestamptz[], $3::timestamptz[], $4::uuid[], $5::text[], $6::text[])
     AS u(name, next, last_fire_at, last_job_id, last_outcome, last_error)
WHERE s.name = u.name`
)

// ScheduleFire implements store.ScheduleStore: three statements in one transaction — lock the
// schedules still due, insert the jobs of those, advance them.
func (s *Store) ScheduleFire(ctx context.Context, ps []store.ScheduleFireParams) ([]store.ScheduleFireResult, error) {
	if len(ps) == 0 {
		return nil, nil
	}
	if _, err := store.ValidateScheduleFire(ps); err != nil {
		return nil, err
	}
	names := make([]string, len(ps))
	froms := make([]time.Time, len(ps))
	for i, p := range ps {
		names[i], froms[i] = p.Name, p.From
	}
	var out []store.ScheduleFireResult
	err := pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		rows, err := tx.Query(ctx, sqlScheduleFireLock, names, froms)
		if err != nil {
			return err
		}
		locked, err := pgx.CollectRows(rows, pgx.RowTo[string])
		if err != nil {
			return err
		}
		due := make(map[string]bool, len(locked))
		for _, n := range locked {
			due[n] = true
		}
		var jobs []store.JobInsertParams
		for _, p := range ps {
			if due[p.Name] {
				jobs = append(jobs, p.Jobs...)
			}
		}
		var res []store.JobInsertResult
		if len(jobs) > 0 {
			if res, err = insertJobs(ctx, tx, jobs); err != nil {
				return err
			}
		}
		var advanced []store.ScheduleAdvanceParams
		out, advanced = sqlstore.ScheduleFireResults(ps, func(i int) bool { return due[ps[i].Name] }, res)
		var (
			advNames, outcomes, lastErrs []string
			nexts, lastFires             []*time.Time
			jobIDs                       []*string
		)
		for _, a := range advanced {
			var id *string
			if a.LastJobID != "" {
				id = &a.LastJobID
			}
			advNames, nexts, lastFires = append(advNames, a.Name), append(nexts, timePtr(a.Next)), append(lastFires, timePtr(a.LastFireAt))
			jobIDs, outcomes, lastErrs = append(jobIDs, id), append(outcomes, a.LastOutcome), append(lastErrs, a.LastError)
		}
		if len(advNames) == 0 {
			return nil
		}
		_, err = tx.Exec(ctx, sqlScheduleFireAdvance, advNames, nexts, lastFires, jobIDs, outcomes, lastErrs)
		return err
	})
	if err != nil {
		return nil, errs.WrapExcept("fire schedules", err, sqlstore.ScheduleFireKeep...)
	}
	return out, nil
}
