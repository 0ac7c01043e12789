package postgres

import (
	"context"
	"errors"
	"fmt"
	"hash/fnv"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgtype"

	"github.com/jq-dev/jq/queue"
	"github.com/jq-dev/jq/store"
	"github.com/jq-dev/jq/store/internal/sqlstore"
)

var _ store.ConstraintStore = (*Store)(nil)

// Constraints (store.ConstraintStore, migration 000019, docs/flow-control.md).
//
// Locks: the constraint set is guarded by a transaction-scoped advisory lock (constraintLockClass,
// 0): a constrained claim holds it shared while it reads the set and decides, a change holds it
// exclusive, so a claim decides with one version of the set and a change waits for the claims
// deciding with the old one. Each constraint has its own lock (constraintLockClass, a hash of its
// name), held exclusive by a claim for the constraints that apply to its queue, taken in the
// order of the hashes: claims that share a constraint — on any replica — read the jobs running
// under it and assign theirs one after the other, so two claims never both see the last free slot.
// Claims of queues that share no constraint do not wait for each other; the plain claim of a queue
// no constraint applies to takes no lock at all.
// constraintLockClass is the first key of every advisory lock of constraints (0x6a71, "jq").
const constraintLockClass = "27249"

var (
	constraintColumns = `name, match_queue, match_type, match_labels, key_template, concurrency,
		rate_limit, rate_interval_ms, rate_burst, created_at, updated_at`

	sqlConstraintLockSet = `-- name: constraint_lock_set
SELECT pg_advisory_xact_lock_shared(` + constraintLockClass + `, 0)`

	// Read after the lock is held (a statement of its own: its snapshot is taken once the lock is
	// held). The time is the store's clock now, not the transaction's start, so that buckets
	// written by claims one after the other move forward.
	sqlConstraintClock = `-- name: constraint_clock
SELECT clock_timestamp(), gen FROM constraint_generation`

	sqlConstraintLockSetExclusive = `-- name: constraint_lock_set_exclusive
SELECT pg_advisory_xact_lock(` + constraintLockClass + `, 0)`

	// The locks of the constraints a claim applies, in the order given (sorted by the caller):
	// OFFSET 0 keeps the subquery's order for the aggregate that calls the function.
	sqlConstraintLockEach = `-- name: constraint_lock_each
SELECT count(pg_advisory_xact_lock(` + constraintLockClass + `, k)) FROM (SELECT k FROM unnest($1::int[]) WITH ORDINALITY AS t(k, o) ORDER BY o OFFSET 0) s`

	sqlConstraintList = `-- name: constraint_list
SELECT ` + constraintColumns + ` FROM constraints ORDER BY name`

	sqlConstraintGet = `-- name: constraint_get
SELECT ` + constraintColumns + ` FROM constraints WHERE name = $1`

	sqlConstraintGen = `-- name: constraint_gen
SELECT gen FROM constraint_generation`

	sqlConstraintBump = `-- name: constraint_bump
UPDATE constraint_generation SET gen = gen + 1`

	sqlConstraintCount = `-- name: constraint_count
SELECT count(*) FROM constraints`

	sqlConstraintInsert = `-- name: constraint_insert
INSERT INTO constraints (name, match_queue, match_type, match_labels, key_template, concurrency,
                         rate_limit, rate_interval_ms, rate_burst)
VALUES ($1, $2, $3, $4::jsonb, $5, $6, $7, $8, $9)
RETURNING ` + constraintColumns

	sqlConstraintReplace = `-- name: constraint_replace
UPDATE constraints SET match_queue = $2, match_type = $3, match_labels = $4::jsonb, key_template = $5,
    concurrency = $6, rate_limit = $7, rate_interval_ms = $8, rate_burst = $9, updated_at = now()
WHERE name = $1
RETURNING ` + constraintColumns

	sqlConstraintDropBuckets = `-- name: constraint_drop_buckets
DELETE FROM constraint_buckets WHERE constraint_name = $1`

	sqlConstraintDelete = `-- name: constraint_delete
DELETE FROM constraints WHERE name = $1`

	// The jobs running under the given constraints, per entry (jobs_limited_idx holds exactly the
	// ASSIGNED and RUNNING jobs that have entries), and the store's clock read after them: a job
	// that left its slot before the read is not counted, and left it before that time, so the
	// assignments stamped with it never overlap it in the event log.
	sqlConstraintRunning = `-- name: constraint_running
SELECT clock_timestamp(), coalesce(array_agg(e), '{}'), coalesce(array_agg(n), '{}')
FROM (
    SELECT e, count(*)::int AS n
    FROM jobs j CROSS JOIN LATERAL unnest(j.limit_keys) e
    WHERE j.state IN ('ASSIGNED', 'RUNNING') AND j.limit_keys IS NOT NULL
      AND split_part(e, ':', 1) = ANY($1::text[])
    GROUP BY e
) r`

	// The rate buckets of the given constraints written within one token's time ($2, ms), over
	// constraint_buckets_at_idx: the only ones that can be out of tokens, which the claim must know
	// to pass over their keys' jobs. An older one holds a token at least; the claim reads those of
	// its candidates' keys when it meets them (sqlConstraintBucketsOfEntries).
	sqlConstraintBuckets = `-- name: constraint_buckets
SELECT b.constraint_name, b.key, b.tokens, b.at
FROM unnest($1::text[], $2::bigint[]) AS r(name, token_ms)
JOIN constraint_buckets b ON b.constraint_name = r.name
WHERE b.at > now() - r.token_ms * interval '1 millisecond'`

	// The stored buckets of some entries ($1 constraint names, $2 keys), by primary key.
	sqlConstraintBucketsOfEntries = `-- name: constraint_buckets_of_entries
SELECT b.constraint_name, b.key, b.tokens, b.at
FROM unnest($1::text[], $2::text[]) AS e(name, key)
JOIN constraint_buckets b ON b.constraint_name = e.name AND b.key = e.key`

	sqlConstraintBucketsActive = `-- name: constraint_buckets_active
SELECT key, tokens, at FROM constraint_buckets
WHERE constraint_name = $1 AND at > now() - $2::bigint * interval '1 millisecond'`

	sqlConstraintBucketsOf = `-- name: constraint_buckets_of
SELECT key, tokens, at FROM constraint_buckets WHERE constraint_name = $1 AND key = ANY($2::text[])`

	sqlConstraintSaveBuckets = `-- name: constraint_save_buckets
INSERT INTO constraint_buckets (constraint_name, key, tokens, at)
SELECT * FROM unnest($1::text[], $2::text[], $3::float8[], $4::timestamptz[])
ON CONFLICT (constraint_name, key) DO UPDATE SET tokens = EXCLUDED.tokens, at = EXCLUDED.at`

	// The entries of jobs the claim read and did not take, by the ctid of the version it locked
	// (a TID scan; the lock keeps that version the newest). $2 is each job's entries joined by
	// queue.EntrySeparator ('': none, stored as NULL).
	sqlConstraintKeyJobs = `-- name: constraint_key_jobs
UPDATE jobs SET
    limit_keys = CASE WHEN k.keys <> '' THEN string_to_array(k.keys, E'\x1e') END,
    limit_gen  = $3
FROM unnest($1::tid[], $2::text[]) AS k(ctid, keys)
WHERE jobs.ctid = k.ctid`

	// The assignment of a constrained claim: sqlJobClaim's write for the jobs the claim admitted,
	// by the ctid of the version it locked, with their entries — kept as stored when the claim read
	// them at the current generation (i_keys NULL), else the ones it computed — which count from now
	// on against the concurrency of their keys. The time is the claim's clock ($5).
	sqlConstraintAssign = `-- name: constraint_assign
WITH input AS (
    SELECT * FROM unnest($2::tid[], $3::text[]) WITH ORDINALITY AS t(i_ctid, i_keys, i_ord)
),
updated AS (
    UPDATE jobs SET
        state      = 'ASSIGNED',
        attempt    = attempt + 1,
        worker_id  = $1,
        event_seq  = event_seq + 1,
        ev         = coalesce(ev, '{0}') || pg_current_xact_id(),
        updated_at = $5,
        limit_keys = CASE WHEN i_keys IS NULL THEN limit_keys
                          WHEN i_keys <> '' THEN string_to_array(i_keys, E'\x1e') END,
        limit_gen  = $4
    FROM input
    WHERE jobs.ctid = i_ctid AND state = 'PENDING'
    RETURNING i_ord, event_seq, ` + jobColumns + `
),
` + sqlAssignedEvents + `
SELECT ` + jobColumns + ` FROM updated ORDER BY i_ord`

	sqlConstraintUsage = `-- name: constraint_usage
SELECT substr(e, length($1) + 2), count(*)::int
FROM jobs j CROSS JOIN LATERAL unnest(j.limit_keys) e
WHERE j.state IN ('ASSIGNED', 'RUNNING') AND j.limit_keys IS NOT NULL
  AND split_part(e, ':', 1) = $1
GROUP BY 1`
)

// sqlConstraintCandidates is a constrained claim's read of one round: the due PENDING jobs of the
// queue in the step's order, locked (SKIP LOCKED, as the plain claim), past the ids already seen and
// the jobs whose entries (of the current generation, $4) include a blocked one ($5). A job keyed at
// another generation comes with what its entries are computed from: type, labels, and the payload
// when a key reads it ($6).
func sqlConstraintCandidates(name, filter, order string) string {
	return `-- name: ` + name + `
SELECT j.ctid, j.id::text, j.limit_gen IS NOT DISTINCT FROM $4 AS keyed, j.limit_keys, j.type,
       CASE WHEN j.limit_gen IS DISTINCT FROM $4 THEN j.labels END,
       CASE WHEN $6 AND j.limit_gen IS DISTINCT FROM $4 THEN j.payload END
FROM jobs j
WHERE j.queue = $1 AND j.state = 'PENDING' AND j.not_before <= now()
  AND (cardinality($2::text[]) = 0 OR j.type = ANY($2::text[]))
  AND NOT EXISTS (SELECT 1 FROM queues WHERE name = $1 AND paused)
  AND j.id <> ALL($3::uuid[])
  AND (j.limit_gen IS DISTINCT FROM $4 OR j.limit_keys IS NULL OR NOT j.limit_keys && $5::text[])
  ` + filter + `
ORDER BY ` + order + `
LIMIT $7
FOR NO KEY UPDATE SKIP LOCKED`
}

var (
	sqlConstraintCandidatesRest = sqlConstraintCandidates("constraint_candidates",
		"AND $8::bigint IS NULL", "j.priority DESC, j.created_at, j.id")
	sqlConstraintCandidatesLevel = sqlConstraintCandidates("constraint_candidates_level",
		"AND j.priority = $8::bigint", "j.priority DESC, j.created_at, j.id")
	sqlConstraintCandidatesAged = sqlConstraintCandidates("constraint_candidates_aged",
		`AND j.created_at <= now() - $8::bigint * interval '1 microsecond'
  AND j.not_before <= now() - $8::bigint * interval '1 microsecond'`,
		"greatest(j.created_at, j.not_before), j.created_at, j.id")
)

func scanConstraint(row pgx.Row) (*queue.Constraint, error) {
	var (
		c          queue.Constraint
		labels     map[string]string
		intervalMS int64
	)
	if err := row.Scan(&c.Name, &c.Match.Queue, &c.Match.Type, &labels, &c.Key, &c.Concurrency,
		&c.Rate.Limit, &intervalMS, &c.Rate.Burst, &c.CreatedAt, &c.UpdatedAt); err != nil {
		return nil, err
	}
	if len(labels) > 0 {
		c.Match.Labels = labels
	}
	c.Rate.Interval = fromMillis(intervalMS)
	c.CreatedAt, c.UpdatedAt = c.CreatedAt.UTC(), c.UpdatedAt.UTC()
	return &c, nil
}

func constraintArgs(c *queue.Constraint) []any {
	return []any{c.Name, c.Match.Queue, c.Match.Type, jsonText(c.Match.Labels), c.Key, c.Concurrency,
		c.Rate.Limit, c.Rate.Interval.Milliseconds(), c.Rate.Burst}
}

// ConstraintCreate implements store.ConstraintStore.
func (s *Store) ConstraintCreate(ctx context.Context, p store.ConstraintCreateParams) (*queue.Constraint, error) {
	c := p.Constraint
	var out *queue.Constraint
	err := pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, sqlConstraintLockSetExclusive); err != nil {
			return err
		}
		old, err := scanConstraint(tx.QueryRow(ctx, sqlConstraintGet, c.Name))
		switch {
		case errors.Is(err, pgx.ErrNoRows):
			var n int
			if err := tx.QueryRow(ctx, sqlConstraintCount).Scan(&n); err != nil {
				return err
			}
			if n >= queue.MaxConstraints {
				return fmt.Errorf("%w: %d constraints exist, the most a server keeps", queue.ErrLimitReached, n)
			}
			if out, err = scanConstraint(tx.QueryRow(ctx, sqlConstraintInsert, constraintArgs(&c)...)); err != nil {
				return err
			}
		case err != nil:
			return err
		case !p.Replace:
			return fmt.Errorf("%w: %q", queue.ErrConstraintExists, c.Name)
		default:
			if old.Rate != c.Rate {
				if _, err := tx.Exec(ctx, sqlConstraintDropBuckets, c.Name); err != nil {
					return err
				}
			}
			if out, err = scanConstraint(tx.QueryRow(ctx, sqlConstraintReplace, constraintArgs(&c)...)); err != nil {
				return err
			}
		}
		_, err = tx.Exec(ctx, sqlConstraintBump)
		return err
	})
	if err != nil {
		if errors.Is(err, queue.ErrConstraintExists) || errors.Is(err, queue.ErrLimitReached) {
			return nil, err
		}
		return nil, errs.Wrap("create constraint", err)
	}
	return out, nil
}

// ConstraintGet implements store.ConstraintStore.
func (s *Store) ConstraintGet(ctx context.Context, name string) (*queue.Constraint, error) {
	c, err := scanConstraint(s.pool.QueryRow(ctx, sqlConstraintGet, name))
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, fmt.Errorf("%w: %q", queue.ErrConstraintNotFound, name)
	}
	if err != nil {
		return nil, errs.Wrap("get constraint", err)
	}
	return c, nil
}

// ConstraintSet implements store.ConstraintStore: the generation and the constraints read in one
// snapshot.
func (s *Store) ConstraintSet(ctx context.Context) (*queue.ConstraintSet, error) {
	var set *queue.ConstraintSet
	err := pgx.BeginTxFunc(ctx, s.pool, pgx.TxOptions{IsoLevel: pgx.RepeatableRead, AccessMode: pgx.ReadOnly}, func(tx pgx.Tx) error {
		var err error
		set, err = readConstraintSet(ctx, tx)
		return err
	})
	if err != nil {
		return nil, errs.Wrap("read constraints", err)
	}
	return set, nil
}

// readConstraintSet reads the generation and the constraints in tx.
func readConstraintSet(ctx context.Context, tx pgx.Tx) (*queue.ConstraintSet, error) {
	set := &queue.ConstraintSet{}
	if err := tx.QueryRow(ctx, sqlConstraintGen).Scan(&set.Gen); err != nil {
		return nil, err
	}
	rows, err := tx.Query(ctx, sqlConstraintList)
	if err != nil {
		return nil, err
	}
	set.Constraints, err = collectConstraints(rows)
	return set, err
}

// collectConstraints reads constraintColumns rows.
func collectConstraints(rows pgx.Rows) ([]*queue.Constraint, error) {
	return pgx.CollectRows(rows, func(r pgx.CollectableRow) (*queue.Constraint, error) { return scanConstraint(r) })
}

// ConstraintDelete implements store.ConstraintStore.
func (s *Store) ConstraintDelete(ctx context.Context, name string) error {
	err := pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, sqlConstraintLockSetExclusive); err != nil {
			return err
		}
		tag, err := tx.Exec(ctx, sqlConstraintDelete, name)
		if err != nil {
			return err
		}
		if tag.RowsAffected() == 0 {
			return fmt.Errorf("%w: %q", queue.ErrConstraintNotFound, name)
		}
		_, err = tx.Exec(ctx, sqlConstraintBump)
		return err
	})
	if err != nil && !errors.Is(err, queue.ErrConstraintNotFound) {
		return errs.Wrap("delete constraint", err)
	}
	return err
}

// ConstraintUsage implements store.ConstraintStore.
func (s *Store) ConstraintUsage(ctx context.Context, p store.ConstraintUsageParams) (*queue.ConstraintUsage, error) {
	var u *queue.ConstraintUsage
	err := pgx.BeginTxFunc(ctx, s.pool, pgx.TxOptions{IsoLevel: pgx.RepeatableRead, AccessMode: pgx.ReadOnly}, func(tx pgx.Tx) error {
		c, err := scanConstraint(tx.QueryRow(ctx, sqlConstraintGet, p.Name))
		if errors.Is(err, pgx.ErrNoRows) {
			return fmt.Errorf("%w: %q", queue.ErrConstraintNotFound, p.Name)
		}
		if err != nil {
			return err
		}
		rows, err := tx.Query(ctx, sqlConstraintUsage, p.Name)
		if err != nil {
			return err
		}
		running := map[string]int{}
		var key string
		var n int
		if _, err := pgx.ForEachRow(rows, []any{&key, &n}, func() error { running[key] = n; return nil }); err != nil {
			return err
		}
		var now time.Time
		if err := tx.QueryRow(ctx, `SELECT now()`).Scan(&now); err != nil {
			return err
		}
		active := map[string]queue.Bucket{}
		if !c.Rate.IsZero() {
			rows, err := tx.Query(ctx, sqlConstraintBucketsActive, p.Name, c.Rate.Refill().Milliseconds())
			if err != nil {
				return err
			}
			var b queue.Bucket
			if _, err := pgx.ForEachRow(rows, []any{&key, &b.Tokens, &b.At}, func() error { active[key] = b; return nil }); err != nil {
				return err
			}
		}
		keys := sqlstore.UsageKeys(p, running, active)
		buckets := map[string]queue.Bucket{}
		if !c.Rate.IsZero() && len(keys) > 0 {
			rows, err := tx.Query(ctx, sqlConstraintBucketsOf, p.Name, keys)
			if err != nil {
				return err
			}
			var b queue.Bucket
			if _, err := pgx.ForEachRow(rows, []any{&key, &b.Tokens, &b.At}, func() error { buckets[key] = b; return nil }); err != nil {
				return err
			}
		}
		u = sqlstore.Usage(c, running, active, keys, buckets, now)
		return nil
	})
	if err != nil {
		if errors.Is(err, queue.ErrConstraintNotFound) {
			return nil, err
		}
		return nil, errs.Wrap("constraint usage", err)
	}
	return u, nil
}

// constraintLockKey is a constraint's advisory lock key: two constraints that share one only
// serialize more than they need.
func constraintLockKey(name string) int32 {
	h := fnv.New32a()
	_, _ = h.Write([]byte(name)) // a hash.Hash never fails
	return int32(h.Sum32())
}

// JobClaimConstrained implements store.ConstraintStore: one transaction on the dispatch pool, in
// three round trips when p.Expect is the set in force (BEGIN with the locks and every read the
// limiter needs; the candidates; the writes with COMMIT), plus one per further round of candidates,
// and one more when it is not.
func (s *Store) JobClaimConstrained(ctx context.Context, p store.JobClaimParams) (*store.ConstrainedClaim, error) {
	conn, err := s.dispatch.Acquire(ctx)
	if err != nil {
		return nil, errs.Wrap("constrained claim", err)
	}
	defer conn.Release()
	out, err := s.claimConstrained(ctx, conn.Conn(), p, p.Expect)
	if errors.Is(err, errConstraintSetMoved) {
		out, err = s.claimConstrained(ctx, conn.Conn(), p, nil)
	}
	if err != nil {
		return nil, errs.Wrap("constrained claim", err)
	}
	return out, nil
}

// errConstraintSetMoved: the set the claim expected is not the one in force; it was rolled back
// before deciding anything.
var errConstraintSetMoved = errors.New("the constraint set changed")

// claimLimits is what a constrained claim reads under its locks.
type claimLimits struct {
	applicable []*queue.Constraint
	running    map[string]int
	buckets    map[string]queue.Bucket
	now        time.Time
}

// queueLimitReads queues on b the locks of the constraints cs (sorted by key: claims that share
// some take them in one order) and the reads of their use into lim.
func queueLimitReads(b *pgx.Batch, cs []*queue.Constraint, lim *claimLimits) {
	lim.applicable, lim.running, lim.buckets = cs, map[string]int{}, map[string]queue.Bucket{}
	if len(cs) == 0 {
		return
	}
	names := make([]string, len(cs))
	locks := make([]int32, len(cs))
	var rated []string
	var refill []int64
	for i, c := range cs {
		names[i], locks[i] = c.Name, constraintLockKey(c.Name)
		if !c.Rate.IsZero() {
			rated = append(rated, c.Name)
			refill = append(refill, c.Rate.TokenTime().Milliseconds()+1)
		}
	}
	slices.Sort(locks)
	b.Queue(sqlConstraintLockEach, slices.Compact(locks))
	b.Queue(sqlConstraintRunning, names).QueryRow(func(r pgx.Row) error {
		var entries []string
		var counts []int
		if err := r.Scan(&lim.now, &entries, &counts); err != nil {
			return err
		}
		for i, e := range entries {
			lim.running[e] = counts[i]
		}
		return nil
	})
	if len(rated) > 0 {
		b.Queue(sqlConstraintBuckets, rated, refill).Query(func(rows pgx.Rows) error {
			var name, key string
			var bk queue.Bucket
			_, err := pgx.ForEachRow(rows, []any{&name, &key, &bk.Tokens, &bk.At}, func() error {
				lim.buckets[queue.LimitEntry(name, key)] = bk
				return nil
			})
			return err
		})
	}
}

// sameReads reports whether the claim's reads for constraints a are those for b: the same names
// (the locks, the running counts) with the same rates (the buckets). The limits themselves are
// the limiter's, from the set in force.
func sameReads(a, b []*queue.Constraint) bool {
	return slices.EqualFunc(a, b, func(x, y *queue.Constraint) bool { return x.Name == y.Name && x.Rate == y.Rate })
}

// claimConstrained runs the claim's transaction on conn, expecting the set expect (nil: none).
func (s *Store) claimConstrained(ctx context.Context, conn *pgx.Conn, p store.JobClaimParams, expect *queue.ConstraintSet) (out *store.ConstrainedClaim, err error) {
	types := p.Types
	if types == nil {
		types = []string{}
	}
	open := false
	defer func() {
		if err != nil && open {
			rollback(conn)
		}
	}()

	// Round trip 1: BEGIN; the set's lock, then (each statement its own snapshot, taken once the
	// lock is held) the generation and the constraints; with an expected set, its locks and use.
	set := &queue.ConstraintSet{}
	var lim claimLimits
	b := &pgx.Batch{}
	b.Queue("BEGIN")
	b.Queue(sqlConstraintLockSet)
	b.Queue(sqlConstraintClock).QueryRow(func(r pgx.Row) error { return r.Scan(&lim.now, &set.Gen) })
	b.Queue(sqlConstraintList).Query(func(rows pgx.Rows) error {
		var err error
		set.Constraints, err = collectConstraints(rows)
		return err
	})
	var expected []*queue.Constraint
	if expect != nil {
		expected = expect.For(p.Queue)
		queueLimitReads(b, expected, &lim)
	}
	open = true
	if err := conn.SendBatch(ctx, b).Close(); err != nil {
		return nil, err
	}
	applicable := set.For(p.Queue)
	switch {
	case expect == nil:
		b = &pgx.Batch{}
		queueLimitReads(b, applicable, &lim)
		if b.Len() > 0 {
			if err := conn.SendBatch(ctx, b).Close(); err != nil {
				return nil, err
			}
		}
	case expect.Gen != set.Gen && !sameReads(expected, applicable):
		return nil, errConstraintSetMoved // the deferred rollback releases the wrong locks
	}

	out = &store.ConstrainedClaim{Gen: set.Gen}
	l := queue.NewLimiter(applicable, lim.running, lim.buckets, lim.now)
	needPayload := queue.NeedsPayload(applicable)
	load := func(entries []string) (map[string]queue.Bucket, error) {
		names, keys := make([]string, len(entries)), make([]string, len(entries))
		for i, e := range entries {
			names[i], keys[i] = queue.SplitLimitEntry(e)
		}
		rows, err := conn.Query(ctx, sqlConstraintBucketsOfEntries, names, keys)
		if err != nil {
			return nil, err
		}
		out := map[string]queue.Bucket{}
		var name, key string
		var bk queue.Bucket
		_, err = pgx.ForEachRow(rows, []any{&name, &key, &bk.Tokens, &bk.At}, func() error {
			out[queue.LimitEntry(name, key)] = bk
			return nil
		})
		return out, err
	}
	taken, keyed, err := sqlstore.ConstrainedSteps(p, l, func(st sqlstore.ClaimStep, blocked, seen []string, n int) ([]sqlstore.ClaimCandidate, error) {
		q, arg := sqlConstraintCandidatesRest, any(nil)
		switch st.Kind {
		case sqlstore.ClaimAged:
			q, arg = sqlConstraintCandidatesAged, p.MaxWait.Microseconds()
		case sqlstore.ClaimLevel:
			q, arg = sqlConstraintCandidatesLevel, int64(st.Priority)
		}
		if blocked == nil {
			blocked = []string{}
		}
		if seen == nil {
			seen = []string{}
		}
		rows, err := conn.Query(ctx, q, p.Queue, types, seen, set.Gen, blocked, needPayload, n, arg)
		if err != nil {
			return nil, err
		}
		return pgx.CollectRows(rows, func(r pgx.CollectableRow) (sqlstore.ClaimCandidate, error) {
			var c sqlstore.ClaimCandidate
			var typ string
			var labels map[string]string
			var payload []byte
			var ctid pgtype.TID
			if err := r.Scan(&ctid, &c.ID, &c.Keyed, &c.Entries, &typ, &labels, &payload); err != nil {
				return c, err
			}
			c.Ref = ctid
			if !c.Keyed {
				c.Job = &queue.Job{ID: c.ID, Queue: p.Queue, Type: typ, Labels: labels, Payload: payload}
			}
			return c, nil
		})
	}, load)
	if err != nil {
		return nil, err
	}

	// The last round trip: the entries computed for jobs passed over, the assignment, the
	// buckets, COMMIT.
	b = &pgx.Batch{}
	if len(keyed) > 0 {
		ctids, keys := candidateArrays(keyed)
		b.Queue(sqlConstraintKeyJobs, ctids, keys, set.Gen)
	}
	if len(taken) > 0 {
		ctids, keys := candidateArrays(taken)
		b.Queue(sqlConstraintAssign, p.WorkerID, ctids, keys, set.Gen, lim.now).Query(func(rows pgx.Rows) error {
			var err error
			out.Jobs, err = pgx.CollectRows(rows, func(r pgx.CollectableRow) (*queue.Job, error) { return scanJob(r) })
			return err
		})
	}
	if bs := l.Buckets(); len(bs) > 0 {
		var cn, keys []string
		var tokens []float64
		var at []time.Time
		for _, e := range slices.Sorted(maps.Keys(bs)) {
			name, key := queue.SplitLimitEntry(e)
			cn, keys = append(cn, name), append(keys, key)
			tokens, at = append(tokens, bs[e].Tokens), append(at, bs[e].At)
		}
		b.Queue(sqlConstraintSaveBuckets, cn, keys, tokens, at)
	}
	b.Queue("COMMIT")
	if err := conn.SendBatch(ctx, b).Close(); err != nil {
		return nil, err
	}
	open = false
	out.Throttled, out.RetryAt = l.Throttled(), l.RetryAt()
	return out, nil
}

// rollback ends the failed transaction of a claim on conn; a connection it cannot roll back is
// closed, so the pool does not hand it out in a transaction.
func rollback(conn *pgx.Conn) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if _, err := conn.Exec(ctx, "ROLLBACK"); err != nil {
		_ = conn.Close(ctx)
	}
}

// candidateArrays are the ctids of candidates and their entries to store, joined by
// queue.EntrySeparator: NULL for a candidate read with its entries (they stay as stored), ” for
// computed entries that are none.
func candidateArrays(cs []sqlstore.ClaimCandidate) (ctids []pgtype.TID, keys []*string) {
	ctids, keys = make([]pgtype.TID, len(cs)), make([]*string, len(cs))
	for i, c := range cs {
		ctids[i] = c.Ref.(pgtype.TID)
		if c.Computed {
			k := strings.Join(c.Entries, queue.EntrySeparator)
			keys[i] = &k
		}
	}
	return ctids, keys
}

// The buckets refilled to full ($1 constraint names, $2 their refill time in ms), at most $3; a
// bucket a claim holds is skipped (the claim writes it as it decided).
const sqlConstraintBucketsPrune = `-- name: constraint_buckets_prune
DELETE FROM constraint_buckets WHERE (constraint_name, key) IN (
    SELECT b.constraint_name, b.key
    FROM unnest($1::text[], $2::bigint[]) AS r(name, refill_ms)
    JOIN constraint_buckets b ON b.constraint_name = r.name
    WHERE b.at <= now() - r.refill_ms * interval '1 millisecond'
    LIMIT $3
    FOR UPDATE OF b SKIP LOCKED)`

// ConstraintBucketsPrune implements store.ConstraintStore.
func (s *Store) ConstraintBucketsPrune(ctx context.Context, p store.ConstraintBucketsPruneParams) (int64, error) {
	if len(p.Refill) == 0 {
		return 0, nil
	}
	var names []string
	var refill []int64
	for n, d := range p.Refill {
		names, refill = append(names, n), append(refill, d.Milliseconds())
	}
	tag, err := s.pool.Exec(ctx, sqlConstraintBucketsPrune, names, refill, p.Limit)
	if err != nil {
		return 0, errs.Wrap("prune constraint buckets", err)
	}
	return tag.RowsAffected(), nil
}
