package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"

	"github.com/jq-dev/jq/queue"
	"github.com/jq-dev/jq/store"
	"github.com/jq-dev/jq/store/internal/sqlstore"
)

var _ store.ScheduleStore = (*Store)(nil)

// Schedules of periodic jobs (store.ScheduleStore), as store/postgres/schedules.go.

const (
	scheduleColumns = `name, queue, type, payload, priority, max_retries, timeout_ms, labels, cron, time_zone,
		missed, catch_up_max, paused, owner, next_fire_at, last_fire_at, coalesce(last_job_id, ''),
		last_outcome, last_error, created_at, updated_at, overlap, ttl_ms, keep_result`

	sqlScheduleInsert = `
INSERT INTO schedules (name, queue, type, payload, priority, max_retries, timeout_ms, labels, cron, time_zone,
                       missed, catch_up_max, paused, owner, next_fire_at, created_at, updated_at,
                       overlap, ttl_ms, keep_result)
VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14, ?15, ?16, ?16, ?17, ?18, ?19)`

	// An API edit, as store/postgres's: every setting; the next fire time only when the spec
	// changed or the schedule is resumed. Only the owner's row (?14) is changed.
	sqlScheduleUpdate = `-- name: schedule_update
UPDATE schedules SET
    queue = ?2, type = ?3, payload = ?4, priority = ?5, max_retries = ?6, timeout_ms = ?7, labels = ?8,
    missed = ?11, catch_up_max = ?12, overlap = ?17, ttl_ms = ?18, keep_result = ?19,
    next_fire_at = CASE WHEN cron <> ?9 OR time_zone <> ?10 OR (paused AND NOT ?13) THEN ?15 ELSE next_fire_at END,
    cron = ?9, time_zone = ?10, paused = ?13, updated_at = ?16
WHERE name = ?1 AND owner = ?14
RETURNING ` + scheduleColumns

	sqlScheduleCreate = "-- name: schedule_create" + sqlScheduleInsert + `
RETURNING ` + scheduleColumns

	// The reconcile's write of one config-owned schedule: the template and policy always; the next
	// fire time only when the spec changed or an API-owned row is taken over (?20), so a restart
	// with an unchanged file loses no fire. The paused flag stays.
	sqlScheduleUpsert = "-- name: schedule_upsert" + sqlScheduleInsert + `
ON CONFLICT (name) DO UPDATE SET
    queue = excluded.queue, type = excluded.type, payload = excluded.payload, priority = excluded.priority,
    max_retries = excluded.max_retries, timeout_ms = excluded.timeout_ms, labels = excluded.labels,
    missed = excluded.missed, catch_up_max = excluded.catch_up_max, owner = excluded.owner,
    overlap = excluded.overlap, ttl_ms = excluded.ttl_ms, keep_result = excluded.keep_result,
    next_fire_at = CASE WHEN ?20 OR schedules.cron <> excluded.cron OR schedules.time_zone <> excluded.time_zone
                        THEN excluded.next_fire_at ELSE schedules.next_fire_at END,
    cron = excluded.cron, time_zone = excluded.time_zone, updated_at = excluded.updated_at`

	sqlScheduleGet = `-- name: schedule_get
SELECT ` + scheduleColumns + ` FROM schedules WHERE name = ?1`

	sqlScheduleList = `-- name: schedule_list
SELECT ` + scheduleColumns + ` FROM schedules ORDER BY name`

	// ?1 is a JSON array of names.
	sqlScheduleOwners = `-- name: schedule_owners
SELECT name, owner FROM schedules
WHERE owner = 'config' OR name IN (SELECT value FROM json_each(?1))
ORDER BY name`

	sqlScheduleDeleteOwned = `-- name: schedule_delete
DELETE FROM schedules WHERE name = ?1 AND owner = ?2`

	sqlScheduleOwner = `-- name: schedule_owner
SELECT owner FROM schedules WHERE name = ?1`

	sqlScheduleSetPaused = `-- name: schedule_set_paused
UPDATE schedules SET paused = ?2,
    next_fire_at = CASE WHEN ?2 THEN next_fire_at ELSE ?3 END, updated_at = ?4
WHERE name = ?1 RETURNING ` + scheduleColumns

	// The earliest unpaused fire time: the end of schedules_due_idx.
	sqlScheduleEarliest = `-- name: schedule_earliest
SELECT min(next_fire_at) FROM schedules WHERE NOT paused`

	sqlScheduleDue = `-- name: schedule_due
SELECT ` + scheduleColumns + ` FROM schedules
WHERE NOT paused AND next_fire_at <= ?1
ORDER BY next_fire_at, name
LIMIT ?2`

	// The compare-and-set on next_fire_at: of the callers that handled the same fire time, one
	// records it; the others find the row moved on and change nothing.
	sqlScheduleAdvance = `-- name: schedule_advance
UPDATE schedules SET next_fire_at = ?3,
    last_fire_at = coalesce(?4, last_fire_at),
    last_job_id  = CASE WHEN ?4 IS NULL THEN last_job_id ELSE ?5 END,
    last_outcome = CASE WHEN ?4 IS NULL THEN last_outcome ELSE ?6 END,
    last_error   = CASE WHEN ?4 IS NULL THEN last_error ELSE ?7 END,
    updated_at = ?8
WHERE name = ?1 AND next_fire_at = ?2`
)

func scheduleArgs(p store.ScheduleParams, now time.Time) []any {
	t := p.Template
	payload := t.Payload
	if payload == nil {
		payload = []byte{}
	}
	var maxRetries any
	if t.MaxRetries != nil {
		maxRetries = *t.MaxRetries
	}
	return []any{p.Name, t.Queue, t.Type, payload, t.Priority, maxRetries, toMillis(t.Timeout), mapText(t.Labels),
		p.Cron, p.TimeZone, string(p.Missed), p.CatchUpMax, p.Paused, string(p.Owner), usPtr(p.NextFireAt), us(now),
		string(p.OverlapOrDefault()), toMillis(t.TTL), t.KeepResult}
}

func scanSchedule(row scanner) (*queue.Schedule, error) {
	var (
		s queue.Schedule
		r sqlstore.ScheduleRow
	)
	err := row.Scan(&s.Name, &s.Template.Queue, &s.Template.Type, &s.Template.Payload, &s.Template.Priority,
		&s.Template.MaxRetries, &r.TimeoutMS, jsonCol{&r.Labels}, &s.Cron, &s.TimeZone, &r.Missed, &s.CatchUpMax,
		&s.Paused, &r.Owner, tm{&s.NextFireAt}, tm{&s.LastFireAt}, &s.LastJobID, &s.LastOutcome, &s.LastError,
		tm{&s.CreatedAt}, tm{&s.UpdatedAt}, &r.Overlap, &r.TTLMS, &s.Template.KeepResult)
	if err != nil {
		return nil, err
	}
	r.Into(&s)
	return &s, nil
}

// schedules reads the schedules a statement returns.
func (s *Store) schedules(ctx context.Context, q string, args ...any) ([]*queue.Schedule, error) {
	rows, err := s.query(ctx, q, args...)
	if err != nil {
		return nil, err
	}
	return collect(rows, scanSchedule)
}

// ScheduleCreate implements store.ScheduleStore.
func (s *Store) ScheduleCreate(ctx context.Context, p store.ScheduleParams) (*queue.Schedule, error) {
	var sc *queue.Schedule
	err := s.write(ctx, func(tx *wtx) error {
		var err error
		sc, err = scanSchedule(tx.queryRow(sqlScheduleCreate, scheduleArgs(p, tx.now)...))
		return err
	})
	if isUnique(err) {
		return nil, fmt.Errorf("%w: %q", queue.ErrScheduleExists, p.Name)
	}
	if err != nil {
		return nil, errs.Wrap("create schedule", err)
	}
	return sc, nil
}

// ScheduleGet implements store.ScheduleStore.
func (s *Store) ScheduleGet(ctx context.Context, name string) (*queue.Schedule, error) {
	sc, err := scanSchedule(s.queryRow(ctx, sqlScheduleGet, name))
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

// ScheduleUpdate implements store.ScheduleStore. A schedule that is not changed is told apart in
// the same write: missing, or owned by another.
func (s *Store) ScheduleUpdate(ctx context.Context, p store.ScheduleParams) (*queue.Schedule, error) {
	var (
		sc   *queue.Schedule
		miss error
	)
	err := s.write(ctx, func(tx *wtx) error {
		var err error
		sc, miss = nil, nil
		sc, err = scanSchedule(tx.queryRow(sqlScheduleUpdate, scheduleArgs(p, tx.now)...))
		if errors.Is(err, sql.ErrNoRows) {
			miss = errs.ScheduleNotOwned("update schedule", p.Name, tx.queryRow(sqlScheduleOwner, p.Name).Scan)
			return nil
		}
		return err
	})
	if err != nil {
		return nil, errs.Wrap("update schedule", err)
	}
	return sc, miss
}

// ScheduleDelete implements store.ScheduleStore. A schedule that is not deleted is told apart in
// the same write: missing, or owned by another.
func (s *Store) ScheduleDelete(ctx context.Context, p store.ScheduleDeleteParams) error {
	var miss error
	err := s.write(ctx, func(tx *wtx) error {
		miss = nil
		res, err := tx.exec(sqlScheduleDeleteOwned, p.Name, string(p.Owner))
		if err != nil {
			return err
		}
		if n, err := res.RowsAffected(); err != nil || n == 1 {
			return err
		}
		miss = errs.ScheduleNotOwned("delete schedule", p.Name, tx.queryRow(sqlScheduleOwner, p.Name).Scan)
		return nil
	})
	if err != nil {
		return errs.Wrap("delete schedule", err)
	}
	return miss
}

// ScheduleSetPaused implements store.ScheduleStore.
func (s *Store) ScheduleSetPaused(ctx context.Context, p store.ScheduleSetPausedParams) (*queue.Schedule, error) {
	var sc *queue.Schedule
	err := s.write(ctx, func(tx *wtx) error {
		var err error
		sc, err = scanSchedule(tx.queryRow(sqlScheduleSetPaused, p.Name, p.Paused, usPtr(p.NextFireAt), us(tx.now)))
		return err
	})
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
	err = s.write(ctx, func(tx *wtx) error {
		owners, err := scheduleOwners(tx, names)
		if err != nil {
			return err
		}
		res, err = sqlstore.ReconcileSchedules(p, names, owners, func(sp store.ScheduleParams, takeOver bool) error {
			_, err := tx.exec(sqlScheduleUpsert, append(scheduleArgs(sp, tx.now), takeOver)...)
			return err
		}, func(name, owner string) error {
			_, err := tx.exec(sqlScheduleDeleteOwned, name, owner)
			return err
		})
		return err
	})
	if err != nil {
		return store.ScheduleReconcileResult{}, errs.Wrap("reconcile schedules", err)
	}
	return res, nil
}

// scheduleOwners returns the owner of every config-owned schedule and of those named.
func scheduleOwners(tx *wtx, names []string) (map[string]string, error) {
	rows, err := tx.query(sqlScheduleOwners, listText(names))
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	owners := map[string]string{}
	var name, owner string
	for rows.Next() {
		if err := rows.Scan(&name, &owner); err != nil {
			return nil, err
		}
		owners[name] = owner
	}
	return owners, rows.Err()
}

// ScheduleDue implements store.ScheduleStore.
func (s *Store) ScheduleDue(ctx context.Context, limit int) (store.ScheduleDueResult, error) {
	var res store.ScheduleDueResult
	if err := sqlstore.CheckScheduleDueLimit(limit); err != nil {
		return res, err
	}
	res.Now = fromUS(us(s.now())) // as stored: microseconds
	if err := s.queryRow(ctx, sqlScheduleEarliest).Scan(tm{&res.Earliest}); err != nil {
		return res, errs.Wrap("schedule clock", err)
	}
	if res.Earliest.IsZero() || res.Earliest.After(res.Now) {
		return res, nil
	}
	var err error
	res.Due, err = s.schedules(ctx, sqlScheduleDue, us(res.Now), limit)
	return res, errs.Wrap("due schedules", err)
}

// ScheduleAdvance implements store.ScheduleStore.
func (s *Store) ScheduleAdvance(ctx context.Context, p store.ScheduleAdvanceParams) (bool, error) {
	var advanced bool
	err := s.write(ctx, func(tx *wtx) error {
		var err error
		advanced, err = advanceSchedule(tx, p)
		return err
	})
	if err != nil {
		return false, errs.Wrap("advance schedule", err)
	}
	return advanced, nil
}

// advanceSchedule runs the compare-and-set of sqlScheduleAdvance and reports whether it matched.
func advanceSchedule(tx *wtx, p store.ScheduleAdvanceParams) (bool, error) {
	var jobID any
	if p.LastJobID != "" {
		jobID = p.LastJobID
	}
	res, err := tx.exec(sqlScheduleAdvance, p.Name, us(p.From), usPtr(p.Next), usPtr(p.LastFireAt), jobID,
		p.LastOutcome, p.LastError, us(tx.now))
	if err != nil {
		return false, err
	}
	n, err := res.RowsAffected()
	return n == 1, err
}

// sqlScheduleStillDue: the schedule is still due as the fire loop read it (not deleted, paused or
// advanced meanwhile).
const sqlScheduleStillDue = `-- name: schedule_still_due
SELECT count(*) FROM schedules WHERE name = ?1 AND next_fire_at = ?2 AND NOT paused`

// ScheduleFire implements store.ScheduleStore: one write of the writer, so a delete or pause is
// either before it (nothing fires) or after it.
func (s *Store) ScheduleFire(ctx context.Context, ps []store.ScheduleFireParams) ([]store.ScheduleFireResult, error) {
	if len(ps) == 0 {
		return nil, nil
	}
	all, err := store.ValidateScheduleFire(ps)
	if err != nil {
		return nil, err
	}
	allIDs, err := newJobIDs(all)
	if err != nil {
		return nil, err
	}
	var out []store.ScheduleFireResult
	err = s.write(ctx, func(tx *wtx) error {
		due := make([]bool, len(ps))
		var jobs []store.JobInsertParams
		var ids []string
		off := 0
		for i, p := range ps {
			var n int
			if err := tx.queryRow(sqlScheduleStillDue, p.Name, us(p.From)).Scan(&n); err != nil {
				return err
			}
			if due[i] = n == 1; due[i] {
				jobs = append(jobs, p.Jobs...)
				ids = append(ids, allIDs[off:off+len(p.Jobs)]...)
			}
			off += len(p.Jobs)
		}
		var res []store.JobInsertResult
		if len(jobs) > 0 {
			var err error
			if res, err = insertJobs(tx, jobs, ids); err != nil {
				return err
			}
		}
		var advanced []store.ScheduleAdvanceParams
		out, advanced = sqlstore.ScheduleFireResults(ps, func(i int) bool { return due[i] }, res)
		for _, a := range advanced {
			if _, err := advanceSchedule(tx, a); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return nil, errs.WrapExcept("fire schedules", err, sqlstore.ScheduleFireKeep...)
	}
	return out, nil
}
