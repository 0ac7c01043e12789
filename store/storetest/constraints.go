package storetest

import (
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/jq-dev/jq/queue"
	"github.com/jq-dev/jq/store"
	"github.com/jq-dev/jq/store/internal/sqlstore"
)

// constraintSuite runs the contract of store.ConstraintStore. Constraints, their generation and
// their bound (queue.MaxConstraints) are the store's, not a queue's: an isolated store. Subtests run
// in parallel.
func constraintSuite(t *testing.T, f Factory) {
	newStore := isolatedStore(f)
	t.Run("CRUD", func(t *testing.T) { testConstraintCRUD(t, newStore) })
	t.Run("LimitReached", func(t *testing.T) { testConstraintLimitReached(t, newStore) })
	t.Run("ConcurrencyPerKey", func(t *testing.T) { testConstraintConcurrency(t, newStore) })
	t.Run("ParallelClaims", func(t *testing.T) { testConstraintParallel(t, newStore) })
	t.Run("NoHeadOfLineBlocking", func(t *testing.T) { testConstraintHeadOfLine(t, newStore) })
	t.Run("PassedOverRemembered", func(t *testing.T) { testConstraintPassedOverRemembered(t, newStore) })
	t.Run("KeyedAtSubmit", func(t *testing.T) { testConstraintKeyedAtSubmit(t, newStore) })
	t.Run("PayloadKey", func(t *testing.T) { testConstraintPayloadKey(t, newStore) })
	t.Run("Matchers", func(t *testing.T) { testConstraintMatchers(t, newStore) })
	t.Run("Rate", func(t *testing.T) { testConstraintRate(t, newStore) })
	t.Run("FailedAndCancelledFree", func(t *testing.T) { testConstraintFreedByFailure(t, newStore) })
	t.Run("ReplaceRecomputesKeys", func(t *testing.T) { testConstraintReplaceRecomputes(t, newStore) })
	t.Run("DeleteFreesAll", func(t *testing.T) { testConstraintDeleteFrees(t, newStore) })
	t.Run("Weighted", func(t *testing.T) { testConstraintWeighted(t, newStore) })
	t.Run("Usage", func(t *testing.T) { testConstraintUsage(t, newStore) })
	t.Run("UsageRateOnly", func(t *testing.T) { testConstraintUsageRateOnly(t, newStore) })
	t.Run("OtherQueue", func(t *testing.T) { testConstraintOtherQueue(t, newStore) })
	t.Run("ExpectedSet", func(t *testing.T) { testConstraintExpectedSet(t, newStore) })
	t.Run("BucketsPruned", func(t *testing.T) { testConstraintBucketsPruned(t, newStore) })
	t.Run("RatePartlyRefilled", func(t *testing.T) { testConstraintRatePartlyRefilled(t, newStore) })
}

// A bucket written longer ago than one token's time is not among those the claim reads first (it
// holds a token at least), but the claim still decides with what it holds: 10 per 10 s, 8 taken,
// a little over a second later 3 (or, on a slow machine, a few more), never a full bucket's 10.
func testConstraintRatePartlyRefilled(t *testing.T, newStore NewStoreFunc) {
	b := setupConstraintStore(t, newStore)
	b.constraint(queue.Constraint{Name: uniqueName("ten"), Key: "{{.labels.tenant}}",
		Rate: queue.RateLimit{Limit: 10, Interval: 10 * time.Second}})
	b.insertTenant("a", 30)
	first := time.Now()
	require.Len(t, b.claimN(8).Jobs, 8)
	time.Sleep(1100 * time.Millisecond) // the bucket's own clock is what is tested
	got := len(b.claimN(20).Jobs)
	most := 2 + int(time.Since(first)/time.Second) + 1
	require.GreaterOrEqual(t, got, 3)
	require.LessOrEqual(t, got, most, "the bucket's tokens, not a full bucket")
}

// Rate buckets that refilled to full are deleted by ConstraintBucketsPrune (a full bucket is no
// row), the others kept, and the claims decide as before.
func testConstraintBucketsPruned(t *testing.T, newStore NewStoreFunc) {
	b := setupConstraintStore(t, newStore)
	fast, slow := uniqueName("fast"), uniqueName("slow")
	b.constraint(queue.Constraint{Name: fast, Key: "{{.labels.tenant}}", Rate: queue.RateLimit{Limit: 1000, Interval: time.Second, Burst: 1}})
	b.constraint(queue.Constraint{Name: slow, Key: "{{.labels.tenant}}", Rate: queue.RateLimit{Limit: 1, Interval: time.Hour}})
	for i := range 5 {
		b.insertTenant(fmt.Sprint("t", i), 2)
	}
	require.Len(t, b.claimN(10).Jobs, 5, "one per tenant: the slow rate's bucket holds one")

	set, err := b.cs.ConstraintSet(b.ctx)
	require.NoError(t, err)
	p := store.BucketsPruneParams(set, 100)
	for name := range p.Refill {
		if name != fast && name != slow { // other tests' constraints in a shared store
			delete(p.Refill, name)
		}
	}
	require.Len(t, p.Refill, 2)
	var pruned int64
	require.Eventually(t, func() bool {
		n, err := b.cs.ConstraintBucketsPrune(b.ctx, p)
		require.NoError(t, err)
		pruned += n
		return pruned >= 5
	}, 10*time.Second, 5*time.Millisecond)
	require.EqualValues(t, 5, pruned, "the fast constraint's 5 buckets, full again; the slow ones are empty and stay")
	n, err := b.cs.ConstraintBucketsPrune(b.ctx, p)
	require.NoError(t, err)
	require.Zero(t, n)
	require.Empty(t, b.claimN(10).Jobs, "the slow buckets still hold every tenant back")
	u, err := b.cs.ConstraintUsage(b.ctx, store.ConstraintUsageParams{Name: fast, Keys: []string{"t0"}})
	require.NoError(t, err)
	require.InDelta(t, 1, u.Top[0].Tokens, 1e-9, "a pruned bucket reads full")

	p.Limit = 0
	_, err = b.cs.ConstraintBucketsPrune(b.ctx, p)
	require.ErrorIs(t, err, queue.ErrInvalidArgument)
}

// A claim told to expect a set (JobClaimParams.Expect, the engine's cache) decides with the set in
// force whatever it expected: the same, an older one with the same constraints (new limits), or an
// older one with other constraints.
func testConstraintExpectedSet(t *testing.T, newStore NewStoreFunc) {
	b := setupConstraintStore(t, newStore)
	b.constraint(perTenant("x", 1))
	b.insertTenant("a", 4)
	b.insertTenant("b", 4)
	stale, err := b.cs.ConstraintSet(b.ctx)
	require.NoError(t, err)

	unknown := &queue.ConstraintSet{Gen: -1} // the engine before its first read: nothing expected
	res := b.claimC(store.JobClaimParams{Limit: 10, Expect: unknown})
	require.Equal(t, map[string]int{"a": 1, "b": 1}, byTenant(res.Jobs), "a set not read yet: the one in force")
	for _, j := range res.Jobs {
		b.done(j)
	}

	res = b.claimC(store.JobClaimParams{Limit: 10, Expect: stale})
	require.Equal(t, map[string]int{"a": 1, "b": 1}, byTenant(res.Jobs), "the set expected")

	c := perTenant("x", 2)
	c.Match.Queue = b.queue
	_, err = b.cs.ConstraintCreate(b.ctx, store.ConstraintCreateParams{Constraint: c, Replace: true})
	require.NoError(t, err)
	res = b.claimC(store.JobClaimParams{Limit: 10, Expect: stale})
	require.Equal(t, map[string]int{"a": 1, "b": 1}, byTenant(res.Jobs), "x replaced with 2 per tenant: one more each")

	require.NoError(t, b.cs.ConstraintDelete(b.ctx, "x"))
	b.constraint(perTenant("y", 1))
	res = b.claimC(store.JobClaimParams{Limit: 10, Expect: stale})
	require.Equal(t, map[string]int{"a": 1, "b": 1}, byTenant(res.Jobs), "x gone, y new: its own slots")
	require.Equal(t, b.gen(), res.Gen)
	require.Empty(t, b.claimC(store.JobClaimParams{Limit: 10, Expect: stale}).Jobs)
}

// csBundle is a dsBundle whose store also implements store.ConstraintStore and store.RecoveryStore.
type csBundle struct {
	*dsBundle
	cs store.ConstraintStore
	rs store.RecoveryStore
}

func setupConstraintStore(t *testing.T, newStore NewStoreFunc) *csBundle {
	t.Helper()
	b := setupDispatchStore(t, newStore)
	return &csBundle{dsBundle: b, cs: as[store.ConstraintStore](t, b.s), rs: as[store.RecoveryStore](t, b.s)}
}

// constraint creates a constraint on the bundle's queue.
func (b *csBundle) constraint(c queue.Constraint) *queue.Constraint {
	b.t.Helper()
	c.Match.Queue = b.queue
	got, err := b.cs.ConstraintCreate(b.ctx, store.ConstraintCreateParams{Constraint: c})
	require.NoError(b.t, err)
	return got
}

func (b *csBundle) gen() int64 {
	b.t.Helper()
	set, err := b.cs.ConstraintSet(b.ctx)
	require.NoError(b.t, err)
	return set.Gen
}

// claimC runs a constrained claim of the bundle's queue for worker "w" and checks the jobs it took.
func (b *csBundle) claimC(p store.JobClaimParams) *store.ConstrainedClaim {
	b.t.Helper()
	p.Queue, p.WorkerID = b.queue, "w"
	res, err := b.cs.JobClaimConstrained(b.ctx, p)
	require.NoError(b.t, err)
	for _, j := range res.Jobs {
		require.Equal(b.t, queue.StateAssigned, j.State)
		require.Equal(b.t, "w", j.WorkerID)
		require.Equal(b.t, b.queue, j.Queue)
	}
	return res
}

func (b *csBundle) claimN(limit int) *store.ConstrainedClaim {
	b.t.Helper()
	return b.claimC(store.JobClaimParams{Limit: limit})
}

// tenantJob is a job of type typ labelled with its tenant.
func (b *csBundle) tenantJob(typ, tenant string) store.JobInsertParams {
	p := b.job(typ)
	p.Labels = map[string]string{"tenant": tenant}
	return p
}

// insertTenant inserts n jobs of a tenant in one batch.
func (b *csBundle) insertTenant(tenant string, n int) []*queue.Job {
	b.t.Helper()
	ps := make([]store.JobInsertParams, n)
	for i := range ps {
		ps[i] = b.tenantJob("t", tenant)
	}
	return jobsOf(b.insert(ps...))
}

// requirePassedOver checks that jobs a claim did not take are as they were: PENDING, no attempt,
// no worker, no event beyond the submit.
func (b *csBundle) requirePassedOver(js ...*queue.Job) {
	b.t.Helper()
	for _, j := range js {
		got := b.get(j.ID)
		require.Equal(b.t, queue.StatePending, got.State, j.ID)
		require.Zero(b.t, got.Attempt, j.ID)
		require.Empty(b.t, got.WorkerID, j.ID)
		require.Len(b.t, b.events(j.ID), 1, "only the submit's event: %s", j.ID)
	}
}

// byTenant counts jobs per tenant label.
func byTenant(jobs []*queue.Job) map[string]int {
	out := map[string]int{}
	for _, j := range jobs {
		out[j.Labels["tenant"]]++
	}
	return out
}

// done acknowledges and reports a claimed job successful.
func (b *csBundle) done(j *queue.Job) {
	b.t.Helper()
	b.requireApplied(b.report(reportSuccess(j, "ok"))[0], queue.StateDone)
}

func perTenant(name string, concurrency int) queue.Constraint {
	return queue.Constraint{Name: name, Key: "{{.labels.tenant}}", Concurrency: concurrency}
}

func requireSameConstraint(t *testing.T, want, got *queue.Constraint) {
	t.Helper()
	w, g := *want, *got
	require.True(t, w.CreatedAt.Equal(g.CreatedAt), "created_at %s, want %s", g.CreatedAt, w.CreatedAt)
	require.True(t, w.UpdatedAt.Equal(g.UpdatedAt), "updated_at %s, want %s", g.UpdatedAt, w.UpdatedAt)
	w.CreatedAt, w.UpdatedAt, g.CreatedAt, g.UpdatedAt = time.Time{}, time.Time{}, time.Time{}, time.Time{}
	require.Equal(t, w, g)
}

func testConstraintCRUD(t *testing.T, newStore NewStoreFunc) {
	b := setupConstraintStore(t, newStore)
	gen0 := b.gen()
	in := queue.Constraint{
		Name: "email-per-tenant", Match: queue.JobMatcher{Type: "email.*", Labels: map[string]string{"tier": "free"}},
		Key: "{{.labels.tenant}}", Concurrency: 5, Rate: queue.RateLimit{Limit: 100, Interval: time.Minute, Burst: 20},
	}
	created := b.constraint(in)
	in.Match.Queue = b.queue
	require.Equal(t, in.Name, created.Name)
	require.Equal(t, in.Match, created.Match)
	require.Equal(t, in.Key, created.Key)
	require.Equal(t, in.Concurrency, created.Concurrency)
	require.Equal(t, in.Rate, created.Rate)
	require.False(t, created.CreatedAt.IsZero())
	require.True(t, created.CreatedAt.Equal(created.UpdatedAt))
	require.Equal(t, gen0+1, b.gen(), "a create starts a generation")

	got, err := b.cs.ConstraintGet(b.ctx, in.Name)
	require.NoError(t, err)
	requireSameConstraint(t, created, got)

	_, err = b.cs.ConstraintCreate(b.ctx, store.ConstraintCreateParams{Constraint: in})
	require.ErrorIs(t, err, queue.ErrConstraintExists)
	require.Equal(t, gen0+1, b.gen(), "a refused create changes nothing")

	// Replace: updated in place, created_at kept.
	in.Key, in.Concurrency, in.Rate, in.Match.Labels = "", 2, queue.RateLimit{}, nil
	replaced, err := b.cs.ConstraintCreate(b.ctx, store.ConstraintCreateParams{Constraint: in, Replace: true})
	require.NoError(t, err)
	require.Equal(t, "", replaced.Key)
	require.Equal(t, 2, replaced.Concurrency)
	require.True(t, replaced.Rate.IsZero())
	require.Empty(t, replaced.Match.Labels)
	require.True(t, created.CreatedAt.Equal(replaced.CreatedAt))
	require.False(t, replaced.UpdatedAt.Before(created.UpdatedAt))
	require.Equal(t, gen0+2, b.gen(), "a replace starts a generation")
	// Replace of a name not taken creates.
	other := b.constraint(queue.Constraint{Name: "a-first", Concurrency: 1})
	require.Equal(t, gen0+3, b.gen())

	set, err := b.cs.ConstraintSet(b.ctx)
	require.NoError(t, err)
	require.Len(t, set.Constraints, 2)
	requireSameConstraint(t, other, set.Constraints[0])
	requireSameConstraint(t, replaced, set.Constraints[1])

	for _, bad := range []queue.Constraint{
		{Name: "no-limit"},
		{Name: "Bad Name", Concurrency: 1},
		{Name: "bad-key", Key: "{{.nope}}", Concurrency: 1},
		{Name: "bad-rate", Rate: queue.RateLimit{Limit: 1}},
		{Name: "bad-glob", Match: queue.JobMatcher{Type: "["}, Concurrency: 1},
		{Name: "bad-interval", Rate: queue.RateLimit{Limit: 1, Interval: 1500 * time.Microsecond}},
	} {
		_, err := b.cs.ConstraintCreate(b.ctx, store.ConstraintCreateParams{Constraint: bad})
		require.ErrorIs(t, err, queue.ErrInvalidArgument, bad.Name)
	}
	require.Equal(t, gen0+3, b.gen())

	require.NoError(t, b.cs.ConstraintDelete(b.ctx, in.Name))
	require.Equal(t, gen0+4, b.gen(), "a delete starts a generation")
	_, err = b.cs.ConstraintGet(b.ctx, in.Name)
	require.ErrorIs(t, err, queue.ErrConstraintNotFound)
	require.ErrorIs(t, b.cs.ConstraintDelete(b.ctx, in.Name), queue.ErrConstraintNotFound)
	require.Equal(t, gen0+4, b.gen())
	set, err = b.cs.ConstraintSet(b.ctx)
	require.NoError(t, err)
	require.Len(t, set.Constraints, 1)
	require.Equal(t, "a-first", set.Constraints[0].Name)
}

func testConstraintLimitReached(t *testing.T, newStore NewStoreFunc) {
	b := setupConstraintStore(t, newStore)
	for i := range queue.MaxConstraints {
		b.constraint(queue.Constraint{Name: fmt.Sprintf("c%03d", i), Concurrency: 1})
	}
	gen := b.gen()
	_, err := b.cs.ConstraintCreate(b.ctx, store.ConstraintCreateParams{Constraint: queue.Constraint{Name: "one-more", Concurrency: 1}})
	require.ErrorIs(t, err, queue.ErrLimitReached)
	require.Equal(t, gen, b.gen())
	// Replacing one is not one more.
	_, err = b.cs.ConstraintCreate(b.ctx, store.ConstraintCreateParams{
		Constraint: queue.Constraint{Name: "c000", Concurrency: 2}, Replace: true,
	})
	require.NoError(t, err)
	require.NoError(t, b.cs.ConstraintDelete(b.ctx, "c001"))
	b.constraint(queue.Constraint{Name: "one-more", Concurrency: 1})
}

// Limit 2 per tenant: a claim takes 2 of each and passes over the rest, untouched; a report frees
// one slot of its tenant.
func testConstraintConcurrency(t *testing.T, newStore NewStoreFunc) {
	b := setupConstraintStore(t, newStore)
	b.constraint(perTenant("per-tenant", 2))
	all := append(append(b.insertTenant("a", 4), b.insertTenant("b", 4)...), b.insertTenant("c", 4)...)

	res := b.claimN(10)
	require.Len(t, res.Jobs, 6)
	require.Equal(t, map[string]int{"a": 2, "b": 2, "c": 2}, byTenant(res.Jobs))
	require.Equal(t, 6, res.Throttled["per-tenant"])
	require.True(t, res.RetryAt.IsZero(), "a concurrency limit frees with a report, not at a time")
	require.Equal(t, b.gen(), res.Gen)
	taken := map[string]*queue.Job{}
	for _, j := range res.Jobs {
		require.Equal(t, 1, j.Attempt)
		evs := b.events(j.ID)
		b.requireEvent(evs[len(evs)-1], 2, queue.StatePending, queue.StateAssigned, queue.ReasonAssigned, "w", 1)
		taken[j.ID] = j
	}
	var rest []*queue.Job
	for _, j := range all {
		if taken[j.ID] == nil {
			rest = append(rest, j)
		}
	}
	b.requirePassedOver(rest...)

	require.Empty(t, b.claimN(10).Jobs, "every tenant at its limit")
	b.requirePassedOver(rest...)

	var a *queue.Job
	for _, j := range res.Jobs {
		if j.Labels["tenant"] == "a" {
			a = j
			break
		}
	}
	b.done(a)
	again := b.claimN(10)
	require.Len(t, again.Jobs, 1)
	require.Equal(t, "a", again.Jobs[0].Labels["tenant"])
	require.Empty(t, b.claimN(10).Jobs)
}

// Claims that run at once never admit more than the limit together: the constrained claims of one
// constraint are one step each, whatever the sessions or replicas.
func testConstraintParallel(t *testing.T, newStore NewStoreFunc) {
	b := setupConstraintStore(t, newStore)
	b.constraint(perTenant("per-tenant", 3))
	b.insertTenant("a", 40)
	b.insertTenant("b", 40)
	const claims = 8
	for round := range 2 {
		var (
			mu  sync.Mutex
			got []*queue.Job
			wg  sync.WaitGroup
		)
		errs := make([]error, claims)
		for i := range claims {
			wg.Add(1)
			go func() {
				defer wg.Done()
				res, err := b.cs.JobClaimConstrained(b.ctx, store.JobClaimParams{Queue: b.queue, WorkerID: "w", Limit: 5})
				if errs[i] = err; err == nil {
					mu.Lock()
					got = append(got, res.Jobs...)
					mu.Unlock()
				}
			}()
		}
		wg.Wait()
		for _, err := range errs {
			require.NoError(t, err)
		}
		require.Equal(t, map[string]int{"a": 3, "b": 3}, byTenant(got), "round %d", round)
		for _, j := range got {
			b.done(j)
		}
	}
}

// Tenant a's 50 jobs ahead of tenant b's 5, limit 1: one claim takes a's first and b's first.
func testConstraintHeadOfLine(t *testing.T, newStore NewStoreFunc) {
	b := setupConstraintStore(t, newStore)
	b.constraint(perTenant("one-each", 1))
	as := b.insertTenant("a", 50)
	bs := b.insertTenant("b", 5)
	due := b.due(store.MaxDispatchBatch)
	require.Len(t, due, 55)

	res := b.claimN(10)
	require.Len(t, res.Jobs, 2)
	require.Equal(t, due[0].ID, res.Jobs[0].ID, "the head of the queue, a's")
	require.Equal(t, "a", res.Jobs[0].Labels["tenant"])
	require.Equal(t, "b", res.Jobs[1].Labels["tenant"])
	require.Positive(t, res.Throttled["one-each"])
	require.Empty(t, b.claimN(10).Jobs)
	pending := 0
	for _, j := range append(as, bs...) {
		if j.ID != res.Jobs[0].ID && j.ID != res.Jobs[1].ID {
			pending++
			b.requirePassedOver(j)
		}
	}
	require.Equal(t, 53, pending)
}

// More blocked jobs ahead than one claim reads (sqlstore.ConstraintClaimRounds): the jobs a claim
// passed over are remembered with their keys, so the claims after it read past them.
func testConstraintPassedOverRemembered(t *testing.T, newStore NewStoreFunc) {
	c := setupConstraintStore(t, newStore)
	c.constraint(perTenant("one-each", 1))
	c.insertTenant("a", 5*sqlstore.ConstraintClaimRounds*sqlstore.ConstraintCandidates(1))
	last := c.insertOne(c.tenantJob("t", "b"))
	require.Len(t, c.claimN(1).Jobs, 1)
	for claims := 0; ; claims++ {
		require.Less(t, claims, 10, "b's job is never reached")
		if got := c.claimN(1).Jobs; len(got) > 0 {
			require.Equal(t, []string{last.ID}, ids(got))
			break
		}
	}
}

// Entries computed at submit (store.LimitKeys) are the job's at their generation: a claim uses them
// as stored, and computes them again only at another generation.
func testConstraintKeyedAtSubmit(t *testing.T, newStore NewStoreFunc) {
	b := setupConstraintStore(t, newStore)
	b.constraint(perTenant("per-tenant", 1))
	gen := b.gen()
	first := b.insertOne(b.tenantJob("t", "x"))
	require.Equal(t, []string{first.ID}, ids(b.claimN(10).Jobs))

	keyed := func(tenant string, gen int64, entries ...string) store.JobInsertParams {
		p := b.tenantJob("t", tenant)
		p.Limits = &store.LimitKeys{Entries: entries, Gen: gen}
		return p
	}
	res := jobsOf(b.insert(
		keyed("a", gen, "per-tenant:x"),     // stored: x's, at its limit
		keyed("x", gen-1, "per-tenant:zzz"), // stale: computed again, x's
		keyed("x", gen),                     // stored: no entry, no limit
		keyed("y", gen, "per-tenant:y"),
	))
	got := b.claimN(10)
	require.ElementsMatch(t, []string{res[2].ID, res[3].ID}, ids(got.Jobs))
	b.requirePassedOver(res[0], res[1])
	require.Equal(t, 1, got.Throttled["per-tenant"], "the stale one, computed and held")
	u, err := b.cs.ConstraintUsage(b.ctx, store.ConstraintUsageParams{Name: "per-tenant", Top: 10})
	require.NoError(t, err)
	require.Equal(t, 2, u.Running, "x's first and y's: the job without entries counts against none")
	require.Equal(t, []queue.ConstraintKeyUsage{{Key: "x", Running: 1}, {Key: "y", Running: 1}}, u.Top)
}

// A key read from the payload: {{.payload.customer_id}}, a string or a number.
func testConstraintPayloadKey(t *testing.T, newStore NewStoreFunc) {
	b := setupConstraintStore(t, newStore)
	b.constraint(queue.Constraint{Name: "per-customer", Key: "{{.payload.customer_id}}", Concurrency: 1})
	var ps []store.JobInsertParams
	for _, payload := range []string{`{"customer_id":"c1"}`, `{"customer_id":"c1"}`, `{"customer_id":42}`,
		`{"customer_id":42}`, `{"other":1}`, `not json`} {
		p := b.job("t")
		p.Payload = []byte(payload)
		ps = append(ps, p)
	}
	b.insert(ps...)
	res := b.claimN(10)
	got := map[string]int{}
	for _, j := range res.Jobs {
		got[string(j.Payload)]++
	}
	// The last two have the key "" (no field, no object): one of them.
	require.Len(t, res.Jobs, 3, "%v", got)
	require.Equal(t, 1, got[`{"customer_id":"c1"}`])
	require.Equal(t, 1, got[`{"customer_id":42}`])
	require.Equal(t, 3, res.Throttled["per-customer"])
}

// A type glob and labels select the jobs; the others are claimed as if there were no constraint.
func testConstraintMatchers(t *testing.T, newStore NewStoreFunc) {
	b := setupConstraintStore(t, newStore)
	b.constraint(queue.Constraint{
		Name: "free-email", Match: queue.JobMatcher{Type: "email.*", Labels: map[string]string{"tier": "free"}},
		Concurrency: 1,
	})
	job := func(typ, tier string) store.JobInsertParams {
		p := b.job(typ)
		p.Labels = map[string]string{"tier": tier}
		return p
	}
	matched := jobsOf(b.insert(job("email.send", "free"), job("email.send", "free"), job("email.bulk", "free")))
	others := jobsOf(b.insert(job("sms", "free"), job("sms", "free"), job("email.send", "paid"), job("email.send", "paid"),
		job("email", "free")))
	res := b.claimN(20)
	require.Len(t, res.Jobs, 1+len(others))
	took := map[string]bool{}
	for _, j := range res.Jobs {
		took[j.ID] = true
	}
	for _, j := range others {
		require.True(t, took[j.ID], "%s %v is not matched", j.Type, j.Labels)
	}
	n := 0
	for _, j := range matched {
		if took[j.ID] {
			n++
		}
	}
	require.Equal(t, 1, n, "one free email at a time")
	require.Equal(t, 2, res.Throttled["free-email"])

	// A typed claim sees only its types.
	bb := b.insertOne(job("email.send", "paid"))
	res = b.claimC(store.JobClaimParams{Limit: 10, Types: []string{"email.send"}})
	require.Equal(t, []string{bb.ID}, ids(res.Jobs))
}

// 5 per hour: five start, the sixth waits for a token (RetryAt); a replace with the same rate keeps
// the buckets, one with another rate starts them full.
func testConstraintRate(t *testing.T, newStore NewStoreFunc) {
	b := setupConstraintStore(t, newStore)
	rate := queue.RateLimit{Limit: 5, Interval: time.Hour}
	c := b.constraint(queue.Constraint{Name: "five-an-hour", Rate: rate})
	jobs := b.insertN(12)
	before := time.Now()
	res := b.claimN(10)
	require.Len(t, res.Jobs, 5)
	require.Equal(t, 7, res.Throttled["five-an-hour"])
	require.False(t, res.RetryAt.IsZero())
	// One token every 12 minutes (allowing for clocks apart by a minute).
	require.WithinDuration(t, before.Add(12*time.Minute), res.RetryAt, time.Minute)

	again := b.claimN(10)
	require.Empty(t, again.Jobs)
	require.False(t, again.RetryAt.IsZero(), "the empty bucket is known before any candidate is read")
	require.WithinDuration(t, res.RetryAt, again.RetryAt, time.Minute)

	// Finishing jobs gives no token back.
	for _, j := range res.Jobs {
		b.done(j)
	}
	require.Empty(t, b.claimN(10).Jobs)

	c.Concurrency = 100
	_, err := b.cs.ConstraintCreate(b.ctx, store.ConstraintCreateParams{Constraint: *c, Replace: true})
	require.NoError(t, err)
	require.Empty(t, b.claimN(10).Jobs, "same rate: the bucket is kept")

	c.Rate = queue.RateLimit{Limit: 6, Interval: time.Hour}
	_, err = b.cs.ConstraintCreate(b.ctx, store.ConstraintCreateParams{Constraint: *c, Replace: true})
	require.NoError(t, err)
	require.Len(t, b.claimN(10).Jobs, 6, "another rate: a full bucket")
	require.Len(t, jobs, 12)
}

// A job counts until it leaves ASSIGNED and RUNNING, whoever moves it: the reaper's failure, a cancel.
func testConstraintFreedByFailure(t *testing.T, newStore NewStoreFunc) {
	b := setupConstraintStore(t, newStore)
	b.constraint(queue.Constraint{Name: "single", Concurrency: 1})
	b.insertN(4)

	first := b.claimN(5).Jobs
	require.Len(t, first, 1)
	require.Empty(t, b.claimN(5).Jobs)
	out, err := b.rs.JobFailMany(b.ctx, []store.JobFailParams{{JobLease: leaseOf(first[0]), Reason: "lease_expired"}})
	require.NoError(t, err)
	require.NoError(t, out[0].Err)

	second := b.claimN(5).Jobs
	require.Len(t, second, 1)
	require.Empty(t, b.claimN(5).Jobs)
	b.ack(leaseOf(second[0]))
	out, err = b.rs.JobFailMany(b.ctx, []store.JobFailParams{{JobLease: leaseOf(second[0]), Reason: "timeout"}})
	require.NoError(t, err)
	require.NoError(t, out[0].Err)

	third := b.claimN(5).Jobs
	require.Len(t, third, 1)
	d, _, err := queue.Cancel(queue.StateAssigned)
	require.NoError(t, err)
	b.move(third[0], d.To, store.JobTransitionParams{Reason: d.Reason})

	fourth := b.claimN(5).Jobs
	require.Len(t, fourth, 1)
	require.Empty(t, b.claimN(5).Jobs)
}

// A replaced constraint's new key template applies to the jobs whose entries were computed before
// (the generation): they are keyed again.
func testConstraintReplaceRecomputes(t *testing.T, newStore NewStoreFunc) {
	b := setupConstraintStore(t, newStore)
	c := b.constraint(perTenant("by-key", 1))
	var ps []store.JobInsertParams
	for _, region := range []string{"eu", "us", "ap"} {
		p := b.tenantJob("t", "a")
		p.Labels["region"] = region
		ps = append(ps, p)
	}
	b.insert(ps...)
	res := b.claimN(10)
	require.Len(t, res.Jobs, 1)
	require.Equal(t, 2, res.Throttled["by-key"])
	require.Empty(t, b.claimN(10).Jobs, "tenant a is at its limit")

	c.Key = "{{.labels.region}}"
	_, err := b.cs.ConstraintCreate(b.ctx, store.ConstraintCreateParams{Constraint: *c, Replace: true})
	require.NoError(t, err)
	again := b.claimN(10)
	require.Len(t, again.Jobs, 2, "one per region now")
	require.Greater(t, again.Gen, res.Gen)
	regions := map[string]bool{}
	for _, j := range append(res.Jobs, again.Jobs...) {
		regions[j.Labels["region"]] = true
	}
	require.Len(t, regions, 3)

	// The job running since before counts under the entry it was assigned with (tenant a's), which
	// no key of the new template gives: a new job of its region starts.
	p := b.tenantJob("t", "a")
	p.Labels["region"] = res.Jobs[0].Labels["region"]
	b.insertOne(p)
	require.Len(t, b.claimN(10).Jobs, 1)
}

func testConstraintDeleteFrees(t *testing.T, newStore NewStoreFunc) {
	b := setupConstraintStore(t, newStore)
	b.constraint(perTenant("per-tenant", 1))
	b.constraint(queue.Constraint{Name: "rate", Rate: queue.RateLimit{Limit: 1, Interval: time.Hour}})
	b.insertTenant("a", 3)
	b.insertTenant("b", 3)
	require.Len(t, b.claimN(10).Jobs, 1, "the rate allows one")
	require.NoError(t, b.cs.ConstraintDelete(b.ctx, "rate"))
	require.Len(t, b.claimN(10).Jobs, 1, "b's first; a is at its limit")
	require.NoError(t, b.cs.ConstraintDelete(b.ctx, "per-tenant"))
	res := b.claimN(10)
	require.Len(t, res.Jobs, 4)
	require.Empty(t, res.Throttled)
	require.True(t, res.RetryAt.IsZero())

	// A constraint created again starts from the jobs running now and a full bucket.
	b.constraint(queue.Constraint{Name: "rate", Rate: queue.RateLimit{Limit: 1, Interval: time.Hour}})
	b.insertTenant("a", 2)
	require.Len(t, b.claimN(10).Jobs, 1)
}

// The weighted claim's steps with a constraint: each step passes over the blocked keys.
func testConstraintWeighted(t *testing.T, newStore NewStoreFunc) {
	b := setupConstraintStore(t, newStore)
	b.constraint(perTenant("per-tenant", 1))
	var low, high []*queue.Job
	for range 3 {
		p := b.tenantJob("t", "a")
		low = append(low, b.insertOne(p))
		p = b.tenantJob("t", "b")
		p.Priority = 9
		high = append(high, b.insertOne(p))
	}
	res := b.claimC(store.JobClaimParams{Limit: 4, Levels: []queue.LevelQuota{{Priority: 0, Max: 2}, {Priority: 9, Max: 2}}})
	require.Equal(t, []string{low[0].ID, high[0].ID}, ids(res.Jobs), "level 0's first, then level 9's")
	require.Equal(t, 4, res.Throttled["per-tenant"])
	b.requirePassedOver(low[1], low[2], high[1], high[2])

	b.done(res.Jobs[1])
	res = b.claimC(store.JobClaimParams{Limit: 4, Levels: []queue.LevelQuota{{Priority: 0, Max: 4}}})
	require.Equal(t, []string{high[1].ID}, ids(res.Jobs), "b's next, by the rest of the batch")
}

func testConstraintUsage(t *testing.T, newStore NewStoreFunc) {
	b := setupConstraintStore(t, newStore)
	b.constraint(queue.Constraint{Name: "use", Key: "{{.labels.tenant}}", Concurrency: 5,
		Rate: queue.RateLimit{Limit: 100, Interval: time.Hour}})
	b.constraint(queue.Constraint{Name: "conc-only", Concurrency: 50})
	b.insertTenant("a", 3)
	b.insertTenant("c", 1)
	b.insertTenant("b", 1)
	require.Len(t, b.claimN(10).Jobs, 5)

	u, err := b.cs.ConstraintUsage(b.ctx, store.ConstraintUsageParams{Name: "use", Top: 10})
	require.NoError(t, err)
	require.Equal(t, 5, u.Running)
	require.Equal(t, 3, u.Keys)
	require.Len(t, u.Top, 3)
	for i, want := range []struct {
		key     string
		running int
	}{{"a", 3}, {"b", 1}, {"c", 1}} {
		require.Equal(t, want.key, u.Top[i].Key)
		require.Equal(t, want.running, u.Top[i].Running)
		require.InDelta(t, float64(100-want.running), u.Top[i].Tokens, 0.5)
	}

	u, err = b.cs.ConstraintUsage(b.ctx, store.ConstraintUsageParams{Name: "use", Keys: []string{"zzz", "c"}, Top: 1})
	require.NoError(t, err)
	require.Len(t, u.Top, 3)
	require.Equal(t, queue.ConstraintKeyUsage{Key: "zzz", Running: 0, Tokens: 100}, u.Top[0], "full bucket")
	require.Equal(t, "c", u.Top[1].Key)
	require.Equal(t, 1, u.Top[1].Running)
	require.Equal(t, "a", u.Top[2].Key)

	u, err = b.cs.ConstraintUsage(b.ctx, store.ConstraintUsageParams{Name: "conc-only", Top: 5})
	require.NoError(t, err)
	require.Equal(t, 5, u.Running)
	require.Equal(t, 1, u.Keys)
	require.Equal(t, []queue.ConstraintKeyUsage{{Key: "", Running: 5}}, u.Top, "no rate: no tokens")

	u, err = b.cs.ConstraintUsage(b.ctx, store.ConstraintUsageParams{Name: "use"})
	require.NoError(t, err)
	require.Equal(t, 5, u.Running)
	require.Empty(t, u.Top)

	_, err = b.cs.ConstraintUsage(b.ctx, store.ConstraintUsageParams{Name: "none", Top: 1})
	require.ErrorIs(t, err, queue.ErrConstraintNotFound)
	for _, top := range []int{-1, store.MaxUsageTop + 1} {
		_, err = b.cs.ConstraintUsage(b.ctx, store.ConstraintUsageParams{Name: "use", Top: top})
		require.ErrorIs(t, err, queue.ErrInvalidArgument, "top %d", top)
	}
}

// A rate-only constraint's keys are in use while their buckets refill, though no job of theirs
// runs: jobs waiting for tokens show their key, with the tokens left.
func testConstraintUsageRateOnly(t *testing.T, newStore NewStoreFunc) {
	b := setupConstraintStore(t, newStore)
	b.constraint(queue.Constraint{Name: "rate-only", Key: "{{.labels.tenant}}", Rate: queue.RateLimit{Limit: 2, Interval: time.Hour}})
	b.insertTenant("r", 5)
	b.insertTenant("s", 1)
	started := b.claimN(10).Jobs
	require.Equal(t, map[string]int{"r": 2, "s": 1}, byTenant(started))
	for _, j := range started {
		b.done(j)
	}
	u, err := b.cs.ConstraintUsage(b.ctx, store.ConstraintUsageParams{Name: "rate-only", Top: 10})
	require.NoError(t, err)
	require.Zero(t, u.Running)
	require.Equal(t, 2, u.Keys, "both keys took tokens within the refill time")
	require.Len(t, u.Top, 2)
	require.Equal(t, "r", u.Top[0].Key, "fewest tokens first")
	require.InDelta(t, 0, u.Top[0].Tokens, 0.5)
	require.Equal(t, "s", u.Top[1].Key)
	require.InDelta(t, 1, u.Top[1].Tokens, 0.5)
}

// A queue no constraint applies to is claimed as JobClaim claims it; a malformed claim is refused.
func testConstraintOtherQueue(t *testing.T, newStore NewStoreFunc) {
	b := setupConstraintStore(t, newStore)
	other := b.newQueue(store.QueueCreateParams{}).Name
	_, err := b.cs.ConstraintCreate(b.ctx, store.ConstraintCreateParams{
		Constraint: queue.Constraint{Name: "elsewhere", Match: queue.JobMatcher{Queue: other}, Concurrency: 1},
	})
	require.NoError(t, err)
	b.insertN(5)
	due := b.due(10)
	res := b.claimN(10)
	require.Len(t, res.Jobs, 5)
	for i, j := range res.Jobs {
		require.Equal(t, due[i].ID, j.ID, "dispatch order")
	}
	require.Empty(t, res.Throttled)
	require.Equal(t, b.gen(), res.Gen)

	for _, p := range []store.JobClaimParams{
		{Queue: b.queue, WorkerID: "w", Limit: 0},
		{Queue: b.queue, WorkerID: "", Limit: 1},
		{Queue: "Not A Queue", WorkerID: "w", Limit: 1},
	} {
		_, err := b.cs.JobClaimConstrained(b.ctx, p)
		require.ErrorIs(t, err, queue.ErrInvalidArgument, "%+v", p)
	}
}
