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

var _ store.ConstraintStore = (*Store)(nil)

// Constraints (store.ConstraintStore), as store/postgres/constraints.go. The one writer serializes
// every write, so a constrained claim needs no lock: its reads of the constraints, the running
// jobs and the buckets, the limiter's decisions and their writes are one write of the writer.
const (
	constraintColumns = `name, match_queue, match_type, match_labels, key_template, concurrency,
		rate_limit, rate_interval_ms, rate_burst, created_at, updated_at`

	sqlConstraintGet = `SELECT ` + constraintColumns + ` FROM constraints WHERE name = ?1`

	sqlConstraintCount = `SELECT count(*) FROM constraints`

	sqlConstraintInsert = `
INSERT INTO constraints (name, match_queue, match_type, match_labels, key_template, concurrency,
                         rate_limit, rate_interval_ms, rate_burst, created_at, updated_at)
VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?10)
RETURNING ` + constraintColumns

	sqlConstraintUpdate = `
UPDATE constraints SET match_queue = ?2, match_type = ?3, match_labels = ?4, key_template = ?5,
    concurrency = ?6, rate_limit = ?7, rate_interval_ms = ?8, rate_burst = ?9, updated_at = ?10
WHERE name = ?1
RETURNING ` + constraintColumns

	sqlConstraintDelete        = `DELETE FROM constraints WHERE name = ?1`
	sqlConstraintBucketsDelete = `DELETE FROM constraint_buckets WHERE constraint_name = ?1`
	sqlConstraintGenBump       = `UPDATE constraint_generation SET gen = gen + 1 WHERE only_row = 1`
	sqlConstraintGen           = `SELECT gen FROM constraint_generation WHERE only_row = 1`

	sqlConstraintAll = `SELECT ` + constraintColumns + ` FROM constraints ORDER BY name`

	// The jobs running per entry of the constraints named in ?1 (a JSON array): jobs_limited_idx
	// holds exactly the ASSIGNED and RUNNING jobs with entries, and covers the statement.
	sqlConstraintRunning = `
SELECT e.value, count(*)
FROM jobs j, json_each(j.limit_keys) e
WHERE j.state IN ('ASSIGNED', 'RUNNING') AND j.limit_keys IS NOT NULL
  AND substr(e.value, 1, instr(e.value, ':') - 1) IN (SELECT value FROM json_each(?1))
GROUP BY e.value`

	// The rate buckets of constraint ?1 touched after ?2: a bucket untouched for its refill time
	// is full, the same as no row (as in Postgres).
	sqlConstraintBuckets = `
SELECT key, tokens, at FROM constraint_buckets WHERE constraint_name = ?1 AND at > ?2`

	sqlConstraintBucketOf = `
SELECT tokens, at FROM constraint_buckets WHERE constraint_name = ?1 AND key = ?2`

	sqlConstraintBucketUpsert = `
INSERT INTO constraint_buckets (constraint_name, key, tokens, at) VALUES (?1, ?2, ?3, ?4)
ON CONFLICT (constraint_name, key) DO UPDATE SET tokens = excluded.tokens, at = excluded.at`

	// A candidate's entries computed at generation ?3, for the claims that follow to pass over it
	// while its keys are blocked. Not a change of the job: updated_at stays.
	sqlJobSetLimitKeys = `UPDATE jobs SET limit_keys = ?2, limit_gen = ?3 WHERE id = ?1 AND state = 'PENDING'`

	// sqlJobAssign with the job's entries.
	sqlJobAssignLimited = sqlAssignSet + `
    worker_id  = ?2,
    updated_at = ?3,
    limit_keys = ?4,
    limit_gen  = ?5
WHERE id = ?1 AND state = 'PENDING'
  AND NOT EXISTS (SELECT 1 FROM queues q WHERE q.name = jobs.queue AND q.paused)
RETURNING ` + jobColumns + `, event_seq`

	// sqlJobAssign for the jobs ?1 (a JSON array of ids) whose entries are stored: they are kept.
	sqlJobAssignKeyed = sqlAssignSet + `
    worker_id  = ?2,
    updated_at = ?3
WHERE id IN (SELECT value FROM json_each(?1)) AND state = 'PENDING'
  AND NOT EXISTS (SELECT 1 FROM queues q WHERE q.name = jobs.queue AND q.paused)
RETURNING ` + jobColumns + `, event_seq`

	// The running jobs per key of one constraint (?1: its name and a colon).
	sqlConstraintKeyUsage = `
SELECT substr(e.value, length(?1) + 1), count(*)
FROM jobs j, json_each(j.limit_keys) e
WHERE j.state IN ('ASSIGNED', 'RUNNING') AND j.limit_keys IS NOT NULL
  AND substr(e.value, 1, length(?1)) = ?1
GROUP BY e.value`

	sqlConstraintKeyBuckets = `
SELECT key, tokens, at FROM constraint_buckets
WHERE constraint_name = ?1 AND key IN (SELECT value FROM json_each(?2))`
)

// A constrained claim's candidates of one step: the step's due jobs of the queue in its order (as
// sqlJobClaimAged, sqlJobClaimLevel and sqlJobClaimRest), except the ids already seen (?5) and the
// jobs whose entries, computed at the current generation (?7), include a blocked one (?6).
const (
	// ?5 and ?6 of '[]' (the first round, a constraint that does not bind) cost nothing per row:
	// the constant comparison comes first. A job with one entry (nearly all) is compared as it is
	// stored, its JSON text against the blocked entries' one-element arrays (?9, built by
	// blockedSingles with the encoding that stored them): no JSON decoded per row. Only a job with
	// several entries ('","' appears in its text only between entries) has them decoded. Every
	// term is false, never NULL, for a job without entries: NOT of a NULL would drop it.
	sqlCandidatePast = `
  AND (?5 = '[]' OR id NOT IN (SELECT value FROM json_each(?5)))
  AND NOT (?6 <> '[]' AND limit_gen IS NOT NULL AND limit_gen = ?7 AND limit_keys IS NOT NULL
           AND (limit_keys IN (SELECT value FROM json_each(?9))
                OR (instr(limit_keys, '","') > 0
                    AND EXISTS (SELECT 1 FROM json_each(jobs.limit_keys) k WHERE k.value IN (SELECT value FROM json_each(?6))))))`
	sqlCandidateAged = sqlDueFrom + sqlClaimTypes + sqlCandidatePast + `
  AND created_at <= ?8 AND not_before <= ?8
ORDER BY max(created_at, not_before), created_at, id
LIMIT ?3`
	sqlCandidateLevel = sqlDueFrom + sqlClaimTypes + sqlCandidatePast + `
  AND priority = ?8` + sqlDueOrder
	sqlCandidateRest = sqlDueFrom + sqlClaimTypes + sqlCandidatePast + sqlDueOrder
)

// candidateSelect is the columns of a candidate; the payload only when a key reads it.
func candidateSelect(payload bool) string {
	p := "NULL"
	if payload {
		p = "payload"
	}
	return `SELECT id, queue, type, labels, ` + p + `, limit_gen, limit_keys`
}

// ConstraintCreate implements store.ConstraintStore.
func (s *Store) ConstraintCreate(ctx context.Context, p store.ConstraintCreateParams) (*queue.Constraint, error) {
	c := p.Constraint
	var out *queue.Constraint
	err := s.write(ctx, func(tx *wtx) error {
		old, err := scanConstraint(tx.queryRow(sqlConstraintGet, c.Name))
		switch {
		case errors.Is(err, sql.ErrNoRows):
			old = nil
		case err != nil:
			return err
		case !p.Replace:
			return fmt.Errorf("%w: %s", queue.ErrConstraintExists, c.Name)
		}
		args := []any{c.Name, c.Match.Queue, c.Match.Type, mapText(c.Match.Labels), c.Key, c.Concurrency,
			c.Rate.Limit, c.Rate.Interval.Milliseconds(), c.Rate.Burst, us(tx.now)}
		if old == nil {
			var n int
			if err := tx.queryRow(sqlConstraintCount).Scan(&n); err != nil {
				return err
			}
			if n >= queue.MaxConstraints {
				return fmt.Errorf("%w: at most %d constraints", queue.ErrLimitReached, queue.MaxConstraints)
			}
			out, err = scanConstraint(tx.queryRow(sqlConstraintInsert, args...))
		} else {
			out, err = scanConstraint(tx.queryRow(sqlConstraintUpdate, args...))
			if err == nil && out.Rate != old.Rate {
				_, err = tx.exec(sqlConstraintBucketsDelete, c.Name)
			}
		}
		if err != nil {
			return err
		}
		_, err = tx.exec(sqlConstraintGenBump)
		return err
	})
	if err != nil {
		return nil, errs.Wrap("create constraint", err)
	}
	return out, nil
}

// ConstraintGet implements store.ConstraintStore.
func (s *Store) ConstraintGet(ctx context.Context, name string) (*queue.Constraint, error) {
	c, err := scanConstraint(s.queryRow(ctx, sqlConstraintGet, name))
	if errors.Is(err, sql.ErrNoRows) {
		return nil, fmt.Errorf("%w: %s", queue.ErrConstraintNotFound, queue.Excerpt(name))
	}
	if err != nil {
		return nil, errs.Wrap("get constraint", err)
	}
	return c, nil
}

// ConstraintSet implements store.ConstraintStore. The generation and the constraints are read in
// one read transaction: one snapshot.
func (s *Store) ConstraintSet(ctx context.Context) (*queue.ConstraintSet, error) {
	tx, err := s.rdb.BeginTx(ctx, nil)
	if err != nil {
		return nil, errs.Wrap("constraint set", err)
	}
	defer func() { _ = tx.Rollback() }()
	set := &queue.ConstraintSet{}
	if err := tx.QueryRowContext(ctx, sqlConstraintGen).Scan(&set.Gen); err != nil {
		return nil, errs.Wrap("constraint set", err)
	}
	rows, err := tx.QueryContext(ctx, sqlConstraintAll)
	if err != nil {
		return nil, errs.Wrap("constraint set", err)
	}
	if set.Constraints, err = scanConstraints(rows); err != nil {
		return nil, errs.Wrap("constraint set", err)
	}
	return set, nil
}

// ConstraintDelete implements store.ConstraintStore.
func (s *Store) ConstraintDelete(ctx context.Context, name string) error {
	err := s.write(ctx, func(tx *wtx) error {
		res, err := tx.exec(sqlConstraintDelete, name)
		if err != nil {
			return err
		}
		if n, err := res.RowsAffected(); err != nil {
			return err
		} else if n == 0 {
			return fmt.Errorf("%w: %s", queue.ErrConstraintNotFound, queue.Excerpt(name))
		}
		if _, err := tx.exec(sqlConstraintBucketsDelete, name); err != nil {
			return err
		}
		_, err = tx.exec(sqlConstraintGenBump)
		return err
	})
	if err != nil {
		return errs.Wrap("delete constraint", err)
	}
	return nil
}

// ConstraintUsage implements store.ConstraintStore.
func (s *Store) ConstraintUsage(ctx context.Context, p store.ConstraintUsageParams) (*queue.ConstraintUsage, error) {
	c, err := s.ConstraintGet(ctx, p.Name)
	if err != nil {
		return nil, err
	}
	rows, err := s.query(ctx, sqlConstraintKeyUsage, queue.LimitEntry(c.Name, ""))
	if err != nil {
		return nil, errs.Wrap("constraint usage", err)
	}
	defer rows.Close()
	running := map[string]int{}
	for rows.Next() {
		var key string
		var n int
		if err := rows.Scan(&key, &n); err != nil {
			return nil, errs.Wrap("constraint usage", err)
		}
		running[key] = n
	}
	if err := rows.Err(); err != nil {
		return nil, errs.Wrap("constraint usage", err)
	}
	active := map[string]queue.Bucket{}
	if !c.Rate.IsZero() {
		if err := s.activeBuckets(ctx, c, active); err != nil {
			return nil, errs.Wrap("constraint usage", err)
		}
	}
	keys := sqlstore.UsageKeys(p, running, active)
	buckets := map[string]queue.Bucket{}
	if !c.Rate.IsZero() && len(keys) > 0 {
		brows, err := s.query(ctx, sqlConstraintKeyBuckets, c.Name, listText(keys))
		if err != nil {
			return nil, errs.Wrap("constraint usage", err)
		}
		defer brows.Close()
		for brows.Next() {
			var key string
			var b queue.Bucket
			if err := brows.Scan(&key, &b.Tokens, tm{&b.At}); err != nil {
				return nil, errs.Wrap("constraint usage", err)
			}
			buckets[key] = b
		}
		if err := brows.Err(); err != nil {
			return nil, errs.Wrap("constraint usage", err)
		}
	}
	return sqlstore.Usage(c, running, active, keys, buckets, s.now()), nil
}

// JobClaimConstrained implements store.ConstraintStore: one write reads the constraint set, the
// running jobs and the rate buckets, runs sqlstore.ConstrainedSteps and writes what the limiter
// decided. A queue no constraint applies to is claimed as JobClaim claims it.
func (s *Store) JobClaimConstrained(ctx context.Context, p store.JobClaimParams) (*store.ConstrainedClaim, error) {
	var out *store.ConstrainedClaim
	err := s.write(ctx, func(tx *wtx) (err error) {
		out, err = claimConstrained(tx, p)
		return err
	})
	if err != nil {
		return nil, errs.Wrap("constrained claim", err)
	}
	return out, nil
}

func claimConstrained(tx *wtx, p store.JobClaimParams) (*store.ConstrainedClaim, error) {
	set, err := readConstraintSet(tx)
	if err != nil {
		return nil, err
	}
	out := &store.ConstrainedClaim{Gen: set.Gen}
	applicable := set.For(p.Queue)
	if len(applicable) == 0 {
		if p.Weighted() {
			out.Jobs, err = claimWeighted(tx, p)
		} else {
			out.Jobs, err = claimPlain(tx, p)
		}
		return out, err
	}
	names := make([]string, len(applicable))
	for i, c := range applicable {
		names[i] = c.Name
	}
	running, err := readRunning(tx, names)
	if err != nil {
		return nil, err
	}
	buckets, err := readBuckets(tx, applicable)
	if err != nil {
		return nil, err
	}
	l := queue.NewLimiter(applicable, running, buckets, tx.now)
	now := us(tx.now)
	payload := queue.NeedsPayload(applicable)
	types := listText(p.Types)
	fetch := func(st sqlstore.ClaimStep, blocked, seen []string, n int) ([]sqlstore.ClaimCandidate, error) {
		args := []any{p.Queue, now, n, types, listText(seen), listText(blocked), set.Gen, nil, blockedSingles(blocked)}
		q := sqlCandidateRest
		switch st.Kind {
		case sqlstore.ClaimAged:
			q, args[7] = sqlCandidateAged, us(tx.now.Add(-p.MaxWait))
		case sqlstore.ClaimLevel:
			q, args[7] = sqlCandidateLevel, st.Priority
		}
		rows, err := tx.query(candidateSelect(payload)+q, args...)
		if err != nil {
			return nil, err
		}
		return scanCandidates(rows, set.Gen)
	}
	taken, keyed, err := sqlstore.ConstrainedSteps(p, l, fetch, func(entries []string) (map[string]queue.Bucket, error) {
		return loadBuckets(tx, entries)
	})
	if err != nil {
		return nil, err
	}
	for _, c := range keyed {
		if _, err := tx.exec(sqlJobSetLimitKeys, c.ID, entriesText(c.Entries), set.Gen); err != nil {
			return nil, err
		}
	}
	// The jobs read with their entries (nearly all: keyed at submit) are assigned by one
	// statement, their entries kept; those whose entries the claim computed, one by one.
	var stored []string
	for _, c := range taken {
		if !c.Computed {
			stored = append(stored, c.ID)
		}
	}
	byID := map[string]*queue.Job{}
	seqs := map[string]int64{}
	if len(stored) > 0 {
		rows, err := tx.query(sqlJobAssignKeyed, listText(stored), p.WorkerID, now)
		if err != nil {
			return nil, err
		}
		jobs, ss, err := scanAssigned(rows)
		if err != nil {
			return nil, err
		}
		for i, j := range jobs {
			byID[j.ID], seqs[j.ID] = j, ss[i]
		}
	}
	for _, c := range taken {
		if !c.Computed {
			continue
		}
		var seq int64
		j, err := scanJob(tx.queryRow(sqlJobAssignLimited, c.ID, p.WorkerID, now, entriesText(c.Entries), set.Gen), &seq)
		if errors.Is(err, sql.ErrNoRows) {
			continue // cannot happen: the write read it PENDING and nothing ran since
		}
		if err != nil {
			return nil, err
		}
		byID[j.ID], seqs[j.ID] = j, seq
	}
	for _, c := range taken { // the order taken
		j := byID[c.ID]
		if j == nil {
			continue
		}
		if err := leaseEvent(tx, j, seqs[j.ID], queue.StatePending, queue.ReasonAssigned, "", now, nil); err != nil {
			return nil, err
		}
		out.Jobs = append(out.Jobs, j)
	}
	for e, b := range l.Buckets() {
		name, key := queue.SplitLimitEntry(e)
		if _, err := tx.exec(sqlConstraintBucketUpsert, name, key, b.Tokens, us(b.At)); err != nil {
			return nil, err
		}
	}
	out.Throttled, out.RetryAt = l.Throttled(), l.RetryAt()
	return out, nil
}

// blockedSingles is, for the blocked entries, the stored text of a job whose only entry each is
// (entriesText of one entry), as a JSON array: sqlCandidatePast's ?9.
func blockedSingles(blocked []string) string {
	singles := make([]string, len(blocked))
	for i, e := range blocked {
		singles[i] = jsonText([]string{e})
	}
	return listText(singles)
}

// entriesText is a job's entries as stored: a JSON array, NULL for none.
func entriesText(entries []string) any {
	if len(entries) == 0 {
		return nil
	}
	return jsonText(entries)
}

func readConstraintSet(tx *wtx) (*queue.ConstraintSet, error) {
	set := &queue.ConstraintSet{}
	if err := tx.queryRow(sqlConstraintGen).Scan(&set.Gen); err != nil {
		return nil, err
	}
	rows, err := tx.query(sqlConstraintAll)
	if err != nil {
		return nil, err
	}
	set.Constraints, err = scanConstraints(rows)
	return set, err
}

// scanConstraints reads constraintColumns rows and closes rows.
func scanConstraints(rows *sql.Rows) ([]*queue.Constraint, error) {
	defer rows.Close()
	var out []*queue.Constraint
	for rows.Next() {
		c, err := scanConstraint(rows)
		if err != nil {
			return nil, err
		}
		out = append(out, c)
	}
	return out, rows.Err()
}

func readRunning(tx *wtx, names []string) (map[string]int, error) {
	rows, err := tx.query(sqlConstraintRunning, listText(names))
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	running := map[string]int{}
	for rows.Next() {
		var e string
		var n int
		if err := rows.Scan(&e, &n); err != nil {
			return nil, err
		}
		running[e] = n
	}
	return running, rows.Err()
}

// readBuckets reads the rate buckets of the constraints cs with a rate that are not full yet.
func readBuckets(tx *wtx, cs []*queue.Constraint) (map[string]queue.Bucket, error) {
	buckets := map[string]queue.Bucket{}
	for _, c := range cs {
		if c.Rate.IsZero() {
			continue
		}
		if err := readBucketsOf(tx, c, buckets); err != nil {
			return nil, err
		}
	}
	return buckets, nil
}

// activeBuckets adds constraint c's buckets touched within its refill time to active, by key.
func (s *Store) activeBuckets(ctx context.Context, c *queue.Constraint, active map[string]queue.Bucket) error {
	rows, err := s.query(ctx, sqlConstraintBuckets, c.Name, us(s.now().Add(-c.Rate.Refill())))
	if err != nil {
		return err
	}
	defer rows.Close()
	for rows.Next() {
		var key string
		var b queue.Bucket
		if err := rows.Scan(&key, &b.Tokens, tm{&b.At}); err != nil {
			return err
		}
		active[key] = b
	}
	return rows.Err()
}

// readBucketsOf adds constraint c's buckets written within one token's time to buckets: the only
// ones that can be out of tokens (over constraint_buckets_at_idx). The claim reads the others of
// its candidates' keys when it meets them (loadBuckets).
func readBucketsOf(tx *wtx, c *queue.Constraint, buckets map[string]queue.Bucket) error {
	rows, err := tx.query(sqlConstraintBuckets, c.Name, us(tx.now.Add(-c.Rate.TokenTime()-time.Millisecond)))
	if err != nil {
		return err
	}
	defer rows.Close()
	for rows.Next() {
		var key string
		var b queue.Bucket
		if err := rows.Scan(&key, &b.Tokens, tm{&b.At}); err != nil {
			return err
		}
		buckets[queue.LimitEntry(c.Name, key)] = b
	}
	return rows.Err()
}

// loadBuckets reads the stored buckets of entries, by primary key.
func loadBuckets(tx *wtx, entries []string) (map[string]queue.Bucket, error) {
	out := map[string]queue.Bucket{}
	for _, e := range entries {
		name, key := queue.SplitLimitEntry(e)
		var b queue.Bucket
		err := tx.queryRow(sqlConstraintBucketOf, name, key).Scan(&b.Tokens, tm{&b.At})
		if errors.Is(err, sql.ErrNoRows) {
			continue
		}
		if err != nil {
			return nil, err
		}
		out[e] = b
	}
	return out, nil
}

// scanCandidates reads candidateSelect's rows and closes rows.
func scanCandidates(rows *sql.Rows, gen int64) ([]sqlstore.ClaimCandidate, error) {
	defer rows.Close()
	var out []sqlstore.ClaimCandidate
	for rows.Next() {
		var (
			c         sqlstore.ClaimCandidate
			j         queue.Job
			labels    map[string]string
			payload   []byte
			limitGen  sql.NullInt64
			limitKeys sql.NullString
		)
		if err := rows.Scan(&c.ID, &j.Queue, &j.Type, jsonCol{&labels}, blob{&payload}, &limitGen, &limitKeys); err != nil {
			return nil, err
		}
		if limitGen.Valid && limitGen.Int64 == gen {
			c.Keyed = true
			if limitKeys.Valid {
				if err := (jsonCol{&c.Entries}).Scan(limitKeys.String); err != nil {
					return nil, err
				}
			}
		} else {
			j.ID, j.Labels, j.Payload = c.ID, labels, payload
			c.Job = &j
		}
		out = append(out, c)
	}
	return out, rows.Err()
}

func scanConstraint(row scanner) (*queue.Constraint, error) {
	var (
		c          queue.Constraint
		intervalMS int64
		labels     map[string]string
	)
	err := row.Scan(&c.Name, &c.Match.Queue, &c.Match.Type, jsonCol{&labels}, &c.Key, &c.Concurrency,
		&c.Rate.Limit, &intervalMS, &c.Rate.Burst, tm{&c.CreatedAt}, tm{&c.UpdatedAt})
	if err != nil {
		return nil, err
	}
	c.Rate.Interval = fromMillis(intervalMS)
	if len(labels) > 0 {
		c.Match.Labels = labels
	}
	return &c, nil
}

// The buckets refilled to full: ?1 is a JSON object of constraint name → the microsecond before
// which a bucket last written is full; at most ?2.
const sqlConstraintBucketsPrune = `-- name: constraint_buckets_prune
DELETE FROM constraint_buckets WHERE (constraint_name, key) IN (
    SELECT b.constraint_name, b.key
    FROM json_each(?1) AS r
    JOIN constraint_buckets b ON b.constraint_name = r.key
    WHERE b.at <= r.value
    LIMIT ?2)`

// ConstraintBucketsPrune implements store.ConstraintStore.
func (s *Store) ConstraintBucketsPrune(ctx context.Context, p store.ConstraintBucketsPruneParams) (int64, error) {
	if len(p.Refill) == 0 {
		return 0, nil
	}
	var n int64
	err := s.write(ctx, func(tx *wtx) error {
		before := make(map[string]int64, len(p.Refill))
		for name, d := range p.Refill {
			before[name] = us(tx.now.Add(-d))
		}
		res, err := tx.exec(sqlConstraintBucketsPrune, jsonText(before), p.Limit)
		if err != nil {
			return err
		}
		n, err = res.RowsAffected()
		return err
	})
	if err != nil {
		return 0, errs.Wrap("prune constraint buckets", err)
	}
	return n, nil
}
